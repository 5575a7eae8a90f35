package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// CreateAt makes name in the folder dir (an open descriptor of it; O_PATH is enough) a new file
// holding data, as WriteAt writes, except that it never replaces anything: when name exists (a
// file, a folder, a symlink, even a dangling one), it fails with an error that errors.Is
// matches to fs.ErrExist, and name is left as it is. The file appears at name whole: a reader
// never finds it empty or partly written, and nothing is ever written through name. perm is
// masked by the umask, as open(2)'s mode is. With sync, the file and then the folder are synced.
// On an error the temporary file is gone.
func CreateAt(dir int, name string, data []byte, perm fs.FileMode, sync bool) error {
	return writeAt(dir, name, data, perm, sync, true, placeNew)
}

// renameNoReplace is renameat2(RENAME_NOREPLACE) within dir (a variable for the test of the
// fallback).
var renameNoReplace = func(dir int, tmp, name string) error {
	return unix.Renameat2(dir, tmp, dir, name, unix.RENAME_NOREPLACE)
}

// placeNew moves tmp to name within dir unless name exists.
func placeNew(dir int, tmp, name string) error {
	err := renameNoReplace(dir, tmp, name)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	// A file system without RENAME_NOREPLACE (NFS, some FUSE file systems): a hard link to the
	// new file fails as atomically when name exists; the temporary name goes after it.
	if err := unix.Linkat(dir, tmp, dir, name, 0); err != nil {
		return err
	}
	if err := unix.Unlinkat(dir, tmp, 0); err != nil {
		return fmt.Errorf("%s is in place, but its temporary name %s remains: %w", name, tmp, err)
	}
	return nil
}

// QuarantineSuffix is what a file moved aside (RenameAside) gets before its number: nothing of
// agentbox takes path.agentbox-quarantined-N for configuration, and neither git nor the
// agents read it.
const QuarantineSuffix = ".agentbox-quarantined-"

// RenameAside renames name in the folder dirfd to name.agentbox-quarantined-N, with the first
// N that is free (never over an existing file), and returns the new name.
func RenameAside(dirfd int, name string) (string, error) {
	for n := 1; n < 1000; n++ {
		aside := name + QuarantineSuffix + strconv.Itoa(n)
		err := unix.Renameat2(dirfd, name, dirfd, aside, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		return aside, nil
	}
	return "", errors.New("too many quarantined files")
}
