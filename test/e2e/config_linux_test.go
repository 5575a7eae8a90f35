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

// TestAttackConfigValidateGaps guards issue 21, finding 7: `config validate` accepted a
// credential file written with ~ (nothing expands it later), a missing one, a mode-0644 one,
// and a git.pushAllow entry outside git.allow. Each is now reported with its key.
func TestAttackConfigValidateGaps(t *testing.T) {
	e := NewEnv(t)
	key := filepath.Join(e.Home, "anthropic.key")
	if err := os.WriteFile(key, []byte("sk-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(e.Home, "git.token")
	if err := os.WriteFile(open, []byte("ghp_test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gateway := "gateway:\n  anthropic:\n    url: https://llm-gateway.example.com\n    credential:\n      file: " + key + "\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"tilde", "gateway:\n  anthropic:\n    credential:\n      file: ~/anthropic.key\n", "gateway.anthropic.credential.file"},
		{"missing", "gateway:\n  anthropic:\n    credential:\n      file: " + key + ".gone\n", "gateway.anthropic.credential.file: " + key + ".gone does not exist"},
		{"mode-0644", gateway + "git:\n  allow: [github.com/org]\n  credentials:\n    - {prefix: github.com/org, username: x, file: " + open + "}\n",
			"git.credentials[0].file: " + open + " has mode 0644"},
		{"push-outside-allow", gateway + "git:\n  allow: [github.com/org]\n  pushAllow: [github.com/other/repo]\n", "git.pushAllow[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(e.Root, tc.name+".yaml")
			if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			if r := e.Run("", "config", "validate", file); r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("config validate: exit %d, want a failure naming %q:\n%s%s", r.Code, tc.want, r.Stdout, r.Stderr)
			}
		})
	}
	good := filepath.Join(e.Root, "good.yaml")
	if err := os.WriteFile(good, []byte(gateway+"git:\n  allow: [github.com/org]\n  pushAllow: [github.com/org/repo]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "config", "validate", good); r.Code != 0 {
		t.Errorf("config validate of a good file: exit %d\n%s", r.Code, r.Stderr)
	}
}
