package integrity

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUntrackedUnlisted (review 16, F5): the untracked files the launch created or changed
// that the user's git status does not name are listed, and only those: a file added to an
// untracked folder git status shows as one line (one the user had, one the box made), every
// new untracked file where status.showUntrackedFiles=no, none where it is all. Not listed: an
// untracked file git status names, the host's untracked file untouched since the snapshot,
// ignored files (the ignored-places rule's), the dependency folders.
func TestUntrackedUnlisted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		c.Dir = ws
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	put := func(rel string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(rel+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &State{Workspace: ws, Deps: map[string]DepFolder{filepath.Join(ws, "scratch", "node_modules"): {}}}
	// Not a repository yet: nothing, no error.
	s.Started = time.Now()
	if res, err := s.UntrackedUnlisted(context.Background()); err != nil || len(res.Files) != 0 {
		t.Fatalf("no repository: %+v %v", res, err)
	}
	gitIn("init", "-q")
	put(".gitignore")
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("build/\n"), 0o644)
	put("src.go")
	gitIn("add", "-A")
	gitIn("commit", "-qm", "init")
	put("scratch/notes.txt") // the user's, untracked, before the launch
	// The launch begins after the host's files were written (a ctime counts from ctimeLag
	// before it).
	s.Started = time.Now().Add(2 * ctimeLag)
	time.Sleep(3 * ctimeLag)
	for _, rel := range []string{"scratch/scratch_test.go", "scratch/deep/x.go", "newdir/a.go", "new.go", "build/out", "scratch/node_modules/m.js"} {
		put(rel)
	}
	list := func() (string, string) {
		t.Helper()
		res, err := s.UntrackedUnlisted(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(res.Files, " "), res.Why
	}
	if got, why := list(); got != "newdir/a.go scratch/deep/x.go scratch/scratch_test.go" || !strings.Contains(why, "newdir/, scratch/") {
		t.Errorf("default mode: %q (%s), want the files in the untracked folders only", got, why)
	}
	gitIn("config", "status.showUntrackedFiles", "no")
	if got, why := list(); got != "new.go newdir/a.go scratch/deep/x.go scratch/scratch_test.go" || !strings.Contains(why, "showUntrackedFiles=no") {
		t.Errorf("showUntrackedFiles=no: %q (%s), want every untracked file of the launch", got, why)
	}
	gitIn("config", "status.showUntrackedFiles", "all")
	if got, why := list(); got != "" || why != "" {
		t.Errorf("showUntrackedFiles=all: %q (%s), want none: git status names each", got, why)
	}
}
