package changes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestStage: only regular files of at most MaxFile bytes reached without a symlink are staged
// (a copy with their content and mode, outside the workspace); a folder, a symlink, a file
// behind a symlinked folder and a larger file stay as they were (bound read-only).
func TestStage(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret"), "secret\n", 0o600)
	mustWrite(t, filepath.Join(ws, ".envrc"), "export A=1\n", 0o640)
	mustWrite(t, filepath.Join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\n", 0o755)
	mustWrite(t, filepath.Join(ws, "big.json"), strings.Repeat("x", MaxFile+1), 0o644)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(outside, "settings.json"), "{}\n", 0o644)
	ps := []plan.Protected{}
	for _, rel := range []string{".envrc", ".git/hooks", ".mcp.json", ".vscode/settings.json", "big.json"} {
		ps = append(ps, plan.Protected{Path: filepath.Join(ws, rel), Beneath: ws})
	}
	dir := filepath.Join(t.TempDir(), "staged")
	got, err := Stage(dir, ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		rel, _ := filepath.Rel(ws, p.Path)
		if rel != ".envrc" {
			if p.Staged != "" {
				t.Errorf("%s staged at %s, want it bound read-only", rel, p.Staged)
			}
			continue
		}
		fi, err := os.Stat(p.Staged)
		if err != nil || fi.Mode().Perm() != 0o640 || !strings.HasPrefix(p.Staged, dir+"/") {
			t.Fatalf("staged copy of .envrc: %s %v %v", p.Staged, fi, err)
		}
		if b, _ := os.ReadFile(p.Staged); string(b) != "export A=1\n" {
			t.Errorf("staged copy holds %q", b)
		}
	}
}

// TestCollectApply: Collect keeps only the staged copies the box changed (content or executable
// bits) as changes that modify the path; Apply replaces the host's file while it still holds
// what the box started from, and refuses (changing nothing) once the host changed it or put a
// symlink there.
func TestCollectApply(t *testing.T) {
	files := map[string]string{".envrc": "export A=1\n", ".mcp.json": "{}\n", ".claude/settings.json": "{\"a\":1}\n", ".gitmodules": "x\n", "hook": "#!/bin/sh\n"}
	ws, dir, store, copyOf := stageFiles(t, files)
	// The box: edits three, leaves .gitmodules alone, makes the hook executable, and leaves
	// one copy unreadable (mode 0).
	mustWrite(t, copyOf[".envrc"], "export A=1\nexport B=2\n", 0o644)
	mustWrite(t, copyOf[".mcp.json"], `{"mcpServers":{}}`+"\n", 0o644)
	mustWrite(t, copyOf[".claude/settings.json"], "{\"a\":2}\n", 0o644)
	os.Chmod(copyOf[".claude/settings.json"], 0)
	os.Chmod(copyOf["hook"], 0o755)
	res, err := Collect(dir, store)
	if err != nil || len(res.Failed) != 0 || len(res.TooLarge) != 0 {
		t.Fatalf("Collect: %+v %v", res, err)
	}
	if kept := res.Kept; strings.Join(kept, " ") != ".claude/settings.json .envrc .mcp.json hook" {
		t.Errorf("kept %q", kept)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staged copies left: %v", err)
	}
	cs, err := List(store)
	if err != nil || len(cs) != 4 {
		t.Fatalf("List: %+v %v", cs, err)
	}
	for _, c := range cs {
		if !c.Modifies || string(c.Base) != files[c.Path] {
			t.Errorf("%s: modifies %v base %q", c.Path, c.Modifies, c.Base)
		}
		if c.Path == "hook" && (!c.ModeChanged || c.Mode&0o111 == 0) {
			t.Errorf("hook's mode change not kept: %+v", c)
		}
	}
	// The host changes .mcp.json meanwhile, and replaces .claude/settings.json by a symlink
	// holding the same text: both refused, both untouched.
	mustWrite(t, filepath.Join(ws, ".mcp.json"), `{"host":1}`+"\n", 0o644)
	mustWrite(t, filepath.Join(t.TempDir(), "x"), "", 0o644)
	os.Remove(filepath.Join(ws, ".claude/settings.json"))
	os.Symlink("elsewhere", filepath.Join(ws, ".claude/settings.json"))
	for _, rel := range []string{".mcp.json", ".claude/settings.json"} {
		if err := Apply(store, ws, rel); !errors.Is(err, ErrConflict) {
			t.Errorf("apply %s over the host's change: %v, want ErrConflict", rel, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".mcp.json")); string(b) != `{"host":1}`+"\n" {
		t.Errorf("the host's .mcp.json became %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(ws, ".claude/settings.json")); l != "elsewhere" {
		t.Errorf("the host's symlink became %q", l)
	}
	// Unchanged on the host: applied, with the host's permission bits and the box's
	// executable ones.
	os.Chmod(filepath.Join(ws, ".envrc"), 0o600)
	for _, rel := range []string{".envrc", "hook"} {
		if err := Apply(store, ws, rel); err != nil {
			t.Fatalf("apply %s: %v", rel, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".envrc")); string(b) != "export A=1\nexport B=2\n" {
		t.Errorf("applied .envrc: %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(ws, ".envrc")); fi.Mode().Perm() != 0o600 {
		t.Errorf("applied .envrc has mode %v, want the host's 0600", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(ws, "hook")); fi.Mode().Perm() != 0o755 {
		t.Errorf("applied hook has mode %v, want 0755", fi.Mode())
	}
	if cs, _ := List(store); len(cs) != 2 {
		t.Errorf("store after applying two: %+v", cs)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 5 {
		t.Errorf("the workspace holds %d entries after apply (a temporary file left?)", len(ents))
	}
}

// TestDiff: a change that creates a path shows every line added; one that modifies a file
// shows hunks with context against what the box started from, and against the host's file,
// marked, once the host changed it.
func TestDiff(t *testing.T) {
	if d := Diff(Change{Path: "a", Kind: KindFile, Content: []byte("x\ny\n")}, nil); d != "--- /dev/null\n+++ b/a\n@@ -0,0 +1,2 @@\n+x\n+y\n" {
		t.Errorf("creation:\n%s", d)
	}
	var base, box strings.Builder
	for i := 1; i <= 20; i++ {
		base.WriteString(string(rune('a'+i)) + "\n")
		if i == 10 {
			box.WriteString("new\n")
			continue
		}
		box.WriteString(string(rune('a'+i)) + "\n")
	}
	box.WriteString("tail\n")
	c := Change{Path: "f", Kind: KindFile, Content: []byte(box.String()), Modifies: true, Base: []byte(base.String())}
	want := "--- a/f\n+++ b/f\n@@ -7,7 +7,7 @@\n h\n i\n j\n-k\n+new\n l\n m\n n\n@@ -18,3 +18,4 @@\n s\n t\n u\n+tail\n"
	if d := Diff(c, []byte(base.String())); d != want {
		t.Errorf("modification:\n%s\nwant:\n%s", d, want)
	}
	if d := Diff(c, []byte("host\n")); !strings.HasPrefix(d, "--- a/f (on the host now)\n+++ b/f (proposed by the box)\n") || !strings.Contains(d, "-host\n") {
		t.Errorf("against the host's change:\n%s", d)
	}
}

// TestStageRefusesHardLinks guards review finding F2: a protected file with another name (a
// hard link, of any size, or one in a protected folder) is refused with ErrHardLinked, naming
// the file and how to break the link; the link broken as the error says, Stage succeeds.
// Before, the file was staged (or bound read-only) and a box wrote the host's file through
// the unprotected name.
func TestStageRefusesHardLinks(t *testing.T) {
	for _, tc := range []struct{ name, protected, linked string }{
		{"File", ".envrc", ".envrc"},
		{"LargeFile", "big.json", "big.json"},
		{"InProtectedFolder", ".git/hooks", ".git/hooks/pre-commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			content := "export A=1\n"
			if tc.name == "LargeFile" {
				content = strings.Repeat("x", MaxFile+1)
			}
			linked := filepath.Join(ws, tc.linked)
			mustWrite(t, linked, content, 0o644)
			if err := os.Link(linked, filepath.Join(ws, "payload")); err != nil {
				t.Fatal(err)
			}
			ps := []plan.Protected{{Path: filepath.Join(ws, tc.protected), Beneath: ws}}
			dir := filepath.Join(t.TempDir(), "staged")
			_, err = Stage(dir, ps)
			if !errors.Is(err, ErrHardLinked) || !strings.Contains(err.Error(), linked+" has 2 names") ||
				!strings.Contains(err.Error(), "cp -p "+linked+" "+linked+".copy && mv "+linked+".copy "+linked) {
				t.Fatalf("Stage of a hard-linked %s: %v, want ErrHardLinked naming it and the fix", tc.linked, err)
			}
			// The fix the error gives, done by the host: the launch may go on.
			if out, err := exec.Command("sh", "-c", "cp -p "+linked+" "+linked+".copy && mv "+linked+".copy "+linked).CombinedOutput(); err != nil {
				t.Fatalf("the error's fix: %v: %s", err, out)
			}
			if _, err := Stage(filepath.Join(t.TempDir(), "staged"), ps); err != nil {
				t.Errorf("Stage after the link was broken: %v", err)
			}
		})
	}
}

// TestCollectEachFileOnItsOwn guards review finding F5 (issue #20): a staged copy that cannot
// be collected (here the store has a folder where the box's .envrc would be kept, as a full
// disk fails the write) does not lose the others: the box's fsmonitor line in .git/config is
// still kept as a proposed change, the failed copy and what the file held at launch are left
// in the staged folder, nothing half of .envrc is kept, and a copy the box made larger than
// MaxFile is reported and not kept.
func TestCollectEachFileOnItsOwn(t *testing.T) {
	files := map[string]string{".envrc": "export X=1\n", ".git/config": "[core]\n\tbare = false\n", ".mcp.json": "{}\n"}
	_, dir, store, copyOf := stageFiles(t, files)
	envrc := "export X=1\nexport Y=2\n"
	mustWrite(t, copyOf[".envrc"], envrc, 0o644)
	mustWrite(t, copyOf[".git/config"], files[".git/config"]+"\tfsmonitor = touch /tmp/pwned\n", 0o644)
	mustWrite(t, copyOf[".mcp.json"], strings.Repeat("x", MaxFile+1), 0o644)
	// The failure: the store holds a non-empty folder where .envrc is to be kept (its only
	// entry a name List skips), so that keeping .envrc fails as a full disk would.
	mustWrite(t, filepath.Join(store, ".envrc", "x"+baseSuffix), "", 0o644)

	res, err := Collect(dir, store)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if len(res.Failed) != 1 || res.Failed[0].Path != ".envrc" || res.Failed[0].Err == nil {
		t.Errorf("failed %+v, want .envrc with its reason", res.Failed)
	}
	if strings.Join(res.Kept, " ") != ".git/config" {
		t.Errorf("kept %q, want .git/config (collected past the failure of .envrc)", res.Kept)
	}
	if strings.Join(res.TooLarge, " ") != ".mcp.json" {
		t.Errorf("too large %q, want .mcp.json", res.TooLarge)
	}
	cs, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != ".git/config" || !strings.Contains(string(cs[0].Content), "fsmonitor") || !cs[0].Modifies {
		t.Errorf("proposed changes %+v, want .git/config with the fsmonitor line only", cs)
	}
	if _, err := os.Lstat(filepath.Join(store, ".envrc"+baseSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("half of .envrc's change kept in the store: %v", err)
	}
	// The failed copy stays, with its base; the others are gone.
	if b, err := os.ReadFile(copyOf[".envrc"]); err != nil || string(b) != envrc {
		t.Errorf("the box's copy of .envrc after the failed collect: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, stageBase, ".envrc")); err != nil || string(b) != files[".envrc"] {
		t.Errorf("what .envrc held at launch after the failed collect: %q %v", b, err)
	}
	for _, rel := range []string{".git/config", ".mcp.json"} {
		if _, err := os.Lstat(copyOf[rel]); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staged copy of %s left after it was collected: %v", rel, err)
		}
	}
	// Once the store can take it, a second Collect keeps what was left and removes the folder.
	if err := os.RemoveAll(filepath.Join(store, ".envrc")); err != nil {
		t.Fatal(err)
	}
	res, err = Collect(dir, store)
	if err != nil || len(res.Failed) != 0 || strings.Join(res.Kept, " ") != ".envrc" {
		t.Fatalf("second Collect: %+v %v", res, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staged folder left after a complete collect: %v", err)
	}
}

// stageFiles writes files (workspace-relative path to content) in a new workspace and stages
// them; it returns the workspace, the staged folder, a store folder and each file's copy.
func stageFiles(t *testing.T, files map[string]string) (ws, dir, store string, copyOf map[string]string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var ps []plan.Protected
	for rel, c := range files {
		mustWrite(t, filepath.Join(ws, rel), c, 0o644)
		ps = append(ps, plan.Protected{Path: filepath.Join(ws, rel), Beneath: ws})
	}
	dir, store = filepath.Join(t.TempDir(), "staged"), filepath.Join(t.TempDir(), "changes")
	staged, err := Stage(dir, ps)
	if err != nil {
		t.Fatal(err)
	}
	copyOf = map[string]string{}
	for _, p := range staged {
		rel, _ := filepath.Rel(ws, p.Path)
		copyOf[rel] = p.Staged
	}
	return ws, dir, store, copyOf
}

// TestCollectCreatedAgain: the host removed a staged file while the box ran, and the box created
// it again (the guard kept that as the change at the path). Collect keeps that change and
// leaves the box's earlier copy where it is, reported, rather than writing over either.
func TestCollectCreatedAgain(t *testing.T) {
	_, dir, store, copyOf := stageFiles(t, map[string]string{".envrc": "export A=1\n"})
	mustWrite(t, copyOf[".envrc"], "export A=2\n", 0o644)
	mustWrite(t, filepath.Join(store, ".envrc"), "created again\n", 0o600)
	res, err := Collect(dir, store)
	if err != nil || len(res.Kept) != 0 || len(res.Failed) != 1 || !errors.Is(res.Failed[0].Err, errCreatedAgain) {
		t.Fatalf("Collect: %+v %v, want .envrc failed as created again", res, err)
	}
	cs, err := List(store)
	if err != nil || len(cs) != 1 || string(cs[0].Content) != "created again\n" || cs[0].Modifies {
		t.Errorf("store: %+v %v, want the created file only", cs, err)
	}
	if b, err := os.ReadFile(copyOf[".envrc"]); err != nil || string(b) != "export A=2\n" {
		t.Errorf("the box's copy: %q %v, want it left", b, err)
	}
}

// TestCollectFull: a copy the box filled to the bound while it ran (box-init marked it) is
// kept as a change marked truncated, listed in Collected.Truncated, shown so and never applied.
func TestCollectFull(t *testing.T) {
	ws, dir, store, copyOf := stageFiles(t, map[string]string{".envrc": "export A=1\n"})
	mustWrite(t, copyOf[".envrc"], strings.Repeat("x", MaxFile), 0o644)
	mustWrite(t, copyOf[".envrc"]+TruncatedSuffix, "", 0o600)
	res, err := Collect(dir, store)
	if err != nil || strings.Join(res.Kept, " ") != ".envrc" || strings.Join(res.Truncated, " ") != ".envrc" {
		t.Fatalf("Collect: %+v %v, want .envrc kept truncated", res, err)
	}
	cs, err := List(store)
	if err != nil || len(cs) != 1 || !cs[0].Truncated || !cs[0].Modifies || len(cs[0].Content) != MaxFile {
		t.Fatalf("store: %v, want .envrc truncated", err)
	}
	if d := Diff(cs[0], []byte("export A=1\n")); len(d) > 2*MaxShown || !strings.Contains(d, "(truncated at 4194304 bytes: cannot be applied") {
		t.Errorf("diff of the truncated change: %d bytes, ending %q", len(d), d[max(0, len(d)-200):])
	}
	if err := Apply(store, ws, ".envrc"); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("apply of the truncated change: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("staged folder left: %v", err)
	}
}
