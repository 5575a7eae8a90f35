package integrity

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAttackGitFIFOAfterSearch (session 19, what review 18's fix left): the checks at exit
// search the workspace for the files their git would wait on before running it (unblockGit),
// but a FIFO made after that search (a second box on the workspace) held each git call for its
// time bound, 2 minutes, before the walk in Go took over. Now a git of the checks that waits
// on a FIFO is stopped at once (runCheckGit): the check of the git-ignored places searches
// again, removes the launch's FIFO and runs git again (run.log taken, nothing failed); so does
// the check of tracked edits git does not show (git hash-object reads .gitattributes). The time bound
// here is the real one for the hidden edits (2 minutes) and 30 s for the ignored places: the
// test fails without the watch on either (the time bound reached, the FIFO left).
func TestAttackGitFIFOAfterSearch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	defer func(d time.Duration) { gitCheckTimeout = d }(gitCheckTimeout)
	gitCheckTimeout = 30 * time.Second
	for _, c := range []string{"ignored", "hidden"} {
		t.Run(c, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(t.TempDir(), "gitconfig"))
			t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			gitIn(ws, "", false, "init", "-q", "-b", "main")
			mustWrite(t, filepath.Join(ws, ".gitignore"), "*.log\n")
			mustWrite(t, filepath.Join(ws, "src.go"), "package main\n")
			gitIn(ws, "", false, "add", "-A")
			gitIn(ws, "", false, "commit", "-qm", "init")
			time.Sleep(20 * time.Millisecond)
			s := &State{Workspace: ws, Started: time.Now()}
			time.Sleep(20 * time.Millisecond)
			// The box.
			mustWrite(t, filepath.Join(ws, "run.log"), "box\n")
			mustWrite(t, filepath.Join(ws, "src.go"), "package main // box\n")
			// The search before git, with nothing to find yet.
			if moved, left, _ := s.unblockGit(true); len(moved)+len(left) > 0 {
				t.Fatalf("the search found %q %q", moved, left)
			}
			// Then the second box's FIFO.
			fifo := filepath.Join(ws, "x", ".gitignore")
			if c == "hidden" {
				fifo = filepath.Join(ws, ".gitattributes") // git hash-object src.go reads it
			}
			os.MkdirAll(filepath.Dir(fifo), 0o755)
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			switch c {
			case "ignored":
				done := make(chan IgnoredResult, 1)
				go func() { done <- s.IgnoredChanged(context.Background()) }()
				var res IgnoredResult
				select {
				case res = <-done:
				case <-time.After(4 * time.Minute):
					t.Fatal("the check of the git-ignored places did not end within 4 minutes")
				}
				took := time.Since(start)
				t.Logf("took %v: %+v", took, res)
				if !slices.Contains(res.Files, "run.log") {
					t.Errorf("the box's run.log is not taken: %+v", res)
				}
				if len(res.Failed) > 0 || len(res.NotChecked) > 0 {
					t.Errorf("git failed (the FIFO held it to its time bound?): %+v", res)
				}
				if len(res.Aside) != 1 || !strings.Contains(res.Aside[0], "x/.gitignore") || !strings.Contains(res.Aside[0], "removed") {
					t.Errorf("the second box's FIFO is not said removed: %q", res.Aside)
				}
				if _, err := os.Lstat(fifo); err == nil {
					t.Errorf("the second box's FIFO %s is still there", fifo)
				}
			case "hidden":
				done := make(chan []Transition, 1)
				go func() { done <- s.verifyHiddenEdits(nil) }()
				var got []Transition
				select {
				case got = <-done:
				case <-time.After(4 * time.Minute):
					t.Fatal("the check of hidden edits did not end within 4 minutes")
				}
				took := time.Since(start)
				t.Logf("took %v: %+v", took, got)
				if len(got) != 1 || !strings.Contains(got[0].Detail, ".gitattributes") || !strings.Contains(got[0].Detail, "removed") {
					t.Errorf("the check does not say the second box's FIFO .gitattributes was removed (and nothing else: src.go's edit is shown by git): %+v", got)
				}
				if _, err := os.Lstat(fifo); err == nil {
					t.Errorf("the second box's FIFO %s is still there", fifo)
				}
			}
		})
	}
}

// BenchmarkGitFIFOAfterSearch measures the worst case of a FIFO made after the search: the
// check of the git-ignored places (IgnoredChanged) of a small repository, the search done
// before, with a FIFO at x/.gitignore made after it (late: git stopped, the workspace
// searched again, git run again) and without (none).
func BenchmarkGitFIFOAfterSearch(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	gitIn(ws, "", false, "init", "-q", "-b", "main")
	mustWrite(b, filepath.Join(ws, ".gitignore"), "*.log\n")
	mustWrite(b, filepath.Join(ws, "src.go"), "package main\n")
	gitIn(ws, "", false, "add", "-A")
	gitIn(ws, "", false, "commit", "-qm", "init")
	time.Sleep(20 * time.Millisecond)
	started := time.Now()
	os.MkdirAll(filepath.Join(ws, "x"), 0o755)
	for _, late := range []bool{false, true} {
		name := "none"
		if late {
			name = "late"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s := &State{Workspace: ws, Started: started}
				s.unblockGit(true)
				if late {
					if err := syscall.Mkfifo(filepath.Join(ws, "x", ".gitignore"), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				res := s.IgnoredChanged(context.Background())
				if len(res.Failed) > 0 || len(res.Aside) != len(slices.DeleteFunc([]bool{late}, func(l bool) bool { return !l })) {
					b.Fatalf("%+v", res)
				}
			}
		})
	}
}

// BenchmarkWaitsOnFIFO measures one look of runCheckGit's watch (every fifoPoll while a git of
// the checks runs) at a process waiting on nothing (sleep).
func BenchmarkWaitsOnFIFO(b *testing.B) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		b.Skip(err)
	}
	defer c.Process.Kill()
	for i := 0; i < b.N; i++ {
		if _, ok := waitsOnFIFO(c.Process.Pid); ok {
			b.Fatal("sleep waits on a FIFO?")
		}
	}
}
