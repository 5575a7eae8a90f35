package enginetest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// testProtectedPaths holds an engine to what a box must not do with the workspace's protected
// files, in one box: (1) its staged copy of a protected file is bounded while it runs — a write
// past changes.MaxFile fails in the box, the init says so, the host's copy stays within the
// bound and is marked truncated (before, the bwrap engine bound the host's copy itself and a
// box could grow it without bound on the state directory's disk); (2) a protected file the host
// removes while the box runs, which takes the bind over it along, is guarded from then on: the
// box's write there succeeds in the box and is kept as a proposed change, never left in the
// host's workspace (before, the bwrap engine kept no bind and its box's file stayed on the
// host); (3) an absent protected path is guarded: what the box creates there is moved out as
// well (before, the bwrap engine had no guard, and the file was on the host until the launch
// ended).
func testProtectedPaths(t *testing.T, factory func() engine.Engine) {
	script := `if head -c 5000000 /dev/zero >> .envrc; then echo WROTE-PAST-BOUND; fi
echo planted > .vscode/tasks.json && echo WROTE-ABSENT
while [ ! -e go ]; do sleep 0.01; done
echo evil > .mcp.json && echo WROTE-REMOVED
`
	staged, store := filepath.Join(t.TempDir(), "staged"), filepath.Join(t.TempDir(), "changes")
	p, d := sh(t, script, func(in *plan.Input) {
		in.Cwd = in.Workspace
		for rel, content := range map[string]string{".envrc": "export A=1\n", ".mcp.json": "{}\n"} {
			if err := os.WriteFile(filepath.Join(in.Workspace, rel), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(in.Workspace, ".vscode"), 0o755); err != nil {
			t.Fatal(err)
		}
		var ps []plan.Protected
		for _, rel := range []string{".envrc", ".mcp.json"} {
			ps = append(ps, plan.Protected{Path: filepath.Join(in.Workspace, rel), Beneath: in.Workspace})
		}
		ps, err := changes.Stage(staged, ps)
		if err != nil {
			t.Fatal(err)
		}
		in.Brokers.Mounts = plan.ProtectMounts(ps)
		in.Brokers.Guards = []plan.Guard{{Path: filepath.Join(in.Workspace, ".vscode/tasks.json"), Beneath: in.Workspace}}
		in.Brokers.ChangesDir = store
	})
	r := RunBox(t, factory(), p, Options{AfterExec: func(*engine.Box) {
		if err := os.Remove(filepath.Join(d.Workspace, ".mcp.json")); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(filepath.Join(d.Workspace, "go"), nil, 0o644); err != nil {
			t.Error(err)
		}
	}})
	mustExec(t, r)
	out, stderr := string(r.Stdout), string(r.Stderr)
	if r.Exit != 0 || !strings.Contains(out, "WROTE-ABSENT") || !strings.Contains(out, "WROTE-REMOVED") {
		t.Fatalf("exit %d: the box's writes failed:\n%s\n%s", r.Exit, out, stderr)
	}
	// (1) the bound
	if strings.Contains(out, "WROTE-PAST-BOUND") || !strings.Contains(stderr, "No space left on device") ||
		!strings.Contains(stderr, "copy of protected "+filepath.Join(d.Workspace, ".envrc")+" reached its bound of "+strconv.Itoa(changes.MaxFile)+" bytes") {
		t.Errorf("a write of 5000000 bytes to the staged copy of .envrc was not stopped at the bound:\n%s\n%s", out, stderr)
	}
	copyPath := filepath.Join(staged, "box", ".envrc")
	if fi, err := os.Stat(copyPath); err != nil || fi.Size() > changes.MaxFile {
		t.Errorf("the host's staged copy of .envrc: %v, size %d: want at most %d bytes", err, size(fi), changes.MaxFile)
	}
	if _, err := os.Stat(copyPath + changes.TruncatedSuffix); err != nil {
		t.Errorf("the staged copy is not marked truncated: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(d.Workspace, ".envrc")); string(b) != "export A=1\n" {
		t.Errorf("the host's .envrc became %d bytes", len(b))
	}
	// (2) the path the host removed, (3) the absent one
	for rel, want := range map[string]string{".mcp.json": "evil\n", ".vscode/tasks.json": "planted\n"} {
		if b, err := os.ReadFile(filepath.Join(d.Workspace, rel)); err == nil {
			t.Errorf("%s on the host holds %q after the box", rel, b)
		}
		if b, err := os.ReadFile(filepath.Join(store, rel)); err != nil || string(b) != want {
			t.Errorf("proposed change %s: %q (%v), want the box's %q", rel, b, err, want)
		}
	}
}

func size(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}
