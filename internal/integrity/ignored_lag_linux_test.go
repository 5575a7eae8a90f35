package integrity

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestIgnoredChangedCoarseCtime: a file the box wrote right after the snapshot is taken even
// when its ctime, stamped from the kernel's coarse clock, lies before State.Started (up to a
// tick). Simulated here by a Started a few milliseconds ahead of the write: before the check
// allowed ctimeLag, the file was left in the git-ignored place (TestRecordFoldersSaved failed
// 17 of 30 runs on tmpfs for this).
func TestIgnoredChangedCoarseCtime(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	mustWrite(t, filepath.Join(ws, ".gitignore"), "build/\n")
	if err := os.MkdirAll(filepath.Join(ws, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ctimeLag) // the host's folder, well before the launch
	s := &State{Workspace: ws, Started: time.Now().Add(ctimeLag / 5)}
	mustWrite(t, filepath.Join(ws, "build", "new.o"), "box\n")
	if got := s.IgnoredChanged(context.Background()).Files; !slices.Contains(got, "build/new.o") {
		t.Errorf("a file written within the coarse clock's lag of the snapshot was not taken: %v", got)
	}
}
