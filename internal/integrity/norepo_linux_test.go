package integrity

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// BenchmarkExitGitChecks measures the two listings of the check at exit that run git, the
// files left in git-ignored places (IgnoredChanged) and the untracked files git status does
// not name (UntrackedUnlisted), one after the other (as the daemon runs them: seq) and side by
// side (a design tried and not kept: side), alternating within each iteration, in a workspace
// that is a small repository (20 tracked files, an ignored build/ of 20 files, an untracked
// scratch/) and in one in no repository (no git run). Each sub-benchmark reports the median
// and p95 of each arm (ns/op is their sum).
func BenchmarkExitGitChecks(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	repo := b.TempDir()
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(repo, "f"+strconv.Itoa(i)+".go"), []byte("package main\n"), 0o644)
	}
	os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("build/\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"}} {
		c := exec.Command("git", args...)
		c.Dir = repo
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(repo, "build"), 0o755)
	os.MkdirAll(filepath.Join(repo, "scratch"), 0o755)
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(repo, "build", "o"+strconv.Itoa(i)), nil, 0o644)
	}
	os.WriteFile(filepath.Join(repo, "scratch", "notes"), nil, 0o644)
	for name, ws := range map[string]string{"repository": repo, "no-repository": b.TempDir()} {
		b.Run(name, func(b *testing.B) {
			s := &State{Workspace: ws, Started: time.Now()}
			seq := func() {
				s.IgnoredChanged(context.Background())
				s.UntrackedUnlisted(context.Background())
			}
			side := func() {
				done := make(chan struct{})
				go func() { s.UntrackedUnlisted(context.Background()); close(done) }()
				s.IgnoredChanged(context.Background())
				<-done
			}
			var ds [2][]time.Duration
			for i := 0; i < b.N; i++ {
				for k := 0; k < 2; k++ {
					j := (i + k) % 2
					t0 := time.Now()
					[]func(){seq, side}[j]()
					ds[j] = append(ds[j], time.Since(t0))
				}
			}
			for j, what := range []string{"seq", "side"} {
				slices.Sort(ds[j])
				b.ReportMetric(float64(ds[j][len(ds[j])/2].Microseconds())/1000, what+"-median-ms")
				b.ReportMetric(float64(ds[j][len(ds[j])*95/100].Microseconds())/1000, what+"-p95-ms")
			}
		})
	}
}
