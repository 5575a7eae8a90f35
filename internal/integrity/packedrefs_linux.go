package integrity

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// stripPackedReplace rewrites the packed-refs file at path (beneath ws) without the replace
// refs that are not in keep (the ones it held at the snapshot), taking git's own lock
// (packed-refs.lock, created exclusively, renamed over the file), so that a git the host runs
// meanwhile either waits for it or makes it fail; a symlink there is read through and replaced
// by the file. It returns how many refs it removed, and where a stale lock went (aside: see
// takePackedLock).
func stripPackedReplace(ws, path string, keep []string) (n int, aside string, err error) {
	lock, aside, err := lockGitFile(ws, path, func(dir int, _ string) (int, string, error) {
		fd, aside, err := takePackedLock(dir)
		if err != nil {
			err = fmt.Errorf("take git's lock packed-refs.lock: %w", err)
		}
		return fd, aside, err
	})
	if aside != "" {
		aside = filepath.Join(filepath.Dir(path), aside)
	}
	if err != nil {
		return 0, aside, err
	}
	defer lock.release()
	// Read as git reads it: through a symlink a box may have put there, as long as it stays
	// beneath the workspace, and in records, whatever its size. The result replaces the link
	// with a regular file, as git's own write of packed-refs does.
	f, err := openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return 0, aside, err
	}
	defer f.Close()
	set := make(map[string]bool, len(keep))
	for _, l := range keep {
		set[l] = true
	}
	w := bufio.NewWriterSize(lock.f, 64<<10)
	n, err = copyWithoutReplace(w, f, set)
	if err == nil {
		err = w.Flush()
	}
	if err != nil || n == 0 {
		return 0, aside, err
	}
	if err := lock.commitWritten(); err != nil {
		return 0, aside, err
	}
	return n, aside, nil
}

// packedReplaceAt returns the replace refs of the packed-refs file at path (beneath ws,
// through a symlink that stays beneath it, as git reads it): packedReplaceFrom.
func packedReplaceAt(ws, path string) ([]string, error) {
	f, err := openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return packedReplaceFrom(f)
}

// packedLockWait is how long takePackedLock waits for a packed-refs.lock that exists: twice
// what git itself waits for it (core.packedRefsTimeout, 1 s by default) before it gives up.
var packedLockWait = 2 * time.Second

// takePackedLock creates git's lock packed-refs.lock in dir exclusively. A lock that exists is
// waited for (packedLockWait), as git waits for it; one that outlives the wait is no git's: a
// box made it, so that no strip could take it and its replace ref stayed in force. That lock
// is moved aside (never deleted) and the lock taken; aside names where it went.
func takePackedLock(dir int) (fd int, aside string, err error) {
	const name = "packed-refs.lock"
	deadline := time.Now().Add(packedLockWait)
	for {
		fd, err = createLock(dir, name)
		if !errors.Is(err, unix.EEXIST) {
			return fd, aside, err
		}
		if aside != "" || time.Now().After(deadline) {
			if aside != "" {
				return -1, aside, err // a new one at once: the box is taking it again
			}
			if aside, err = atomicfile.RenameAside(dir, name); err != nil {
				return -1, "", fmt.Errorf("move the stale lock aside: %w", err)
			}
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
}
