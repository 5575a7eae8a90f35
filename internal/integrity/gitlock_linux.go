package integrity

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// gitLock is git's own lock on a file of a repository in the workspace (NAME.lock beside it,
// created exclusively), taken to rewrite the file as git rewrites it: the new content written
// to the lock, synced and renamed over the file, so that a git the host runs meanwhile waits or
// fails rather than loses the change, and a reader sees the old file or the new one.
type gitLock struct {
	dir       int      // the file's folder, opened beneath the workspace
	f         *os.File // the lock
	name      string   // the file's name in dir
	lock      string   // the lock's name in dir: name.lock, unless take chose another (rename)
	committed bool
}

// lockName is the lock's name in dir.
func (l *gitLock) lockName() string {
	if l.lock != "" {
		return l.lock
	}
	return l.name + ".lock"
}

// lockGitFile takes git's lock on path, a file beneath the workspace ws, whose folder is opened
// beneath ws (never through a link out of it). take creates the lock in that folder (its
// policy for a lock that exists: refuse it, or wait for it) and returns its descriptor and
// what it moved aside, which lockGitFile returns too, error or not. Release the lock with
// release, after commit or without it.
func lockGitFile(ws, path string, take func(dir int, lock string) (fd int, aside string, err error)) (l *gitLock, aside string, err error) {
	rel, err := filepath.Rel(ws, filepath.Dir(path))
	if err != nil || !within(path, ws) {
		return nil, "", fmt.Errorf("%s is not beneath the workspace", path)
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(wfd)
	dir, err := unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return nil, "", err
	}
	name := filepath.Base(path)
	fd, aside, err := take(dir, name+".lock")
	if err != nil {
		unix.Close(dir)
		return nil, aside, err
	}
	return &gitLock{dir: dir, f: os.NewFile(uintptr(fd), name+".lock"), name: name}, aside, nil
}

// createLock creates the lock exclusively in dir, as git does (never through a link).
func createLock(dir int, lock string) (int, error) {
	return unix.Openat(dir, lock, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
}

// commit writes data to the lock, syncs it and renames it over the file.
func (l *gitLock) commit(data []byte) error {
	if _, err := l.f.Write(data); err != nil {
		return err
	}
	return l.commitWritten()
}

// commitWritten syncs what was written to the lock (l.f) and renames it over the file.
func (l *gitLock) commitWritten() error {
	if err := l.f.Sync(); err != nil {
		return err
	}
	if err := unix.Renameat(l.dir, l.lockName(), l.dir, l.name); err != nil {
		return err
	}
	l.committed = true
	return nil
}

// release removes the lock unless it was committed (renamed over the file), and closes it.
func (l *gitLock) release() {
	l.f.Close()
	if !l.committed {
		unix.Unlinkat(l.dir, l.lockName(), 0)
	}
	unix.Close(l.dir)
}
