//go:build unix

package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// tmpSeq makes WriteAt's temporary names differ within a process; the pid makes them differ
// between processes. O_EXCL, not the name, is what keeps another's file from being written.
var tmpSeq atomic.Uint64

// WriteAt replaces name in the folder dir (an open descriptor of it; O_PATH is enough) with
// data, with mode perm (not masked by the umask), never leaving dir: name must be one path
// element, the temporary file is created beside it exclusively and without following a symlink,
// and the rename is within dir. A symlink at name is replaced, never followed. So a folder
// opened once, beneath a root another party can change, is written without resolving a path
// again. When sync is set, the file is synced before the rename and the folder after it, as
// WriteFile does; without it a reader still sees the old content or the new, never a part, but
// a crash may lose the replacement (for a file rewritten often whose loss costs nothing durable).
// On an error the temporary file is gone and name is as it was, unless only the folder's sync
// failed (the error says so).
func WriteAt(dir int, name string, data []byte, perm fs.FileMode, sync bool) error {
	return writeAt(dir, name, data, perm, sync, false, renameOver)
}

// renameOver moves the temporary file tmp to name within dir, replacing what is there.
func renameOver(dir int, tmp, name string) error { return unix.Renameat(dir, tmp, dir, name) }

// writeAt writes data to a temporary file beside name in dir and has place move it to name.
// With umasked the temporary file is created with perm as open(2) applies it (masked by the
// umask); otherwise it is created 0600 and given perm unmasked before it is placed.
func writeAt(dir int, name string, data []byte, perm fs.FileMode, sync, umasked bool, place func(dir int, tmp, name string) error) (err error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("write %q: not a name within a folder", name)
	}
	createMode := uint32(0o600)
	if umasked {
		createMode = uint32(perm.Perm())
	}
	var tmp string
	fd := -1
	for range 100 {
		tmp = "." + name + ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(tmpSeq.Add(1), 10)
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, createMode)
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err == nil {
			return
		}
		if rerr := unix.Unlinkat(dir, tmp, 0); rerr != nil && !errors.Is(rerr, unix.ENOENT) {
			err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
		}
	}()
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil && !umasked {
		err = f.Chmod(perm)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(dir, tmp, name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if !sync {
		return nil
	}
	// An O_PATH descriptor cannot be synced: open the folder itself through it.
	d, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Fsync(d)
		unix.Close(d)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: a file system without directory sync
		return fmt.Errorf("write %s: sync its folder: %w", name, err)
	}
	return nil
}
