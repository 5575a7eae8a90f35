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

// QuarantineSuffix is what a file moved aside (RenameAside) gets before its number, and
// begins the name of the hidden folder a folder moved aside goes into: neither git nor the
// agents read it. It is no mark for agentbox's own checks, which pass over what they moved by
// their record of it: a box can give any file or folder this name.
const QuarantineSuffix = ".agentbox-quarantined-"

// RenameAside moves name in the folder dirfd aside, never over an existing file, and returns
// its new name relative to dirfd: a file (or a symlink) is renamed to
// name.agentbox-quarantined-N, a folder is moved under its own name into the hidden folder
// .agentbox-quarantined-N beside it (made when absent, mode 0700; one that is a symlink or not
// a folder, a box's, is passed over), with the first N that is free.
//
// A file renamed so no longer has the name or extension a tool looks for. A folder's files
// keep theirs, so the folder keeps its own name, in a hidden one: the host's tools that skip a
// folder by name (node's test runner and jest skip node_modules) or skip hidden folders (go
// ./..., pytest) skip it there too. Renamed in place to node_modules.agentbox-quarantined-1, a
// box's node_modules had the host's npm test (node --test) run its test files (review 15,
// F13).
func RenameAside(dirfd int, name string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", err
	}
	folder := st.Mode&unix.S_IFMT == unix.S_IFDIR
	for n := 1; n < 1000; n++ {
		var err error
		aside := name + QuarantineSuffix + strconv.Itoa(n)
		if !folder {
			err = unix.Renameat2(dirfd, name, dirfd, aside, unix.RENAME_NOREPLACE)
		} else {
			q := QuarantineSuffix + strconv.Itoa(n)
			aside = q + "/" + name
			if err := unix.Mkdirat(dirfd, q, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return "", err
			}
			qfd, oerr := unix.Openat(dirfd, q, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if oerr != nil {
				continue // a symlink or a file of that name: the next
			}
			err = unix.Renameat2(dirfd, name, qfd, name, unix.RENAME_NOREPLACE)
			unix.Close(qfd)
		}
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
