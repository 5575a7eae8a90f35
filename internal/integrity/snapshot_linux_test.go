package integrity

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceSameBytes replaces path by a new inode with the same content (lock-and-rename).
func replaceSameBytes(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, path+".lock", string(b))
	if err := os.Rename(path+".lock", path); err != nil {
		t.Fatal(err)
	}
}

func oneTransition(t *testing.T, s *State, kind Kind, path, detail string) {
	t.Helper()
	ts := s.VerifyRoots()
	if len(ts) != 1 || ts[0].Kind != kind || ts[0].Path != path || !strings.Contains(ts[0].Detail, detail) {
		t.Fatalf("transitions %+v, want one %s of %s (%q)", ts, kind, path, detail)
	}
	if again := s.VerifyRoots(); len(again) != 0 {
		t.Fatalf("reported twice: %+v", again)
	}
}

// TestTransitions covers each transition kind on file and folder roots, including a
// same-bytes replacement from outside the box.
func TestTransitions(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config")
	hooks := filepath.Join(dir, "hooks")
	absent := filepath.Join(dir, "commondir")
	mustWrite(t, file, "[core]\n")
	mustWrite(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\n")
	s := &State{Workspace: dir}
	s.Roots = Take([]Root{{Path: file, Alert: true}, {Path: hooks, Alert: true}, {Path: absent, Alert: true}}, Limits{})
	if ts := s.VerifyRoots(); len(ts) != 0 {
		t.Fatalf("no change, got %+v", ts)
	}

	t.Run("Modified", func(t *testing.T) {
		mustWrite(t, file, "[core]\n\tfsmonitor = evil\n")
		oneTransition(t, s, Modified, file, "content")
	})
	t.Run("ReplacedSameBytes", func(t *testing.T) {
		replaceSameBytes(t, file)
		oneTransition(t, s, Replaced, file, "equal content")
	})
	t.Run("Chmod", func(t *testing.T) {
		os.Chmod(file, 0o755)
		oneTransition(t, s, Modified, file, "mode")
	})
	t.Run("Removed", func(t *testing.T) {
		os.Remove(file)
		oneTransition(t, s, Removed, file, "file")
	})
	t.Run("Created", func(t *testing.T) {
		mustWrite(t, absent, ".")
		oneTransition(t, s, Created, absent, "file")
	})
	t.Run("FolderChildReplacedSameBytes", func(t *testing.T) {
		replaceSameBytes(t, filepath.Join(hooks, "pre-commit"))
		oneTransition(t, s, Modified, hooks, "~pre-commit")
	})
	t.Run("FolderChildAdded", func(t *testing.T) {
		mustWrite(t, filepath.Join(hooks, "post-checkout"), "evil")
		oneTransition(t, s, Modified, hooks, "+post-checkout")
	})
	t.Run("FolderReplaced", func(t *testing.T) {
		cp := hooks + ".new"
		os.Mkdir(cp, 0o755)
		for _, n := range []string{"pre-commit", "post-checkout"} {
			b, _ := os.ReadFile(filepath.Join(hooks, n))
			mustWrite(t, filepath.Join(cp, n), string(b))
		}
		os.RemoveAll(hooks)
		os.Rename(cp, hooks)
		ts := s.VerifyRoots()
		if len(ts) != 1 || ts[0].Path != hooks || ts[0].Kind != Modified || !strings.Contains(ts[0].Detail, "new inode") {
			t.Fatalf("got %+v", ts)
		}
	})
	t.Run("ReversalIsAnotherTransition", func(t *testing.T) {
		os.Remove(absent)
		oneTransition(t, s, Removed, absent, "")
	})
}

// TestDeepTreeBounded: a folder deeper than the bound is recorded "too-large", iteratively (no
// stack overflow), and a change beneath the bound still registers.
func TestDeepTreeBounded(t *testing.T) {
	root := t.TempDir()
	// 2000 levels: build with *at calls, since the path outgrows PATH_MAX.
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if err := syscall.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := syscall.Openat(fd, "d", syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	syscall.Close(fd)
	mustWrite(t, filepath.Join(root, "top"), "x")
	s := &State{Workspace: root, Limits: Limits{MaxDepth: 64}}
	s.Roots = Take([]Root{{Path: root, Alert: true}}, s.Limits)
	if got := s.Roots[0].Partial; got != PartialTooLarge {
		t.Fatalf("partial %q, want %q", got, PartialTooLarge)
	}
	if n := len(s.Roots[0].Tree); n > 64+1 {
		t.Errorf("%d entries recorded beyond the depth bound", n)
	}
	mustWrite(t, filepath.Join(root, "top"), "y")
	oneTransition(t, s, Modified, root, "~top")
	// The executable-configuration scan is bounded too, and says so: the check at exit
	// reports the folders it did not check as drift, never silently.
	if _, n := ScanExec(root, nil, nil, Limits{ScanDirs: 100}); n != 1 {
		t.Errorf("ScanExec over its bound: %d folders not checked, want 1 (the next level)", n)
	}
	ex := &State{Workspace: root, Limits: Limits{ScanDirs: 100}}
	ts := ex.VerifyExec()
	if len(ts) != 1 || ts[0].Path != root || !ts[0].Alert || !strings.Contains(ts[0].Detail, "scan incomplete: 1 folders not checked") {
		t.Errorf("check at exit over the scan's bound: %+v, want one alert on the workspace saying the scan is incomplete", ts)
	}
}

// TestOverBudget: a folder over the content budget is recorded by structure (names, kinds,
// sizes, identities; no content hashes): a replaced or a new entry still registers.
func TestOverBudget(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 20; i++ {
		mustWrite(t, filepath.Join(root, fmt.Sprintf("f%02d", i)), strings.Repeat("x", 100))
	}
	lim := Limits{MaxBytes: 1000}
	s := &State{Workspace: root, Limits: lim}
	s.Roots = Take([]Root{{Path: root, Alert: true}}, lim)
	if got := s.Roots[0].Partial; got != PartialStructure {
		t.Fatalf("partial %q, want %q", got, PartialStructure)
	}
	for _, e := range s.Roots[0].Tree {
		if e.Hash != "" {
			t.Fatalf("entry %s hashed over budget", e.Rel)
		}
	}
	replaceSameBytes(t, filepath.Join(root, "f03"))
	oneTransition(t, s, Modified, root, "~f03")
	mustWrite(t, filepath.Join(root, "new"), "y")
	oneTransition(t, s, Modified, root, "+new")
}

func TestExecKeys(t *testing.T) {
	cfg := `[core]
	repositoryformatversion = 0
	fsmonitor = "touch /tmp/x"
	pager = less
[Core] fsmonitor = false
[credential "https://example.com"]
	helper = !evil
[filter "lfs"]
	smudge = git-lfs smudge %f
[diff "bin"]
	textconv = hexdump
[include]
	path = ../evil.inc
[includeIf "gitdir:/x/"]
	path = y
[alias]
	st = status
	pwn = !sh -c evil
[remote "origin"]
	url = https://example.com/r.git
`
	keys, err := ExecKeys([]byte(cfg))
	if err != nil {
		t.Errorf("ExecKeys: %v", err)
	}
	got := strings.Join(keys, ",")
	want := "alias.pwn (!),core.fsmonitor,core.pager,credential.https://example.com.helper,diff.bin.textconv,filter.lfs.smudge,include.path,includeif.gitdir:/x/.path"
	if got != want {
		t.Errorf("ExecKeys:\n got %s\nwant %s", got, want)
	}
	if k, _ := ExecKeys([]byte("[core]\n\tbare = false\n[user]\n\tname = x\n")); len(k) != 0 {
		t.Errorf("harmless config flagged: %v", k)
	}
}

// TestResolveGitFile: a .git file pointing outside the workspace is pinned itself but its
// target is never bound (and is reported); one pointing beneath the workspace protects the
// gitdir's configuration.
func TestResolveGitFile(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "config"), "[core]\n")
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	mustWrite(t, filepath.Join(ws, ".git"), "gitdir: "+outside+"\n")
	lay, err := Resolve(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lay.Protected {
		if !within(p.Path, ws) {
			t.Errorf("bound outside the workspace: %s", p.Path)
		}
	}
	if !strings.Contains(strings.Join(lay.Notes, "\n"), "outside the workspace") {
		t.Errorf("notes %q do not report the outside gitdir", lay.Notes)
	}

	ws2, _ := filepath.EvalSymlinks(t.TempDir())
	mustWrite(t, filepath.Join(ws2, "modules/sub/HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(ws2, "modules/sub/config"), "[core]\n")
	mustWrite(t, filepath.Join(ws2, ".git"), "gitdir: modules/sub\n")
	lay, err = Resolve(ws2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pinned []string // bound when present, guarded when absent
	for _, p := range lay.Protected {
		pinned = append(pinned, strings.TrimPrefix(p.Path, ws2))
	}
	for _, g := range lay.Guards {
		pinned = append(pinned, strings.TrimPrefix(g.Path, ws2))
	}
	for _, want := range []string{"/.git", "/modules/sub/config", "/modules/sub/hooks", "/modules/sub/commondir"} {
		if !strings.Contains(strings.Join(pinned, " ")+" ", want+" ") {
			t.Errorf("%s not pinned (pinned: %v)", want, pinned)
		}
	}
}

// TestResolveSymlinkOut: a protected path that is a symlink out of the workspace is never
// bound, and nothing is guarded through it; the link itself is guarded (review 10, F2): the
// symlinks .claude (a folder on the way to .claude/settings.json) and .mcp.json.
func TestResolveSymlinkOut(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "settings.json"), "{}")
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	os.Symlink(outside, filepath.Join(ws, ".claude"))
	os.Symlink(filepath.Join(outside, "settings.json"), filepath.Join(ws, ".mcp.json"))
	lay, err := Resolve(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lay.Protected {
		if !within(p.Path, ws) || strings.Contains(p.Path, ".claude") || strings.HasSuffix(p.Path, ".mcp.json") {
			t.Errorf("bound through a symlink: %s", p.Path)
		}
	}
	links := map[string]string{}
	for _, g := range lay.Guards {
		if g.Link != "" {
			links[g.Path] = g.Link
		} else if strings.Contains(g.Path, ".claude") {
			t.Errorf("guarded through a symlink: %s", g.Path)
		}
	}
	for rel, target := range map[string]string{".claude": outside, ".mcp.json": filepath.Join(outside, "settings.json")} {
		if links[filepath.Join(ws, rel)] != target {
			t.Errorf("the symlink %s is not guarded as a link to %s: %v", rel, target, links)
		}
	}
}
