//go:build unix

package llm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/llm"
)

// TestCheckCredentialFileOwner covers the owner check as any user: the file is checked
// against a uid that is not its owner's.
func TestCheckCredentialFileOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckCredentialFile(fi, os.Getuid()); err != nil {
		t.Fatalf("own 0600 file refused: %v", err)
	}
	err = llm.CheckCredentialFile(fi, os.Getuid()+1)
	if err == nil || !strings.Contains(err.Error(), "owned by uid") {
		t.Fatalf("foreign owner: %v", err)
	}
	os.Chmod(path, 0o400)
	fi, _ = os.Stat(path)
	if err := llm.CheckCredentialFile(fi, os.Getuid()); err != nil {
		t.Fatalf("0400 refused: %v", err)
	}
}
