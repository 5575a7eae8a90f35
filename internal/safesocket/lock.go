package safesocket

import (
	"fmt"
	"os"
	"path/filepath"
)

// FileLock is an exclusive flock(2) lock on a file in an owner-checked directory. It is held
// until Unlock or until the process exits; it excludes other processes and other FileLocks of
// this process alike.
type FileLock struct {
	f *os.File
}

// Lock takes the exclusive lock on path, waiting while another process holds it. path's
// directory must pass CheckOwner (0700, the caller's); the lock file is created 0600 if absent,
// and a lock file that is a symbolic link or belongs to another uid fails closed.
func Lock(path string) (*FileLock, error) { return lock(path, true) }

// TryLock is Lock without waiting: it returns ErrLocked when the lock is held.
func TryLock(path string) (*FileLock, error) { return lock(path, false) }

func lock(path string, wait bool) (*FileLock, error) {
	if err := CheckOwner(filepath.Dir(path), true); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := openLockFile(path)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil {
			if cerr := checkInfo(path, fi, false); cerr != nil {
				return nil, fmt.Errorf("lock %s: %w", path, cerr)
			}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkInfo(path, fi, false)
	}
	if err == nil {
		err = flock(f, wait)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &FileLock{f: f}, nil
}

// Unlock releases the lock. The lock file stays (removing it would race with the next locker).
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Released before the close: the lock belongs to the open file, which a child this process
	// is starting holds too until its exec closes it (fork copies the descriptors, close-on-exec
	// or not), so a close alone left it held for that while (TestUnlockWithCopiedDescriptor):
	// the likely cause of a daemon started right after another one of the same process stopped
	// finding it "running" (TestFailedRecordKeepsLaunchDir, once, as the ordinary user in a
	// .ci/run, with other tests' daemons starting shims in the same process).
	unflock(l.f)
	err := l.f.Close()
	l.f = nil
	return err
}
