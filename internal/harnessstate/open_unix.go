//go:build !windows

package harnessstate

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// openFlags are added to every open of a state file: never through a link a box left (the
// os.Root already keeps it beneath the directory), and never blocking on a FIFO.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// replaceFile writes b to a new file beside rel (beneath root) and renames it over rel,
// whatever is there but a folder that holds anything (atomicfile.WriteAt, in the folder opened
// once beneath root).
func replaceFile(root *os.Root, rel string, b []byte) error {
	dir, err := root.OpenFile(filepath.Dir(rel), os.O_RDONLY|syscall.O_DIRECTORY|openFlags, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	return atomicfile.WriteAt(int(dir.Fd()), filepath.Base(rel), b, 0o600, false)
}
