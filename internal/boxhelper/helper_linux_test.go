package boxhelper

import (
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// copyFile copies src to dst with mode.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// TestOpenBinary accepts a helper built with the running binary, beside it or in
// ../libexec/agentbox/, and passes over one that is missing, writable by others, or not built
// from the same source, saying why.
func TestOpenBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "agentbox")
	copyFile(t, self, exe, 0o755)
	findHelper := func(exe string) (string, error) {
		f, path, err := OpenBinary(exe, HelperName)
		if f != nil {
			f.Close()
		}
		return path, err
	}

	if _, err := findHelper(exe); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("no helper: err = %v, want not-exist", err)
	}

	// The same build (a copy of this test binary stands for agentbox-box): used.
	helper := filepath.Join(bin, HelperName)
	copyFile(t, self, helper, 0o755)
	if got, err := findHelper(exe); err != nil || got != helper {
		t.Fatalf("OpenBinary = %q, %v; want %q", got, err, helper)
	}
	// Writable by the group: passed over, with the reason.
	if err := os.Chmod(helper, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := findHelper(exe); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("group-writable helper: err = %v", err)
	}
	// Not a Go binary of this build: passed over.
	copyFile(t, "/bin/true", helper, 0o755)
	if _, err := findHelper(exe); err == nil || !strings.Contains(err.Error(), "build info") {
		t.Fatalf("foreign helper: err = %v", err)
	}
	os.Remove(helper)

	// ../libexec/agentbox/agentbox-box, as the package installs it.
	libexec := filepath.Join(dir, "libexec", "agentbox")
	if err := os.MkdirAll(libexec, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, filepath.Join(libexec, HelperName), 0o755)
	if got, err := findHelper(exe); err != nil || got != filepath.Join(libexec, HelperName) {
		t.Fatalf("libexec helper: OpenBinary = %q, %v", got, err)
	}
	// A placeholder (empty, not executable: what the daemon keeps there while a box runs in a
	// workspace holding agentbox) counts as nothing: the next place is looked at.
	if err := os.WriteFile(helper, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findHelper(exe); err != nil || got != filepath.Join(libexec, HelperName) {
		t.Fatalf("placeholder first: OpenBinary = %q, %v", got, err)
	}
	// OpenBinary hands over the file it checked, open.
	f, path, err := OpenBinary(exe, HelperName)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, _ := f.Stat()
	b, _ := os.Stat(filepath.Join(libexec, HelperName))
	if !os.SameFile(a, b) {
		t.Fatalf("OpenBinary returned another file (%s) than %s", path, filepath.Join(libexec, HelperName))
	}
}

// TestFindCLI finds the CLI installed with the daemon binary: beside it, else in ../../bin/
// (the daemon binary in libexec/agentbox/), checked as OpenBinary checks; a foreign binary in
// the first place found is refused, not passed over.
func TestFindCLI(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	libexec := filepath.Join(dir, "libexec", "agentbox")
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{libexec, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	daemon := filepath.Join(libexec, DaemonName)
	copyFile(t, self, daemon, 0o755)
	if _, err := FindCLI(daemon); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("no CLI: err = %v, want not-exist", err)
	}
	cli := filepath.Join(bin, CLIName)
	copyFile(t, self, cli, 0o755)
	if got, err := FindCLI(daemon); err != nil || got != cli {
		t.Fatalf("FindCLI = %q, %v; want %q", got, err, cli)
	}
	beside := filepath.Join(libexec, CLIName)
	copyFile(t, "/bin/true", beside, 0o755)
	if got, err := FindCLI(daemon); err == nil || !strings.Contains(err.Error(), "build info") {
		t.Fatalf("foreign CLI beside the daemon binary: FindCLI = %q, %v; want refused", got, err)
	}
	copyFile(t, self, beside, 0o755)
	if got, err := FindCLI(daemon); err != nil || got != beside {
		t.Fatalf("FindCLI = %q, %v; want %q", got, err, beside)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		next := u.Unwrap()
		if next == nil {
			return err
		}
		err = next
	}
}

// TestSameBuild compares toolchain, main module, source settings and the dependencies both
// binaries link.
func TestSameBuild(t *testing.T) {
	base := func() *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Path: "github.com/agentbox/agentbox", Version: "(devel)"},
			Deps:      []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.30.0", Sum: "h1:a"}, {Path: "modernc.org/sqlite", Version: "v1.0.0"}},
			Settings:  []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}},
		}
	}
	helper := base()
	helper.Path = "github.com/agentbox/agentbox/cmd/agentbox-box"
	helper.Deps = helper.Deps[:1] // links a subset
	if !sameBuild(base(), helper) {
		t.Error("same source, subset of deps: not the same build")
	}
	for name, change := range map[string]func(b *debug.BuildInfo){
		"revision": func(b *debug.BuildInfo) { b.Settings[0].Value = "def" },
		"modified": func(b *debug.BuildInfo) { b.Settings[1].Value = "true" },
		"go":       func(b *debug.BuildInfo) { b.GoVersion = "go1.25.0" },
		"dep":      func(b *debug.BuildInfo) { b.Deps[0] = &debug.Module{Path: "golang.org/x/sys", Version: "v0.31.0"} },
		"ldflags": func(b *debug.BuildInfo) {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: "-ldflags", Value: "-X v=1"})
		},
	} {
		other := base()
		change(other)
		if sameBuild(base(), other) {
			t.Errorf("%s differs: reported the same build", name)
		}
	}
}
