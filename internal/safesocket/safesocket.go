// Package safesocket owns agentbox's per-user directories and local sockets: the runtime,
// state and config directories (created 0700, owner-checked on every use, never trusted), the
// local API listener that refuses peers of another uid or another user namespace, peer
// credentials, and flock-based cross-process locks.
package safesocket

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Error classes, checked with errors.Is. Messages name the path, its owner or mode and what to do.
var (
	// ErrNotOwned means a directory, socket or lock file belongs to another uid (squatting, or
	// left behind by `sudo agentbox`).
	ErrNotOwned = errors.New("not owned by the current user")
	// ErrBadMode means a path has the wrong type (a symbolic link, a file where a directory
	// belongs) or permissions that let others in.
	ErrBadMode = errors.New("unsafe type or permissions")
	// ErrInUse means a live process already listens on the socket.
	ErrInUse = errors.New("socket in use")
	// ErrLocked means TryLock found the lock held by another process or descriptor.
	ErrLocked = errors.New("locked by another process")
	// ErrPeerRefused means a connection came from another uid or another user namespace.
	ErrPeerRefused = errors.New("peer refused")
	// ErrNotSupported means the operation needs Linux.
	ErrNotSupported = errors.New("not supported on this platform")
)

// DirMode is the mode of every directory agentbox creates or trusts for its own state.
const DirMode fs.FileMode = 0o700

// RuntimeDir returns agentbox's runtime directory, $XDG_RUNTIME_DIR/agentbox, or when
// XDG_RUNTIME_DIR is unset (or, for root, names a directory root does not own, as `sudo -E`
// leaves it) the fallback of fallbackRuntimeDir. It creates the directory 0700 when absent and otherwise
// refuses it unless it is a real directory (not a symbolic link) owned by the caller with mode
// 0700 (ErrNotOwned, ErrBadMode).
func RuntimeDir() (string, error) {
	uid := os.Getuid()
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		if !filepath.IsAbs(x) {
			return "", fmt.Errorf("runtime dir: XDG_RUNTIME_DIR=%q is not an absolute path", x)
		}
		owner, err := ownerOf(x)
		switch {
		case err != nil:
			return "", fmt.Errorf("runtime dir: XDG_RUNTIME_DIR=%s: %w", x, err)
		case owner == uid:
			dir := filepath.Join(x, "agentbox")
			return dir, ensureDir(dir)
		case uid != 0:
			return "", fmt.Errorf("%w: runtime dir: XDG_RUNTIME_DIR=%s belongs to uid %d, not to you (uid %d); unset it or point it at your own directory",
				ErrNotOwned, x, owner, uid)
		}
		// root with another user's XDG_RUNTIME_DIR: use root's own directory below.
	}
	return fallbackRuntimeDir(uid, fmt.Sprintf("/run/user/%d", uid), fmt.Sprintf("/tmp/agentbox-%d", uid))
}

// fallbackRuntimeDir is the runtime directory when XDG_RUNTIME_DIR names none: the login
// manager's runtime directory for uid (runUser) when it exists and is the caller's, as
// XDG_RUNTIME_DIR would have named it (`su` and cron leave the variable unset); else tmp, a
// name in /tmp that another local user can take first (review 10, F9): then the error says
// how to choose a directory of one's own.
func fallbackRuntimeDir(uid int, runUser, tmp string) (string, error) {
	if CheckOwner(runUser, true) == nil {
		dir := filepath.Join(runUser, "agentbox")
		return dir, ensureDir(dir)
	}
	err := ensureDir(tmp)
	if errors.Is(err, ErrNotOwned) {
		err = fmt.Errorf("%w; with XDG_RUNTIME_DIR unset, agentbox uses that name in /tmp, which another user can take first: point XDG_RUNTIME_DIR at a directory of your own (mkdir -m 700 ~/.agentbox-run && export XDG_RUNTIME_DIR=~/.agentbox-run)", err)
	}
	return tmp, err
}

// StateDir returns agentbox's state directory, $XDG_STATE_HOME/agentbox (default
// ~/.local/state/agentbox), created 0700 when absent and owner-checked like RuntimeDir.
func StateDir() (string, error) {
	dir, err := xdgDir("XDG_STATE_HOME", ".local/state")
	if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return dir, ensureDir(dir)
}

// ConfigDir returns agentbox's config directory, $XDG_CONFIG_HOME/agentbox (default
// ~/.config/agentbox), created 0700 when absent. An existing one must be a real directory
// owned by the caller and not writable by group or others; unlike the runtime and state
// directories it may be readable by others (a user's `mkdir -p` makes it 0755, and it holds
// no sockets or state).
func ConfigDir() (string, error) {
	dir, err := xdgDir("XDG_CONFIG_HOME", ".config")
	if err != nil {
		return "", fmt.Errorf("config dir: %w", err)
	}
	if err := ensureDir(dir); err != nil && !readableByOthers(dir) {
		return "", err
	}
	return dir, nil
}

// readableByOthers reports whether dir passes every CheckOwner rule except that group and
// others may read and traverse it.
func readableByOthers(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 || fi.Mode().Perm()&0o722 != 0o700 {
		return false
	}
	owner, err := fileOwner(fi)
	return err == nil && owner == os.Getuid()
}

func xdgDir(env, homeRel string) (string, error) {
	if x := os.Getenv(env); filepath.IsAbs(x) { // the XDG spec says to ignore relative paths
		return filepath.Join(x, "agentbox"), nil
	}
	home := os.Getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", fmt.Errorf("neither %s nor HOME is an absolute path", env)
	}
	return filepath.Join(home, homeRel, "agentbox"), nil
}

// ensureDir creates dir 0700 if it is absent, then checks it with CheckOwner. Missing parents
// are created 0700 one at a time; the directory's own parent must be owned by the caller or
// root and, if others may write it, sticky (like /tmp), so that nobody else can swap dir.
func ensureDir(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		parent := filepath.Dir(dir)
		if err := mkParents(parent); err != nil {
			return err
		}
		if err := checkParent(parent); err != nil {
			return err
		}
		if err := os.Mkdir(dir, DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", dir, err)
		} else if err == nil {
			// The umask may have removed bits we need; we just made it, so fix it up.
			if err := os.Chmod(dir, DirMode); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
		}
	} else if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	return CheckOwner(dir, true)
}

func mkParents(dir string) error {
	_, err := os.Lstat(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if p := filepath.Dir(dir); p != dir {
		if err := mkParents(p); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

func checkParent(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	owner, err := fileOwner(fi)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrBadMode, dir)
	}
	if owner != os.Getuid() && owner != 0 {
		return fmt.Errorf("%w: %s belongs to uid %d; agentbox will not create its directories there", ErrNotOwned, dir, owner)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%w: %s has mode %04o (writable by others and not sticky); agentbox will not create its directories there",
			ErrBadMode, dir, fi.Mode().Perm())
	}
	return nil
}

func ownerOf(path string) (int, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fileOwner(fi)
}

// CheckOwner verifies, without following a symbolic link at path, that path belongs to the
// caller's uid and lets nobody else in: a directory (wantDir) must have mode 0700; anything else
// (a socket, a lock file) must not be a directory and must have no group or other permission
// bits. The client calls it on the socket and its directory before every request.
func CheckOwner(path string, wantDir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	return checkInfo(path, fi, wantDir)
}

func checkInfo(path string, fi fs.FileInfo, wantDir bool) error {
	uid := os.Getuid()
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symbolic link; agentbox never follows links for its own files (remove it)", ErrBadMode, path)
	}
	if wantDir != fi.IsDir() {
		want := "a directory"
		if !wantDir {
			want = "not a directory"
		}
		return fmt.Errorf("%w: %s is %s, want %s (remove it)", ErrBadMode, path, typeName(fi.Mode()), want)
	}
	owner, err := fileOwner(fi)
	if err != nil {
		return err
	}
	if owner != uid {
		hint := "remove it as its owner or as root, then try again"
		if owner == 0 {
			hint = "left by `sudo agentbox`? remove it as root (sudo rm -r " + path + ")"
		}
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): %s", ErrNotOwned, path, owner, uid, hint)
	}
	perm := fi.Mode().Perm()
	if wantDir && perm != DirMode {
		return fmt.Errorf("%w: %s has mode %04o, want 0700 (fix: chmod 700 %s)", ErrBadMode, path, perm, path)
	}
	if !wantDir && perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o, want no group or other access (fix: chmod 600 %s)", ErrBadMode, path, perm, path)
	}
	return nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}
