package integrity

import (
	"os"

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
