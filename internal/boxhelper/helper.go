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

// OpenBinary opens agentbox's binary name (DaemonName, HelperName) installed with the
// agentbox binary exe: the first of exe's directory, then ../libexec/agentbox/ beside it, where
// one exists (CandidatesFor). It is used only when it is a regular file owned by root or the
// caller, writable by nobody else, and built from the same source as the running binary (same
// Go version, main module, dependencies and VCS state), so that a stale or planted binary is
// never run; otherwise OpenBinary says why. A binary that exists but fails the checks is not
// passed over for the next place: what decides is the first one found, which the daemon keeps
// a box from creating or replacing when it lies in the box's workspace (ownBinaryPins: pinned
// read-only there, or a placeholder where none exists; a placeholder counts as nothing).
//
// It returns the file it checked, open (close-on-exec), and its path: run it as
// /proc/self/fd/N of that descriptor, and what runs is what was checked, whatever happens to
// the path meanwhile. (The daemon runs its helper from a sealed copy instead: Load.)
func OpenBinary(exe, name string) (*os.File, string, error) {
	return openBinary(exe, name, func(f *os.File, path string) error { return checkBuild(f, path) })
}

// CandidatesFor returns the paths where OpenBinary looks for agentbox's binary name beside
// the agentbox binary exe (resolved through symlinks), in order, whether or not they exist:
// the first that exists is the one used.
func CandidatesFor(exe, name string) ([]string, error) {
	return placesBeside(exe, name, ".", "../libexec/agentbox")
}

// CLICandidatesFor returns where the CLI installed with agentbox's binary exe (the daemon
// binary, the helper) is, in order, whether or not they exist: beside it (a checkout's bin/),
// then ../../bin/ (exe in libexec/agentbox/, the package's layout). The first that exists is
// the one (FindCLI).
func CLICandidatesFor(exe string) ([]string, error) {
	return placesBeside(exe, CLIName, ".", "../../bin")
}

// placesBeside returns name in each of dirs, relative to the directory of exe resolved through
// symlinks.
func placesBeside(exe, name string, dirs ...string) ([]string, error) {
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve %s: %w", name, exe, err)
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Join(filepath.Dir(real), d, name)
	}
	return out, nil
}

// FindCLI returns the path of the CLI installed with agentbox's binary exe: the first of
// CLICandidatesFor that exists, used only when it passes OpenBinary's checks (owner, mode,
// same build).
func FindCLI(exe string) (string, error) {
	cands, err := CLICandidatesFor(exe)
	if err != nil {
		return "", err
	}
	f, path, err := openFirst(cands, CLIName, func(f *os.File, path string) error { return checkBuild(f, path) })
	if err != nil {
		return "", err
	}
	f.Close()
	return path, nil
}

// openBinary returns, open, the first candidate for name that opens and passes checkFile and
// check, which is given the open file (so that nothing re-reads the path).
func openBinary(exe, name string, check func(f *os.File, path string) error) (*os.File, string, error) {
	cands, err := CandidatesFor(exe, name)
	if err != nil {
		return nil, "", err
	}
	return openFirst(cands, name, check)
}

// openFirst returns, open, the first of cands that exists (a placeholder counts as nothing), if
// it passes checkFile and check; one that exists but fails them is refused, not passed over.
func openFirst(cands []string, name string, check func(f *os.File, path string) error) (*os.File, string, error) {
	for _, c := range cands {
		f, err := tryBinary(c, check)
		if err == nil {
			return f, c, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil, "", fmt.Errorf("%s: none in %s: %w", name, strings.Join(cands, " or "), os.ErrNotExist)
}

func tryBinary(path string, check func(f *os.File, path string) error) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// An empty file without execute bits is a placeholder the daemon keeps where a binary may
	// be looked for while a box runs in a workspace that holds agentbox (ownBinaryPins): as if
	// there were nothing. (A box cannot write it: it is bound read-only in the box.)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 && fi.Mode().Perm()&0o111 == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is a placeholder: %w", path, os.ErrNotExist)
	}
	if err := checkFile(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := check(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckTrustedBinary checks a binary others will run (the agentbox a wrap-mode launcher execs):
// path, its symbolic links resolved, is an executable regular file owned by root or the
// caller and writable by nobody else, in folders owned by root or the caller that nobody else
// can write to (a sticky folder aside). Run by root, that means owned by root throughout: a
// binary an ordinary user could write would run as every user who runs the launcher.
func CheckTrustedBinary(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	f, err := os.Open(real)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := checkFile(f, real); err != nil {
		return err
	}
	for dir := filepath.Dir(real); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if owner, ok := fileOwner(fi); ok && owner != 0 && owner != os.Geteuid() {
			return fmt.Errorf("%s is in %s, owned by uid %d, neither root nor you: whoever owns it can replace the binary", real, dir, owner)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s is in %s, writable by group or others (mode %v): anyone who can write there can replace the binary", real, dir, fi.Mode().Perm())
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
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
