//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackBrokenConfigIsLoud guards issue 21, finding 6: a broken or misspelled user config
// was ignored silently — run kept the last good configuration (a looser allowlist, here) and
// printed nothing; only info --json showed configError. Now run refuses with the file, line
// and reason, every time, and info and doctor print them too.
func TestAttackBrokenConfigIsLoud(t *testing.T) {
	e := NewEnv(t)
	cfg := filepath.Join(e.Config, "agentbox", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("egressAllow: [registry.example.org]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "run", "true"); r.Code != 0 {
		t.Fatalf("run with a good config: exit %d\n%s", r.Code, r.Stderr)
	}
	// A misspelled key (egressAlow) narrowing what the user meant to allow.
	if err := os.WriteFile(cfg, []byte("egressAlow: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := cfg + ":1"
	for i := 0; i < 2; i++ {
		r := e.Run("", "run", "sh", "--", "-c", "echo box ran")
		if r.Code != 125 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "egressAlow") || strings.Contains(r.Stdout, "box ran") {
			t.Fatalf("run %d: exit %d, want 125 naming %s and egressAlow:\n%s%s", i, r.Code, want, r.Stdout, r.Stderr)
		}
	}
	if r := e.Run("", "info"); !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "egressAlow") {
		t.Errorf("info: exit %d, want %s and egressAlow on stderr:\n%s%s", r.Code, want, r.Stdout, r.Stderr)
	}
	if r := e.Run("", "doctor"); r.Code != 1 || !strings.Contains(r.Stderr, want) {
		t.Errorf("doctor: exit %d, want 1 and %s on stderr:\n%s%s", r.Code, want, r.Stdout, r.Stderr)
	}
}
