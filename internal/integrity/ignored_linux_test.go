package integrity

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIgnoredChanged: what the check at exit takes for a file the launch left in a git-ignored
// place. Taken: a file created in an ignored folder, at any depth; one the host had there that
// was appended to, or chmod-ed; a file matching an ignore pattern outside an ignored folder;
// a symlink; a file of a submodule's ignored folder; a folder of old files renamed into an
// ignored folder; a file whose name holds QuarantineSuffix; what the check moved aside,
// changed after the move. Left: the host's ignored files untouched since the snapshot (in a
// folder the box added files to, too), tracked and untracked files git status shows, the
// dependency folders (Deps, Own), .git, and what was moved aside, unchanged since.
func TestIgnoredChanged(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	gitIn := func(dir string, args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "protocol.file.allow=always"}, args...)...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	put := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sub := t.TempDir()
	gitIn(sub, "init", "-q")
	os.WriteFile(filepath.Join(sub, ".gitignore"), []byte("out/\n"), 0o644)
	gitIn(sub, "add", "-A")
	gitIn(sub, "commit", "-qm", "sub")
	gitIn(ws, "init", "-q")
	put(".gitignore", "build/\n*.log\nnode_modules/\n.venv/\n")
	put("src.go", "package main\n")
	put("build/old", "host\n")
	put("build/chmod", "host\n")
	put("build/keep", "host\n")
	put("node_modules/x.js", "host\n")
	gitIn(ws, "add", "-A")
	gitIn(ws, "commit", "-qm", "init")
	gitIn(ws, "submodule", "add", "-q", sub, "lib")
	gitIn(ws, "commit", "-qm", "sub")
	put("scratch/tools/t_test.go", "box, an earlier launch's\n")
	time.Sleep(20 * time.Millisecond)
	s := &State{Workspace: ws, Started: time.Now(), Deps: map[string]DepFolder{filepath.Join(ws, "node_modules"): {}},
		Own: []string{filepath.Join(ws, ".venv")}}
	s.RecordFolders("", nil)
	<-s.folders.done
	time.Sleep(20 * time.Millisecond) // a box starts tens of ms after the snapshot
	// Content with an old ctime renamed into an ignored place: all of it is new there
	// (review 16, F2).
	if err := os.Rename(filepath.Join(ws, "scratch", "tools"), filepath.Join(ws, "build", "tools")); err != nil {
		t.Fatal(err)
	}
	// A name is no mark of what the check moved aside (review 16, F1); what it moved aside is
	// left while unchanged, and taken once changed after the move.
	put("build/tools"+QuarantineSuffix+"1/x_test.go", "box\n")
	put("build/conf", "box\n")
	put("build/conf2", "box\n")
	asideConf, err := s.moveAside(filepath.Join(ws, "build", "conf"))
	if err != nil {
		t.Fatal(err)
	}
	asideConf2, err := s.moveAside(filepath.Join(ws, "build", "conf2"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	os.Chmod(asideConf2, 0o755)
	put("build/new", "box\n")
	put("build/a/b/c/deep", "box\n")
	f, _ := os.OpenFile(filepath.Join(ws, "build/old"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("box\n")
	f.Close()
	os.Chmod(filepath.Join(ws, "build/chmod"), 0o755)
	put("x/debug.log", "box\n")
	os.Symlink("/etc/passwd", filepath.Join(ws, "build", "link"))
	put("lib/out/plugin.py", "box\n")
	put("src.go", "package main // box\n")
	put("notes.txt", "box\n")
	put("node_modules/y.js", "box\n")
	put(".venv/lib/z.py", "box\n")
	put(".git/info/box", "box\n")
	put("build"+QuarantineSuffix+"1/q", "box\n")
	res := s.IgnoredChanged(context.Background())
	if len(res.NotChecked) > 0 {
		t.Errorf("not checked: %v", res.NotChecked)
	}
	slices.Sort(res.Files)
	rel := func(p string) string { r, _ := filepath.Rel(ws, p); return r }
	want := []string{"build/a/b/c/deep", "build/chmod", rel(asideConf2), "build/link", "build/new", "build/old", "build/tools" + QuarantineSuffix + "1/x_test.go",
		"build/tools/t_test.go", "lib/out/plugin.py", "x/debug.log"}
	slices.Sort(want)
	if slices.Contains(res.Files, rel(asideConf)) {
		t.Errorf("%s, which the check moved aside, was taken", rel(asideConf))
	}
	if strings.Join(res.Files, " ") != strings.Join(want, " ") {
		t.Errorf("taken: %v\nwant:  %v", res.Files, want)
	}
	// Not in a repository: nothing to take, nothing to report.
	plain := &State{Workspace: t.TempDir(), Started: time.Now()}
	os.WriteFile(filepath.Join(plain.Workspace, "f"), nil, 0o644)
	if res := plain.IgnoredChanged(context.Background()); len(res.Files)+len(res.NotChecked) > 0 {
		t.Errorf("a workspace in no repository: %+v", res)
	}
}

// TestAttackIgnoredRunsNothing (protect10): the check at exit lists the ignored files of the
// workspace and of each submodule checked out, with the host's git. A box makes a repository
// of its own (a sparse checkout with a sparse index, one of whose trees it deletes), adds it
// as a gitlink, makes it a partial clone whose promisor remote's upload-pack is its command,
// and hides it past the scan's bound (here 8 folders), so that the scan does not move that
// configuration aside: git ls-files --stage there expanded the sparse index, fetched the tree
// and ran the box's command as the daemon's user. It must run nothing.
func TestAttackIgnoredRunsNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(dir string, args ...string) string {
		t.Helper()
		out := gitIn(dir, "", false, args...)
		if strings.Contains(out, "(exit status") {
			t.Fatalf("git %v: %s", args, out)
		}
		return strings.TrimSpace(out)
	}
	git(ws, "init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, ".gitignore"), "build/\n")
	git(ws, "add", ".gitignore")
	git(ws, "commit", "-q", "-m", "top")
	s := Snapshot(resolveWS(t, ws), Limits{ScanDirs: 8})
	time.Sleep(20 * time.Millisecond) // a box starts tens of ms after the snapshot
	// The box.
	nested := filepath.Join(ws, "a-repo")
	git(ws, "init", "-q", "-b", "main", nested)
	mustWrite(t, filepath.Join(nested, "a", "f"), "a\n")
	mustWrite(t, filepath.Join(nested, "b", "g"), "b\n")
	git(nested, "add", ".")
	git(nested, "commit", "-q", "-m", "nested")
	git(nested, "sparse-checkout", "set", "--cone", "a")
	git(nested, "config", "index.sparse", "true")
	git(nested, "sparse-checkout", "reapply")
	tree := git(nested, "rev-parse", "HEAD:b")
	if err := os.Remove(filepath.Join(nested, ".git", "objects", tree[:2], tree[2:])); err != nil {
		t.Fatal(err)
	}
	git(ws, "add", "a-repo")
	mark := plantPromisor(t, ws, nested)
	mustWrite(t, filepath.Join(ws, "build", "app"), "box\n")
	// The attack works against the host's git as the check ran it.
	gitIn(nested, "", false, "-c", "core.fsmonitor=false", "ls-files", "--stage")
	if _, err := os.Lstat(mark); err != nil {
		t.Fatalf("the planted configuration did not run with the host's git (the test would prove nothing): %v", err)
	}
	os.Remove(mark)

	incomplete := slices.ContainsFunc(s.VerifyExit(), func(tr Transition) bool { return strings.Contains(tr.Detail, "scan incomplete") })
	if !incomplete {
		t.Fatal("the scan reached the nested repository (the test would prove less): raise the folders made")
	}
	res := s.IgnoredChanged(context.Background())
	if _, err := os.Lstat(mark); err == nil {
		t.Error("the check of the git-ignored places ran the command of the box's configuration")
	}
	if !slices.Contains(res.Files, filepath.Join("build", "app")) {
		t.Errorf("the box's build/app was not taken: %+v", res)
	}
}

// TestIgnoredLinkedWorktree (review 16, F9): a linked worktree of the workspace's repository
// kept in an ignored folder (.worktrees/feature) is a work tree of its own: its tracked files,
// which the user edits there, stay; what the launch left in its own ignored places is taken;
// a worktree made after the snapshot is no worktree of the snapshot, and what it holds is
// taken as any file of an ignored place.
func TestIgnoredLinkedWorktree(t *testing.T) {
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
	put := func(rel, content string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn("init", "-q")
	put(".gitignore", ".worktrees/\nbuild/\n")
	put("app.go", "package main\n")
	gitIn("add", "-A")
	gitIn("commit", "-qm", "init")
	gitIn("worktree", "add", "-q", ".worktrees/feature", "-b", "feature")
	s := &State{Workspace: ws, Started: time.Now(), Worktrees: worktreesBeneath(ws, []string{ws})}
	if want := []string{filepath.Join(".worktrees", "feature")}; !slices.Equal(s.Worktrees, want) {
		t.Fatalf("worktrees at the snapshot: %v, want %v", s.Worktrees, want)
	}
	s.RecordFolders("", nil)
	<-s.folders.done
	time.Sleep(20 * time.Millisecond)
	put(".worktrees/feature/app.go", "package main // the user's edit\n")
	put(".worktrees/feature/new.go", "package main // untracked: its git status shows it\n")
	put(".worktrees/feature/build/x_test.go", "box\n")
	gitIn("worktree", "add", "-q", ".worktrees/late", "-b", "late")
	res := s.IgnoredChanged(context.Background())
	want := []string{".worktrees/feature/build/x_test.go", ".worktrees/late/.gitignore", ".worktrees/late/app.go"}
	if len(res.NotChecked) > 0 || strings.Join(res.Files, " ") != strings.Join(want, " ") {
		t.Errorf("taken: %v (not checked: %v)\nwant:  %v", res.Files, res.NotChecked, want)
	}
}

// TestRecordFoldersBesideChecks: the record of the ignored folders runs beside the box while
// the launch's checks change the state (Deps, Own, Aside); run with -race.
func TestRecordFoldersBesideChecks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	c := exec.Command("git", "init", "-q")
	c.Dir = ws
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("build/\n"), 0o644)
	for i := range 50 {
		os.MkdirAll(filepath.Join(ws, "build", strconv.Itoa(i)), 0o755)
		os.WriteFile(filepath.Join(ws, "build", strconv.Itoa(i), "o"), nil, 0o644)
	}
	s := &State{Workspace: ws, Started: time.Now(), Deps: map[string]DepFolder{}}
	s.RecordFolders("", nil)
	for i := range 50 {
		s.Deps[filepath.Join(ws, "dep"+strconv.Itoa(i))] = DepFolder{}
		s.Own = append(s.Own, filepath.Join(ws, "own"+strconv.Itoa(i)))
		p := filepath.Join(ws, "build", strconv.Itoa(i), "o")
		if _, err := s.moveAside(p); err != nil {
			t.Fatal(err)
		}
	}
	if res := s.IgnoredChanged(context.Background()); len(res.Files)+len(res.NotChecked) > 0 {
		t.Errorf("taken what the checks moved aside (or not checked): %+v", res)
	}
}

// TestRecordFoldersSaved: the record of the ignored folders at the launch's start is saved
// where RecordFolders is told, and a state loaded by another daemon (Load, then LoadFolders)
// keeps the host's old files in a folder the box added a file to, as the daemon that made the
// record does; without the saved record (none, or not loaded) the folder is taken whole.
func TestRecordFoldersSaved(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	c := exec.Command("git", "init", "-q")
	c.Dir = ws
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("build/\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "build", "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "build", "old.o"), []byte("host\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "build", "sub", "keep.o"), []byte("host\n"), 0o644)
	time.Sleep(20 * time.Millisecond)
	s := &State{Workspace: ws, Started: time.Now()}
	dir := t.TempDir()
	state, record := filepath.Join(dir, "integrity.json"), filepath.Join(dir, "integrity-folders.json")
	if err := s.Save(state); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	s.RecordFolders(record, func(err error) { saved <- err })
	if err := <-saved; err != nil {
		t.Fatalf("the record was not saved: %v", err)
	}
	os.WriteFile(filepath.Join(ws, "build", "new.o"), []byte("box\n"), 0o644)
	load := func(withRecord bool) []string {
		t.Helper()
		l, err := Load(state)
		if err != nil {
			t.Fatal(err)
		}
		if withRecord {
			if err := l.LoadFolders(record); err != nil {
				t.Fatal(err)
			}
		}
		return l.IgnoredChanged(context.Background()).Files
	}
	if got, want := load(true), []string{"build/new.o"}; !slices.Equal(got, want) {
		t.Errorf("taken by a daemon that loaded the record: %v, want %v", got, want)
	}
	if got, want := load(false), []string{"build/new.o", "build/old.o", "build/sub/keep.o"}; !slices.Equal(got, want) {
		t.Errorf("taken by a daemon without the record: %v, want %v (the test would prove nothing)", got, want)
	}
	if err := new(State).LoadFolders(filepath.Join(dir, "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFolders of no record: %v, want one that wraps fs.ErrNotExist", err)
	}
}
