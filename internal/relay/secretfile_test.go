package relay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCleanSecret(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"sk-abc\n", "sk-abc", ""},
		{"  sk-abc  ", "sk-abc", ""},
		{"\n\n", "", "empty secret"},
		{"sk-a\nsk-b", "", "control characters"},
		{"sk\x00x", "", "control characters"},
		{strings.Repeat("a", 17), "", "more than 16 bytes"},
	} {
		got, err := CleanSecret([]byte(tc.in), 16)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("CleanSecret(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CleanSecret(%q) error = %v; want %q", tc.in, err, tc.err)
		}
	}
}

func TestReadSecretFileRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("s\n"), 0o644)
	os.Chmod(open, 0o644)
	if _, err := ReadSecretFile(open, os.Getuid(), 64); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 file: %v, want a refusal naming chmod 600", err)
	}
	if _, err := ReadSecretFile(filepath.Join(dir, "missing"), os.Getuid(), 64); err == nil || err.Error() != "does not exist" {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := ReadSecretFile(dir, os.Getuid(), 64); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("s\n"), 0o600)
	if _, err := ReadSecretFile(ok, os.Getuid()+1, 64); err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Errorf("a file of another uid: %v", err)
	}
	if b, err := ReadSecretFile(ok, os.Getuid(), 64); err != nil || string(b) != "s\n" {
		t.Errorf("a good file: %q, %v", b, err)
	}
}
