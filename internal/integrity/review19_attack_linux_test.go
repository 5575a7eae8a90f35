package integrity

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAttackHiddenEditFIFOAttributes (review 19, F1): the check at exit's hidden-edit check
// (verifyHiddenEdits, in VerifyExit) runs the host's git hash-object on the workspace before
// the search for files git would wait on (unblockGit, which only IgnoredChanged and
// UntrackedUnlisted call, after VerifyExit). A box that hides an edit with an ident attribute
// (TestAttackIdentHidesEdit's trick) and makes sub/.gitattributes a FIFO holds that git until
// its 2-minute bound: the edit is not named (only "were not checked"), the end of the run waits
// 2 minutes per repository (no "stop after the first bound" rule here, unlike the ignored
// check's), and once unblockGit moves the FIFO aside the host's git status shows nothing.
// docs/integrity.md ("What git opens") says every .gitattributes is "searched for before git
// runs".
func TestAttackHiddenEditFIFOAttributes(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	gitIn(ws, "", false, "init", "-q", "-b", "main")
	mustWrite(t, filepath.Join(ws, "sub", "build.sh"), "#!/bin/sh\nVERSION='$Id$'\necho built\n")
	gitIn(ws, "", false, "add", "-A")
	gitIn(ws, "", false, "commit", "-qm", "one")
	time.Sleep(1100 * time.Millisecond) // past since()'s second before Started
	s := &State{Workspace: ws, Started: time.Now()}

	// The box: the ident trick, and a FIFO where git reads sub/build.sh's attributes.
	mustWrite(t, filepath.Join(ws, ".gitattributes"), "build.sh ident\n")
	mustWrite(t, filepath.Join(ws, "sub", "build.sh"), "#!/bin/sh\nVERSION='$Id: '; touch /tmp/pwned; : ' $'\necho built\n")
	gitIn(ws, "", false, "read-tree", "HEAD")
	fifo := filepath.Join(ws, "sub", ".gitattributes")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever happens, free a git still waiting on the FIFO (opening its other end).
	t.Cleanup(func() {
		for range 50 {
			fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				return
			}
			unix.Close(fd)
			time.Sleep(20 * time.Millisecond)
		}
	})

	done := make(chan []Transition, 1)
	start := time.Now()
	go func() { done <- s.VerifyExit() }()
	var got []Transition
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the check at exit (VerifyExit) still runs after 30 s: its hidden-edit git waits on the box's FIFO %s (the bound is 2 minutes per repository)", fifo)
	}
	named := false
	for _, tr := range got {
		if tr.Alert && tr.Path == filepath.Join(ws, "sub", "build.sh") {
			named = true
		}
	}
	if !named {
		var ds []string
		for _, tr := range got {
			ds = append(ds, tr.Path+": "+tr.Detail)
		}
		t.Errorf("after %v the hidden edit of sub/build.sh is not named; alerts:\n%s", time.Since(start).Round(time.Millisecond), strings.Join(ds, "\n"))
	}
	if _, err := os.Lstat(fifo); err == nil {
		t.Logf("the FIFO is still at %s after VerifyExit", fifo)
	}
}

// TestAttackSparseFlagCarriedToNextLaunch (review 19, F2): an entry a box flags skip-worktree
// while its file is absent is left alone ("a sparse checkout flags the files it leaves out"),
// and the next launch's snapshot records the flag as the user's: "entries flagged at launch
// are left alone". So launch A removes the tracked Makefile and flags it (its check at exit
// sees no file: left, nothing said; the host's git status shows no deletion either), and
// launch B, the next day, writes a new Makefile: no check of B looks at a flagged entry
// (neither the flags', the stat data's, nor the hidden-edit check), the host's git status and
// git diff show nothing, and the host's make runs B's Makefile. docs/integrity.md, "Index
// flags that hide an edit": a flagged edit is shown to the host's git, or the alert names it.
func TestAttackSparseFlagCarriedToNextLaunch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", "-b", "main")
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed build\n")
	git("add", "-A")
	git("commit", "-qm", "one")

	// Launch A: the file removed, its entry flagged.
	a := Snapshot(resolveWS(t, ws), Limits{})
	if err := os.Remove(filepath.Join(ws, "Makefile")); err != nil {
		t.Fatal(err)
	}
	git("update-index", "--skip-worktree", "Makefile")
	var alerts []string
	for _, tr := range a.VerifyExit() {
		if tr.Alert && strings.HasSuffix(tr.Path, "Makefile") {
			alerts = append(alerts, "A: "+tr.Detail)
		}
	}
	if out := git("status", "--porcelain"); out != "" {
		t.Logf("after launch A the host's git status shows:\n%s", out)
	}

	// Launch B, later: a Makefile of its own where the flagged entry is.
	time.Sleep(1100 * time.Millisecond)
	b := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@id > PWNED; echo built\n")
	for _, tr := range b.VerifyExit() {
		if tr.Alert && strings.HasSuffix(tr.Path, "Makefile") {
			alerts = append(alerts, "B: "+tr.Detail)
		}
	}
	status := git("status", "--porcelain")
	diff := git("diff", "HEAD")
	if !strings.Contains(status, "Makefile") && len(alerts) == 0 {
		t.Errorf("launch B's Makefile (tracked, edited) is hidden: the host's git status %q and git diff HEAD %q show nothing, and no check of either launch names it; the host's make runs it", status, diff)
	}
	t.Logf("alerts on Makefile: %q; git status after B: %q", alerts, status)
}
