package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/boxhelper"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestOwnBinaryPins: agentbox's binaries (the daemon binary, the CLI beside it, the box helper)
// in the workspace are bound read-only (their folders
// made mount points); where no helper exists, every place one would be looked for gets a
// placeholder; binaries outside the workspace are left alone.
func TestOwnBinaryPins(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(ws, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, boxhelper.DaemonName) // the daemon's executable
	cli := filepath.Join(bin, boxhelper.CLIName)
	helper := filepath.Join(bin, boxhelper.HelperName)
	libexec := filepath.Join(ws, "libexec", "agentbox", boxhelper.HelperName)
	for _, p := range []string{exe, cli, helper} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	paths := func(ps []plan.Protected) []string {
		var out []string
		for _, p := range ps {
			if p.Beneath != ws {
				t.Errorf("%s pinned beneath %s, want %s", p.Path, p.Beneath, ws)
			}
			out = append(out, p.Path)
		}
		return out
	}

	// The three binaries there (make build in a checkout): all pinned, nothing more.
	pins, extra := ownBinaryPins(ws, exe, helper)
	if got := paths(pins); !slices.Equal(got, []string{exe, helper, cli}) || len(extra) != 0 {
		t.Errorf("pins %v, extra %v; want %v and none", got, extra, []string{exe, helper, cli})
	}
	want := []plan.Mount{
		{Kind: plan.MountBind, Source: bin, Target: bin, Beneath: ws},
		{Kind: plan.MountBind, Source: cli, Target: cli, ReadOnly: true, Beneath: ws},
		{Kind: plan.MountBind, Source: helper, Target: helper, ReadOnly: true, Beneath: ws},
		{Kind: plan.MountBind, Source: exe, Target: exe, ReadOnly: true, Beneath: ws},
	}
	if got := plan.ProtectMounts(pins); !slices.Equal(got, want) {
		t.Errorf("mounts %+v, want %+v", got, want)
	}
	// The daemon runs no helper (it took none at its start), but one exists: pinned as well.
	if pins, _ := ownBinaryPins(ws, exe, ""); !slices.Equal(paths(pins), []string{exe, cli, helper}) {
		t.Errorf("helper unused: pins %v", paths(pins))
	}

	// No helper: the daemon binary and the CLI pinned, a placeholder wherever a helper would be
	// looked for.
	os.Remove(helper)
	pins, extra = ownBinaryPins(ws, exe, "")
	if got := paths(pins); !slices.Equal(got, []string{exe, cli}) || !slices.Equal(extra, []string{helper, libexec}) {
		t.Errorf("no helper: pins %v, extra %v; want [%s %s] and [%s %s]", got, extra, exe, cli, helper, libexec)
	}
	// Extra paths are what the integrity registry turns into placeholders.
	if rels := plan.ProtectedPaths(ws, extra); !slices.Contains(rels, "bin/agentbox-box") || !slices.Contains(rels, "libexec/agentbox/agentbox-box") {
		t.Errorf("extra as protected paths: %v", rels)
	}

	// A helper that is a symlink: left to the registry, which pins its target in the workspace.
	if err := os.Symlink(boxhelper.DaemonName, helper); err != nil {
		t.Fatal(err)
	}
	pins, extra = ownBinaryPins(ws, exe, "")
	if got := paths(pins); !slices.Equal(got, []string{exe, cli}) || !slices.Equal(extra, []string{helper}) {
		t.Errorf("symlinked helper: pins %v, extra %v", got, extra)
	}

	// Binaries outside the workspace: nothing.
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if pins, extra := ownBinaryPins(other, exe, helper); len(pins) != 0 || len(extra) != 0 {
		t.Errorf("outside the workspace: pins %v, extra %v", pins, extra)
	}
	// A workspace that is the binaries' folder itself.
	if pins, _ := ownBinaryPins(bin, exe, ""); !slices.Equal(pinnedPaths(pins), []string{exe, cli}) {
		t.Errorf("workspace bin/: pins %v", pins)
	}
}

// TestOwnBinaryPinsPackageLayout: the package's layout inside a workspace (bin/agentbox, and
// the daemon binary and the helper in libexec/agentbox/, as a `dpkg -x` of the .deb leaves
// it): the three are pinned; bin/agentbox-daemon — where that CLI looks first for its daemon
// binary — and libexec/agentbox/agentbox — where the daemon binary looks first for its CLI,
// which `wrap install` writes into launchers — get placeholders, so that a box cannot plant a
// binary there for the host to run.
func TestOwnBinaryPinsPackageLayout(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(ws, "dist", "root", "usr")
	cli := filepath.Join(prefix, "bin", boxhelper.CLIName)
	exe := filepath.Join(prefix, "libexec", "agentbox", boxhelper.DaemonName)
	helper := filepath.Join(prefix, "libexec", "agentbox", boxhelper.HelperName)
	for _, p := range []string{cli, exe, helper} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pins, extra := ownBinaryPins(ws, exe, helper)
	if got := pinnedPaths(pins); !slices.Equal(got, []string{exe, helper, cli}) {
		t.Errorf("pins %v, want %v", got, []string{exe, helper, cli})
	}
	planted := filepath.Join(prefix, "bin", boxhelper.DaemonName)
	plantedCLI := filepath.Join(prefix, "libexec", "agentbox", boxhelper.CLIName)
	if want := []string{plantedCLI, planted}; !slices.Equal(extra, want) {
		t.Errorf("extra %v, want placeholders at %v", extra, want)
	}
	// Once a daemon binary is beside the CLI, it is the one the CLI runs: pinned, nothing more
	// for it; and a CLI beside the daemon binary is the one its launchers run: pinned.
	for _, p := range []string{planted, plantedCLI} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pins, extra = ownBinaryPins(ws, exe, helper)
	if got := pinnedPaths(pins); !slices.Contains(got, planted) || !slices.Contains(got, plantedCLI) || len(extra) != 0 {
		t.Errorf("daemon binary beside the CLI, CLI beside the daemon binary: pins %v, extra %v", got, extra)
	}
}

func pinnedPaths(ps []plan.Protected) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Path)
	}
	return out
}
