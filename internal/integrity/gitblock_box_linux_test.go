package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestIgnoredCheckFallbackSaid (review 18, F3): where the checks at exit cannot run git — here
// the host's own FIFO at old/.gitignore, from before the launch, which git would wait on and
// the check does not move — the box's run.log (*.log ignored) is not left in the workspace: a
// walk in Go takes it into the proposed changes, and the end of agentbox run says the check
// failed and that the files were moved out. Before, git waited 2 minutes per call, was
// killed, the checks were skipped ("not checked") and run.log stayed.
func TestIgnoredCheckFallbackSaid(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), "*.log\n")
	write(t, filepath.Join(e.work, "old", "host.txt"), "host\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "ignore")
	host := filepath.Join(e.work, "old", ".gitignore")
	if err := syscall.Mkfifo(host, 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.boxPlant(`echo box > run.log && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	t.Logf("agentbox run said:\n%s", out)
	if _, err := os.Lstat(filepath.Join(e.work, "run.log")); err == nil {
		t.Errorf("the box's run.log, in a git-ignored place, is still in the workspace:\n%s", out)
	}
	if !strings.Contains(out, "the check at exit of the files left in git-ignored places failed") {
		t.Errorf("the end of the run does not say the check failed:\n%s", out)
	}
	if !strings.Contains(out, "the launch left 1 files in git-ignored places") {
		t.Errorf("the end of the run does not say run.log was moved out of the workspace:\n%s", out)
	}
	if fi, err := os.Lstat(host); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the host's own FIFO %s, from before the launch, was moved (%v)", host, err)
	}
	if _, err := os.Lstat(filepath.Join(e.work, "old", "host.txt")); err != nil {
		t.Errorf("the host's tracked old/host.txt was taken: %v\n%s", err, out)
	}
}
