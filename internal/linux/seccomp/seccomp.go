// Package seccomp is the seccomp filter of a box's program: system calls that debug other
// processes, mount, make namespaces, load kernel code and the like fail with EPERM (or ENOSYS,
// so that libc falls back to a call the filter can read), as do foreign architectures, other
// socket families, setuid bits and TIOCSTI. Assembled in pure Go (go-seccomp-bpf and a preamble
// of its own), loaded by the exec stage just before the program's execve.
package seccomp
