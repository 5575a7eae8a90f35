package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackDependencyProjectRenamed: a box renames the project folder above a dependency
// folder that is its own (the overlay's mount travels with the folder, in the box), makes a
// new project folder at the old path with a node_modules of its own, and hides the host's
// folder inside it. Before, the rename worked: the host's npm test then ran the box's
// node_modules/.bin (review 13, F3). The folders between the workspace's top and each
// dependency folder are now pinned (bound onto themselves), so the rename fails with EBUSY.
func TestAttackDependencyProjectRenamed(t *testing.T) {
	gitTools(t)
	for _, engine := range []string{"native", "bwrap"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // its own daemon; mostly waits (parallelTests)
			if _, err := exec.LookPath("bwrap"); err != nil && engine == "bwrap" {
				t.Skipf("bwrap is not installed: %v", err)
			}
			e := NewEnv(t)
			writeConfig(t, e, "engine: "+engine+"\n")
			attackDependencyProjectRenamed(t, e)
		})
	}
}

func attackDependencyProjectRenamed(t *testing.T, e *Env) {
	fe := filepath.Join(e.Work, "web", "frontend")
	host := "#!/bin/sh\necho host-hello\n"
	for name, content := range map[string]string{
		".gitignore":                           "node_modules/\n",
		"web/frontend/package.json":            `{"name":"fe","version":"1.0.0","scripts":{"test":"hello"}}` + "\n",
		"web/frontend/node_modules/.bin/hello": host,
	} {
		p := filepath.Join(e.Work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := hostTool(e, e.Work, "sh", "-c", "git init -q . && git add . && git -c user.name=a -c user.email=a@b commit -qm init"); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	// Each step on its own: the project folder, and the folder above it.
	r := e.Run("", "run", "sh", "--", "-c", `plant() { mkdir -p "$1/node_modules/.bin" && cp "$2/package.json" "$1/" &&
printf '#!/bin/sh\necho BOX-HELLO\n' > "$1/node_modules/.bin/hello" && chmod +x "$1/node_modules/.bin/hello" && mv "$2" "$1/node_modules/old"; }
mv web/frontend web/frontend.x && plant web/frontend web/frontend.x && echo frontend-moved
mv web web.x && mkdir web && plant web/frontend web.x/frontend && echo web-moved
echo done`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
		t.Fatalf("box: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, moved := range []string{"frontend-moved", "web-moved"} {
		if strings.Contains(r.Stdout, moved) {
			t.Errorf("the box renamed a folder above its dependency folder (%s)", moved)
		}
	}
	if b, err := os.ReadFile(filepath.Join(fe, "node_modules", ".bin", "hello")); err != nil || string(b) != host {
		t.Errorf("the host's %s holds %q (%v), want the host's script", filepath.Join(fe, "node_modules", ".bin", "hello"), b, err)
	}
	if _, err := exec.LookPath("npm"); err == nil {
		if out, err := hostTool(e, fe, "npm", "test"); err != nil || !strings.Contains(out, "host-hello") || strings.Contains(out, "BOX-") {
			t.Errorf("the host's npm test after the box (%v):\n%s", err, out)
		}
	}
}
