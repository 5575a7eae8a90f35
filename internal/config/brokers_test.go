package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrokerKeysValidated(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"git allow pattern", "git:\n  allow:\n    - github.com/org/*\n", "config.yaml:3"},
		{"ssh key not a fingerprint", "git:\n  ssh:\n    hosts: [example.com]\n    keys: [notakey]\n", "git.ssh.keys"},
		{"gateway file and command", "gateway:\n  anthropic:\n    credential:\n      file: /x\n      command: [pass, show]\n", "gateway.anthropic.credential"},
		{"gateway header", "gateway:\n  openai:\n    credential:\n      header: Cookie\n", "gateway.openai.credential.header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			err := Validate(path)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	ok := "gateway:\n  anthropic:\n    url: http://127.0.0.1:9\n    credential:\n      file: /tmp/key\ngit:\n  allow: [github.com/org, \"http://127.0.0.1:8080/repos\"]\n  pushAllow: [github.com/org/repo]\n"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Validate(path); err != nil {
		t.Fatalf("valid broker config refused: %v", err)
	}
}
