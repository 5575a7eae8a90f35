package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrackedUnlistedSaid (review 16, F5): a real box adds a file to the user's untracked
// scratch/ (git status: "?? scratch/" before and after) and a new file at the top (git status
// names it). The end of the run names the first, and only it; both stay in the workspace, as
// every untracked file does.
func TestUntrackedUnlistedSaid(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "bin/\n")
	write(t, filepath.Join(e.work, "scratch", "notes.txt"), "the user's notes\n")
	out := e.boxPlant(`printf 'package scratch\n' > scratch/x_test.go && printf 'package main\n' > new.go && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "untracked files that git status does not name") {
			line = l
		}
	}
	if !strings.Contains(line, ": 1 files: scratch/x_test.go (git status shows the untracked folder holding each as one line: scratch/)") || strings.Contains(line, "new.go") {
		t.Errorf("the end of the run: %q, want scratch/x_test.go named, new.go not:\n%s", line, out)
	}
	for _, rel := range []string{"scratch/x_test.go", "new.go", "scratch/notes.txt"} {
		if _, err := os.Lstat(filepath.Join(e.work, rel)); err != nil {
			t.Errorf("%s is gone from the workspace: %v", rel, err)
		}
	}
}
