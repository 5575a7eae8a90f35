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

// TestSurelyNoRepository: the checks at exit run no git only where git certainly finds no
// repository. A folder under none is one; a folder beneath a .git folder, a .git file, a
// dangling .git symlink or a HEAD (a bare repository's mark), at any height, is not, nor is a
// symlink to a folder in a repository, nor a path that is not a folder.
func TestSurelyNoRepository(t *testing.T) {
	root := t.TempDir()
	if !surelyNoRepository(root) {
		t.Skipf("%s lies beneath a .git or a HEAD: the cases below mean nothing here", root)
	}
	mk := func(rel string) string {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("plain/a/b")
	mk("gitdir/.git")
	os.WriteFile(filepath.Join(mk("gitfile"), ".git"), []byte("gitdir: /nowhere\n"), 0o644)
	os.Symlink("/nowhere", filepath.Join(mk("gitlink"), ".git"))
	os.WriteFile(filepath.Join(mk("bare"), "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	mk("gitdir/a/b")
	mk("gitfile/a")
	mk("gitlink/a")
	mk("bare/a/b")
	os.Symlink(filepath.Join(root, "gitdir", "a"), filepath.Join(root, "plain", "link"))
	os.WriteFile(filepath.Join(root, "plain", "file"), nil, 0o644)
	for rel, want := range map[string]bool{
		"plain": true, "plain/a/b": true,
		"gitdir": false, "gitdir/a/b": false, "gitfile/a": false, "gitlink/a": false, "bare": false, "bare/a/b": false,
		"plain/link": false, "plain/file": false, "plain/missing": false,
	} {
		if got := surelyNoRepository(filepath.Join(root, rel)); got != want {
			t.Errorf("surelyNoRepository(%s) = %v, want %v", rel, got, want)
		}
	}
}

// TestNoGitWhereNoRepository: in a workspace in no repository the checks at exit find nothing
// and run no git (a git on PATH that records its runs was not run); in a workspace that is a
// folder beneath a repository's top (no .git of its own, a tracked file in it), they still run git and take what the
// launch left there: an ignored file, an untracked file in a folder git status folds.
func TestNoGitWhereNoRepository(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	bin := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	script := "#!/bin/sh\necho \"$*\" >> " + runs + "\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	check := func(ws string, write func()) (IgnoredResult, UntrackedResult, int) {
		t.Helper()
		os.Remove(runs)
		s := &State{Workspace: ws, Started: time.Now()}
		time.Sleep(20 * time.Millisecond)
		write()
		ign := s.IgnoredChanged(context.Background())
		unt, err := s.UntrackedUnlisted(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(runs)
		n := 0
		for _, c := range b {
			if c == '\n' {
				n++
			}
		}
		return ign, unt, n
	}

	none := t.TempDir()
	if !surelyNoRepository(none) {
		t.Skipf("%s lies beneath a .git or a HEAD", none)
	}
	ign, unt, n := check(none, func() { os.WriteFile(filepath.Join(none, "x.log"), nil, 0o644) })
	if len(ign.Files) != 0 || len(ign.NotChecked) != 0 || len(unt.Files) != 0 || n != 0 {
		t.Errorf("no repository: ignored %+v, untracked %+v, %d runs of git; want none", ign, unt, n)
	}

	top := t.TempDir()
	ws := filepath.Join(top, "sub")
	os.MkdirAll(filepath.Join(ws, "scratch"), 0o755)
	os.WriteFile(filepath.Join(top, ".gitignore"), []byte("*.log\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "main.go"), nil, 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"}} {
		c := exec.Command(realGit, args...)
		c.Dir = top
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	ign, unt, n = check(ws, func() {
		os.WriteFile(filepath.Join(ws, "x.log"), nil, 0o644)
		os.WriteFile(filepath.Join(ws, "scratch", "new.go"), nil, 0o644)
	})
	if !slices.Contains(ign.Files, "x.log") || !slices.Contains(unt.Files, filepath.Join("scratch", "new.go")) || n == 0 {
		t.Errorf("a folder beneath a repository's top: ignored %+v, untracked %+v, %d runs of git; want x.log, scratch/new.go and git run", ign, unt, n)
	}
}
