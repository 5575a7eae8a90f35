// Package boxhelper finds the box helper (cmd/agentbox-box) installed with agentbox and checks
// that it may be used: the daemon starts shims from it.
package boxhelper

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// The file names of agentbox's binaries, installed side by side (or the CLI in bin/ and the
// others in ../libexec/agentbox/):
const (
	// CLIName is the command users run (cmd/agentbox): the CLI, which links no daemon.
	CLIName = "agentbox"
	// DaemonName is the daemon (cmd/agentbox-daemon): the CLI runs it for `agentbox daemon` and
	// for what only it links (a readiness probe run by `agentbox doctor`).
	DaemonName = "agentbox-daemon"
	// HelperName is the box helper (cmd/agentbox-box): the daemon starts shims from it.
	HelperName = "agentbox-box"
)

// FindHelper returns the box helper installed with the agentbox binary exe: the first of exe's
// directory, then ../libexec/agentbox/ beside it, where one exists. It is used only when it is
// a regular file owned by root or the caller, writable by nobody else, and built from the same
// source as the running binary (same Go version, main module, dependencies and VCS state), so
// that a stale or planted helper is never run; otherwise FindHelper says why, and the caller
// starts shims from exe itself, which serves the same entry points. A helper that exists but
// fails the checks is not passed over for the next place: what decides is the first helper
// found, which the daemon can keep a box from creating or replacing when it lies in the box's
// workspace (the daemon pins it read-only there, or pins placeholders where none exists).
//
// The result says nothing about the file a moment later: the daemon does not run the path but
// a sealed copy, checked after it was copied (Load).
func FindHelper(exe string) (string, error) {
	return FindBinary(exe, HelperName)
}

// FindBinary returns agentbox's binary name (DaemonName, HelperName) installed with the
// agentbox binary exe, found and checked as FindHelper finds and checks the helper.
func FindBinary(exe, name string) (string, error) {
	return findBinary(exe, name, func(f *os.File, path string) error { return checkBuild(f, path) })
}

// OpenBinary is FindBinary that returns the file it checked, open (close-on-exec): run it
// as /proc/self/fd/N of that descriptor, and what runs is what was checked, whatever happens
// to the path meanwhile.
func OpenBinary(exe, name string) (*os.File, error) {
	var kept *os.File
	_, err := findBinary(exe, name, func(f *os.File, path string) error {
		if err := checkBuild(f, path); err != nil {
			return err
		}
		dup, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
		if err != nil {
			return err
		}
		// The same open file? (/proc/self/fd/N reopens the inode the descriptor holds.)
		a, errA := f.Stat()
		b, errB := dup.Stat()
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			dup.Close()
			return fmt.Errorf("%s changed while it was checked", path)
		}
		kept = dup
		return nil
	})
	if err != nil {
		return nil, err
	}
	return kept, nil
}

// Candidates returns the paths where FindHelper looks for the helper of the agentbox binary
// exe (resolved through symlinks), in order, whether or not they exist: the first that exists
// is the helper.
func Candidates(exe string) ([]string, error) {
	return CandidatesFor(exe, HelperName)
}

// CandidatesFor is Candidates for agentbox's binary name.
func CandidatesFor(exe, name string) ([]string, error) {
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve %s: %w", name, exe, err)
	}
	dir := filepath.Dir(exe)
	return []string{filepath.Join(dir, name), filepath.Clean(filepath.Join(dir, "..", "libexec", "agentbox", name))}, nil
}

// findBinary returns the first candidate for name that opens, passes checkFile, and then use,
// which is given the open file (so that nothing re-reads the path).
func findBinary(exe, name string, use func(f *os.File, path string) error) (string, error) {
	cands, err := CandidatesFor(exe, name)
	if err != nil {
		return "", err
	}
	for _, c := range cands {
		err := tryHelper(c, use)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", name, err)
		}
	}
	return "", fmt.Errorf("%s: none in %s: %w", name, strings.Join(cands, " or "), os.ErrNotExist)
}

func tryHelper(path string, use func(f *os.File, path string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// An empty file without execute bits is a placeholder the daemon keeps where a binary may
	// be looked for while a box runs in a workspace that holds agentbox (ownBinaryPins): as if
	// there were nothing. (A box cannot write it: it is bound read-only in the box.)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 && fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is a placeholder: %w", path, os.ErrNotExist)
	}
	if err := checkFile(f, path); err != nil {
		return err
	}
	return use(f, path)
}

// checkFile checks the open helper file: an executable regular file owned by root or the
// caller, writable by nobody else.
func checkFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v); run chmod go-w on it", path, fi.Mode().Perm())
	}
	if owner, ok := fileOwner(fi); ok && owner != 0 && owner != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor you", path, owner)
	}
	return nil
}

// checkBuild checks that the binary r (the helper at path, or its sealed copy) was built from
// the same source as the running binary.
func checkBuild(r io.ReaderAt, path string) error {
	theirs, err := buildinfo.Read(r)
	if err != nil {
		return fmt.Errorf("%s: read build info: %v", path, err)
	}
	ours, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("%s: the running binary has no build info to compare with", path)
	}
	if !sameBuild(ours, theirs) {
		return fmt.Errorf("%s was built from a different source than this agentbox (rebuild both, e.g. make build)", path)
	}
	return nil
}

// sameBuild reports whether two binaries were built from the same source: the same toolchain,
// main module and build settings that name the source (VCS revision and state, ldflags, tags,
// target), and the same version of every dependency both link (the helper links a subset).
func sameBuild(a, b *debug.BuildInfo) bool {
	if a.GoVersion != b.GoVersion || a.Main != b.Main || buildSettings(a) != buildSettings(b) {
		return false
	}
	deps := map[string]debug.Module{}
	for _, d := range a.Deps {
		deps[d.Path] = *d
	}
	for _, d := range b.Deps {
		if o, ok := deps[d.Path]; ok && (o.Version != d.Version || o.Sum != d.Sum) {
			return false
		}
	}
	return true
}

// buildSettings are the build settings that name the source and the target.
func buildSettings(bi *debug.BuildInfo) string {
	var b strings.Builder
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs", "vcs.revision", "vcs.time", "vcs.modified", "-ldflags", "-tags", "CGO_ENABLED", "GOARCH", "GOOS", "GOAMD64", "-trimpath":
			fmt.Fprintf(&b, "%s=%s\n", s.Key, s.Value)
		}
	}
	return b.String()
}
