// Package boxhelper finds the box helper (cmd/agentbox-box) installed with agentbox and checks
// that it may be used: the daemon starts shims from it.
package boxhelper

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
)

// HelperName is the file name of agentbox's box helper (cmd/agentbox-box).
const HelperName = "agentbox-box"

// FindHelper returns the box helper installed with the agentbox binary exe: exe's directory,
// then ../libexec/agentbox/ beside it. A candidate is used only when it is a regular file
// owned by root or the caller, writable by nobody else, and built from the same source as the
// running binary (same Go version, main module, dependencies and VCS state), so that a stale or
// planted helper is never run. It returns the reason each candidate was passed over when none
// qualifies; the caller then starts shims from exe itself, which serves the same entry points.
func FindHelper(exe string) (string, error) {
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("box helper: resolve %s: %w", exe, err)
	}
	dir := filepath.Dir(exe)
	var reasons []string
	for _, c := range []string{filepath.Join(dir, HelperName), filepath.Join(dir, "..", "libexec", "agentbox", HelperName)} {
		err := checkHelper(c)
		if err == nil {
			return filepath.Clean(c), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			reasons = append(reasons, err.Error())
		}
	}
	if len(reasons) == 0 {
		return "", fmt.Errorf("box helper: no %s beside %s: %w", HelperName, exe, os.ErrNotExist)
	}
	return "", fmt.Errorf("box helper: %s", strings.Join(reasons, "; "))
}

func checkHelper(path string) error {
	fi, err := os.Stat(path)
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
	theirs, err := buildinfo.ReadFile(path)
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
