package attack

import (
	"regexp"
	"testing"
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
