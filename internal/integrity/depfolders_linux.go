package integrity

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// depIdentity returns the identity of the folder p (not followed if a symlink): its device,
// inode and birth time. An inode number a removed folder freed may be given to the next one
// made; its birth time is not (where the file system keeps one: ext4, xfs, btrfs, tmpfs).
func depIdentity(p string) (DepFolder, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &st); err != nil {
		return DepFolder{}, err
	}
	d := DepFolder{Dev: unix.Mkdev(st.Dev_major, st.Dev_minor), Ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		d.Btime = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return d, nil
}

// emptyDir reports whether p is a folder (not followed if a symlink) with no entry.
func emptyDir(p string) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// errDepBudget ends changedWithin when its budget of entries is spent.
var errDepBudget = errors.New("past the bound of entries looked at")

// changedWithin returns the first entry of the folder p (p itself included; a symlink is not
// followed) whose ctime is at or after since (ns), or "" when none is; it takes one from
// *budget per entry, and fails with errDepBudget when that is spent. A ctime is set by the
// kernel at every write, chmod, link, rename or removal of the entry (for a folder: of an
// entry in it), never by a program: a folder in which nothing has one since the launch began
// holds nothing written since.
func changedWithin(p string, since int64, budget *int) (string, error) {
	found := ""
	err := filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable meanwhile: its folder's ctime tells a change
		}
		if *budget <= 0 {
			return errDepBudget
		}
		*budget--
		var st unix.Stat_t
		if unix.Lstat(q, &st) != nil || st.Ctim.Nano() < since {
			return nil
		}
		found = q
		return fs.SkipAll
	})
	return found, err
}
