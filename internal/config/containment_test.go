package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainment: wrap mode is set by the system policy only, and its programs are checked.
func TestContainment(t *testing.T) {
	dir := t.TempDir()
	pdir := filepath.Join(dir, "etc")
	os.Mkdir(pdir, 0o755)
	policy := filepath.Join(pdir, "policy.yaml")
	user := filepath.Join(dir, "config.yaml")
	os.WriteFile(user, nil, 0o600)
	os.WriteFile(policy, []byte("containment:\n  violations: terminate\n  programs:\n    - name: claude\n      path: /opt/claude/bin/claude\n    - name: codex\n"), 0o644)
	e, err := Load(LoadOptions{UserFile: user, PolicyFile: policy, PolicyOwner: os.Getuid()})
	if err != nil {
		t.Fatal(err)
	}
	c := e.Config.Containment
	if c.Violations != ViolationsTerminate || len(c.Programs) != 2 || c.Programs[0] != (ContainedProgram{"claude", "/opt/claude/bin/claude"}) || !e.Locked("containment.programs") {
		t.Errorf("containment %+v", c)
	}

	os.WriteFile(user, []byte("containment:\n  programs:\n    - name: claude\n"), 0o600)
	_, err = Load(LoadOptions{UserFile: user, PolicyFile: policy, PolicyOwner: os.Getuid()})
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Field != "containment.programs" || !strings.Contains(ie.Msg, "only the system policy") {
		t.Errorf("user file setting containment: %v, want refused", err)
	}

	for name, tc := range map[string]struct{ yaml, field string }{
		"slash":    {"containment:\n  programs:\n    - name: a/b\n", "containment.programs[0].name"},
		"self":     {"containment:\n  programs:\n    - name: agentbox\n", "containment.programs[0].name"},
		"twice":    {"containment:\n  programs:\n    - name: claude\n    - name: claude\n", "containment.programs[1].name"},
		"relative": {"containment:\n  programs:\n    - name: claude\n      path: bin/claude\n", "containment.programs[0].path"},
		"posture":  {"containment:\n  violations: kill\n", "containment.violations"},
		"unknown":  {"containment:\n  programs:\n    - name: claude\n      exe: /x\n", "containment.programs[0].exe"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Validate(writeFile(t, filepath.Join(t.TempDir(), "p.yaml"), tc.yaml, 0o644))
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Errorf("%v, want an error at %s", err, tc.field)
			}
		})
	}
}
