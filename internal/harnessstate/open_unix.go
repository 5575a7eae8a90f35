//go:build !windows

package harnessstate

import "syscall"

// openFlags are added to every open of a state file: never through a link a box left (the
// os.Root already keeps it beneath the directory), and never blocking on a FIFO.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
