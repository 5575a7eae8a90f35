package attack

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestRegistry guards the battery that selftest and the e2e suite share: at least 50
// attempts, unique names usable with -run, every one with a category, an expectation and a
// probe, and every group of the threat model covered.
func TestRegistry(t *testing.T) {
	all := All()
	if len(all) < 50 {
		t.Errorf("%d attempts, want at least 50", len(all))
	}
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	cats := map[string]int{}
	for _, a := range all {
		switch {
		case !name.MatchString(a.Name):
			t.Errorf("attempt %q: name is not lower-case-with-dashes", a.Name)
		case seen[a.Name]:
			t.Errorf("attempt %q registered twice", a.Name)
		case a.Expect == "" || a.Category == "" || a.Run == nil:
			t.Errorf("attempt %q lacks an expectation, a category or a probe", a.Name)
		}
		if got, ok := Lookup(a.Name); !ok || got.Name != a.Name {
			t.Errorf("Lookup(%q) = %v", a.Name, ok)
		}
		var tg Targets
		if why := tg.Missing(a); a.Needs != "" && why == "unknown target "+a.Needs {
			t.Errorf("attempt %q needs an unknown target %q", a.Name, a.Needs)
		}
		seen[a.Name] = true
		cats[a.Category]++
	}
	for _, c := range []string{CategoryFilesystem, CategorySecrets, CategoryNetwork, CategoryProcess, CategoryTerminal, CategoryKernel, CategoryCleanup} {
		if cats[c] == 0 {
			t.Errorf("no attempt in category %s", c)
		}
	}
}

// TestFixtureIsProtected: every fixture PrepareWorkspace writes is a path the protected-path
// attempts aim at, so checkProtected compares what the box attacked.
func TestFixtureIsProtected(t *testing.T) {
	for rel := range fixture {
		if !underProtected(rel) {
			t.Errorf("fixture %s is not among the protected paths the attempts aim at", rel)
		}
	}
}

// TestProtectedListsShared: in the fixture's workspace with every protected path of the plan's
// lists present as well, what the integrity resolver pins (the protected paths that exist, the
// core.hooksPath folder the configuration names) is exactly what the protected-path attempts
// aim at, and every fixture file lies at or beneath a pinned path: a path added to the plan's
// lists is attacked, and the battery attacks nothing agentbox does not protect.
func TestProtectedListsShared(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := PrepareWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, rel := range plan.WorkspaceProtected {
		if rel != ".git" {
			all = append(all, rel)
		}
	}
	for _, rel := range plan.GitDirProtected {
		all = append(all, ".git/"+rel)
	}
	for _, rel := range all {
		p := filepath.Join(ws, rel)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(plan.ProtectedDirs, filepath.Base(rel)) {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("x\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")}
	lay, err := reg.Prepare("attack-lists", ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Release("attack-lists")
	pinned := map[string]bool{}
	for _, p := range lay.Protected {
		rel, _ := filepath.Rel(ws, p.Path)
		pinned[rel] = true
	}
	aimed := map[string]bool{}
	for _, p := range append(present(ws, protectedFiles), present(ws, protectedDirs)...) {
		rel, _ := filepath.Rel(ws, p)
		aimed[rel] = true
	}
	for rel := range pinned {
		if !aimed[rel] {
			t.Errorf("the resolver pins %s, which no protected-path attempt aims at", rel)
		}
	}
	for rel := range aimed {
		if !pinned[rel] {
			t.Errorf("the attempts aim at %s, which the resolver does not pin", rel)
		}
	}
	for rel := range fixture {
		covered := false
		for p := range pinned {
			if rel == p || strings.HasPrefix(rel, p+"/") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("fixture %s is not protected by the resolver", rel)
		}
	}
}
