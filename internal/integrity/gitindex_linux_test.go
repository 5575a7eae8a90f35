package integrity

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIndexHiddenEntriesReported: a box that edits tracked files and flags them skip-worktree
// or assume-unchanged in .git/index hides the edit from the host's git status and git diff
// (review 12, F9). The check clears the flags of each entry newly flagged whose file exists, so
// that the host's git status shows the edits, and reports them, in index versions 3 and 4,
// SHA-1 and SHA-256 repositories; when git's lock index.lock is held (a box's), it names the
// command instead. An entry flagged at launch whose file the launch did not change, or flagged
// while its file is absent (a sparse checkout), is left alone while the box runs
// (TestIndexFlagOnRemovedFileClearedAtExit, TestIndexFlagCarriedReported: the rest).
func TestIndexHiddenEntriesReported(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name, format, version string
		locked                bool
	}{
		{"sha1-v3", "sha1", "2", false}, {"sha256-v4", "sha256", "4", false}, {"sha1-v4-locked", "sha1", "4", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			git := func(args ...string) string { return gitIn(ws, "", false, args...) }
			git("init", "-q", "--object-format="+c.format, ".")
			for _, f := range []string{"Makefile", "notes.txt", "sparse.txt", "old.txt"} {
				mustWrite(t, filepath.Join(ws, f), "all:\n\t@echo reviewed build\n")
			}
			git("add", ".")
			git("commit", "-qm", "init")
			git("update-index", "--index-version", c.version)
			git("update-index", "--skip-worktree", "old.txt") // the user's, before the launch
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box: edits two tracked files and hides them; flags a file it removes.
			mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@id > PWNED; echo built\n")
			mustWrite(t, filepath.Join(ws, "notes.txt"), "changed\n")
			git("update-index", "--skip-worktree", "Makefile")
			git("update-index", "--assume-unchanged", "notes.txt")
			git("update-index", "--skip-worktree", "sparse.txt")
			if err := os.Remove(filepath.Join(ws, "sparse.txt")); err != nil {
				t.Fatal(err)
			}
			if out := git("status", "--porcelain"); out != "" {
				t.Fatalf("the flags do not hide the edits from git status here:\n%s", out)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, ".git/index")); c.version == "4" && b[7] != 4 {
				t.Fatalf("index version %d, want 4", b[7])
			}
			if c.locked {
				mustWrite(t, filepath.Join(ws, ".git/index.lock"), "")
			}

			got := map[string]string{}
			for _, tr := range s.VerifyExec() {
				if !tr.Alert {
					t.Errorf("not an alert: %+v", tr)
				}
				got[strings.TrimPrefix(tr.Path, ws+"/")] = tr.Detail
			}
			for f, flag := range map[string]string{"Makefile": "skip-worktree", "notes.txt": "assume-unchanged"} {
				want := "the flag was cleared"
				if c.locked {
					want = "git update-index --no-" + flag + ` "` + f + `"`
				}
				if !strings.Contains(got[f], flag) || !strings.Contains(got[f], want) {
					t.Errorf("%s: transition %q, want one naming %s and %q", f, got[f], flag, want)
				}
				delete(got, f)
				if c.locked {
					os.Remove(filepath.Join(ws, ".git/index.lock"))
					git("update-index", "--no-"+flag, f) // the command the transition names
				}
			}
			if len(got) != 0 {
				t.Errorf("unexpected transitions (old.txt was flagged at launch, sparse.txt is absent): %v", got)
			}
			if out := git("status", "--porcelain"); !strings.Contains(out, " M Makefile") || !strings.Contains(out, " M notes.txt") {
				t.Errorf("git status does not show the edits:\n%s", out)
			}
			if out := git("ls-files", "-v", "old.txt", "sparse.txt"); out != "S old.txt\nS sparse.txt\n" {
				t.Errorf("flags not the box's were changed: git ls-files -v:\n%s", out)
			}
			if out := git("fsck", "--no-progress"); out != "" {
				t.Errorf("git fsck after the check:\n%s", out)
			}
			if again := s.VerifyExec(); len(again) != 0 {
				t.Errorf("reported again: %+v", again)
			}
			// A sparse entry's file that appears is reported.
			mustWrite(t, filepath.Join(ws, "sparse.txt"), "hidden\n")
			if tr := s.VerifyExec(); len(tr) != 1 || tr[0].Path != filepath.Join(ws, "sparse.txt") {
				t.Errorf("sparse.txt made while flagged: transitions %+v, want one", tr)
			}
		})
	}
}

// TestIndexLockedAtExit guards review 15, F8: git's lock index.lock held at the check at exit
// (a box left it, or a host git commit waits in its editor) kept a box's skip-worktree flag
// for good. The check at exit writes the index beside the lock, leaves the lock, and checks
// again once the lock has gone: a host git that held it renames over the index the one it
// read, with the box's flag, which the second check clears.
func TestIndexLockedAtExit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, s, flagged, lock := lockedFlaggedIndex(t)
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	onMakefile := func(ts []Transition) []Transition {
		var out []Transition
		for _, x := range ts {
			if x.Path == filepath.Join(ws, "Makefile") {
				out = append(out, x)
			}
		}
		return out
	}
	// A check while the box runs leaves the flag and names the fix.
	if tr := onMakefile(s.VerifyExec()); len(tr) != 1 || !tr[0].Alert || !strings.Contains(tr[0].Detail, "could not be cleared") {
		t.Fatalf("transitions on Makefile while the box runs %+v, want an alert naming the fix", tr)
	}
	if s.IndexesLocked() {
		t.Fatal("a check while the box runs wrote the index beside the lock")
	}
	if tr := onMakefile(s.VerifyExec()); len(tr) != 0 {
		t.Fatalf("reported again while the lock is held: %+v", tr)
	}
	tr := onMakefile(s.VerifyExit())
	if len(tr) != 1 || !strings.Contains(tr[0].Detail, "was cleared") || !strings.Contains(tr[0].Detail, "written beside it") {
		t.Fatalf("transitions on Makefile at exit %+v, want one saying the flag was cleared beside the lock", tr)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("the lock was not left as it was: %v", err)
	}
	if out := git("--no-optional-locks", "status", "--porcelain"); out != " M Makefile\n" {
		t.Errorf("git status with the lock held after the check: %q", out)
	}
	if !s.IndexesLocked() {
		t.Fatal("no check pending for the index written beside the lock")
	}
	// A host git held the lock: it renames over the index the one it read, the box's flag in it.
	if err := os.WriteFile(lock, flagged, 0o644); err != nil {
		t.Fatal(err)
	}
	if again := s.RecheckIndexes(); len(again) != 0 || !s.IndexesLocked() {
		t.Errorf("checked again with the lock held: %+v", again)
	}
	if err := os.Rename(lock, filepath.Join(ws, ".git/index")); err != nil {
		t.Fatal(err)
	}
	if out := git("--no-optional-locks", "status", "--porcelain"); out != "" {
		t.Fatalf("the index put back does not hide the edit here: %q", out)
	}
	again := s.RecheckIndexes()
	if len(again) != 1 || again[0].Path != filepath.Join(ws, "Makefile") || !strings.Contains(again[0].Detail, "the flag was cleared") {
		t.Errorf("check after the lock went: %+v, want the flag cleared again", again)
	}
	if s.IndexesLocked() {
		t.Error("a check still pending after the lock went")
	}
	if out := git("status", "--porcelain"); out != " M Makefile\n" {
		t.Errorf("git status after the lock went: %q", out)
	}
	if names, _ := filepath.Glob(filepath.Join(ws, ".git/index.agentbox-*")); len(names) != 0 {
		t.Errorf("files left beside the index: %v", names)
	}
}

// TestIndexHiddenBadIndex: an index that cannot be parsed is reported once, naming the file.
func TestIndexHiddenBadIndex(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	mustWrite(t, filepath.Join(ws, ".git/index"), "DIRC\x00\x00\x00\x02\x00\x00\x00\x01garbage-garbage-garbage-garbage")
	s := &State{Workspace: ws}
	tr, _ := s.verifyIndexes(nil, false)
	if len(tr) != 1 || !tr[0].Alert || tr[0].Path != filepath.Join(ws, ".git/index") || !strings.Contains(tr[0].Detail, "truncated") {
		t.Fatalf("transitions %+v, want one alert on .git/index saying it is truncated", tr)
	}
	if again, _ := s.verifyIndexes(nil, false); len(again) != 0 {
		t.Errorf("reported again: %+v", again)
	}
}

// TestSplitIndexAsGit guards review 15, F2: a split index (git update-index --split-index) kept
// most entries, and a box's flags, in a sharedindex file the check did not read (it reported
// the index as not checked, and the flag stayed). The check reads it as git merges it: its
// entries, their flags and ids are what the host's git ls-files -s -v lists, in SHA-1 and
// SHA-256 repositories, index versions 2 and 4, after replacements, additions, removals and
// flags on shared entries; the index it writes is unsplit and lists the same.
func TestSplitIndexAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t.Parallel()
	for _, c := range []struct{ format, version string }{{"sha1", "2"}, {"sha256", "4"}, {"sha1", "3"}} {
		t.Run(c.format+"-v"+c.version, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			git := func(args ...string) string { return gitIn(ws, "", false, args...) }
			git("init", "-q", "--object-format="+c.format, ".")
			for i := range 40 {
				mustWrite(t, filepath.Join(ws, fmt.Sprintf("d%d/f%02d.txt", i%3, i)), fmt.Sprint(i, "\n"))
			}
			git("add", ".")
			git("commit", "-qm", "init")
			git("update-index", "--index-version", c.version)
			git("update-index", "--split-index")
			mustWrite(t, filepath.Join(ws, "d1/f01.txt"), "changed\n")
			git("add", "d1/f01.txt")
			mustWrite(t, filepath.Join(ws, "d0/new.txt"), "new\n")
			mustWrite(t, filepath.Join(ws, "zz.txt"), "new\n")
			git("add", "d0/new.txt", "zz.txt")
			git("rm", "-q", "--cached", "d2/f05.txt")
			git("update-index", "--skip-worktree", "d0/f03.txt")
			git("update-index", "--assume-unchanged", "d1/f04.txt")
			mustWrite(t, filepath.Join(ws, "d2/f08.txt"), "changed\n")
			git("update-index", "--skip-worktree", "d2/f08.txt")
			index := filepath.Join(ws, ".git/index")
			hashLen := repoIDLen(ws, filepath.Dir(index))
			list := func() string {
				_, _, es, exts, err := readIndex(ws, index, hashLen)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				for _, e := range es {
					tag := "H"
					switch e.hidden().flag {
					case hiddenSkipWorktree:
						tag = "S"
					case hiddenAssumeUnchanged:
						tag = "h"
					}
					fmt.Fprintf(&b, "%s %06o %x %d\t%s\n", tag, e.mode, e.oid, e.flags&ceStageMask>>12, e.name)
				}
				for _, x := range exts {
					fmt.Fprintf(&b, "ext %s\n", x.sig)
				}
				return b.String()
			}
			want := git("ls-files", "-s", "-v")
			got := list()
			if !strings.Contains(got, "ext link\n") {
				t.Fatalf("the index is not split here:\n%s", got)
			}
			if entries := got[:strings.Index(got, "ext ")]; entries != want {
				t.Errorf("the check reads:\n%s\ngit ls-files -s -v lists:\n%s", entries, want)
			}
			if _, err := editIndex(ws, index, indexEdit{strip: true}, false); err != nil {
				t.Fatal(err)
			}
			if got := list(); got != want {
				t.Errorf("the index the check wrote reads:\n%s\nwant (unsplit):\n%s", got, want)
			}
			if after := git("ls-files", "-s", "-v"); after != want {
				t.Errorf("git ls-files -s -v after the check wrote the index:\n%s\nbefore:\n%s", after, want)
			}
			if out := git("fsck", "--no-progress"); out != "" {
				t.Errorf("git fsck: %s", out)
			}
		})
	}
}

// TestIndexForgedStatReported guards review 12, F9's flagless variant: a box that edits a
// tracked file and then writes the file's new stat data into the index entry (whose object id
// stays the reviewed one) has the host's git take the file for unchanged: git status, git diff
// and commit -a skip it while make reads the box's file. The check clears such an entry's stat
// data under git's lock, so that the host's git compares the file's content again and shows
// the edit, in the workspace's index (SHA-1 and SHA-256, versions 2 and 4) and in the index of
// a nested repository added as a gitlink (git status at the top enters it); when index.lock is
// held it names the fix instead. Edits git shows anyway, and an edit the box staged, are not
// reported.
func TestIndexForgedStatReported(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name, format, version string
		locked                bool
	}{
		{"sha1-v2", "sha1", "2", false}, {"sha256-v4", "sha256", "4", false}, {"sha1-locked", "sha1", "2", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each variant its own repositories
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			sub := filepath.Join(ws, "sub")
			git := func(dir string, args ...string) string { return gitIn(dir, "", false, args...) }
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{sub, ws} {
				git(d, "init", "-q", "--object-format="+c.format, d)
				for _, f := range []string{"Makefile", "shown.txt", "staged.txt", "notes.txt"} {
					mustWrite(t, filepath.Join(d, f), "all:\n\t@echo reviewed build\n")
				}
				if d == ws { // stored with LF, checked out with CRLF
					mustWrite(t, filepath.Join(d, ".gitattributes"), "conv.txt text eol=crlf\n")
					mustWrite(t, filepath.Join(d, "conv.txt"), "converted\n")
				}
				git(d, "add", ".") // at the top, sub becomes a gitlink
				git(d, "commit", "-qm", "init")
				git(d, "update-index", "--index-version", c.version)
			}
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box: the same-sized edit of Makefile, its mtime set back an hour (so that git
			// does not take the entry for racily clean), the entry given the file's new stat data;
			// in both repositories. At the top, shown.txt is edited plainly, staged.txt edited and
			// staged.
			for _, d := range []string{ws, sub} {
				forgeMakefile(t, d, filepath.Join(d, ".git/index"))
				if d == ws { // what git's checkout of conv.txt writes, not an attack
					old := time.Now().Add(-time.Hour)
					conv := filepath.Join(d, "conv.txt")
					mustWrite(t, conv, "converted\r\n")
					if err := os.Chtimes(conv, old, old); err != nil {
						t.Fatal(err)
					}
					forgeIndexStat(t, filepath.Join(d, ".git/index"), "conv.txt", conv)
				}
				if d == sub { // and a flag in the nested repository's index
					mustWrite(t, filepath.Join(d, "notes.txt"), "changed\n")
					git(d, "update-index", "--assume-unchanged", "notes.txt")
					continue
				}
				mustWrite(t, filepath.Join(d, "shown.txt"), "edited\n")
				mustWrite(t, filepath.Join(d, "staged.txt"), "staged\n")
				git(d, "add", "staged.txt")
			}
			if out := git(ws, "status", "--porcelain", "--ignore-submodules=none"); strings.Contains(out, "Makefile") || strings.Contains(out, " sub") {
				t.Fatalf("the forged stat data does not hide the edits from git status here:\n%s", out)
			}
			if out := git(sub, "diff", "--name-only"); out != "" {
				t.Fatalf("git diff in sub before the check: %q, want nothing", out)
			}
			if c.locked {
				mustWrite(t, filepath.Join(ws, ".git/index.lock"), "")
				mustWrite(t, filepath.Join(sub, ".git/index.lock"), "")
			}

			got := map[string]string{}
			for _, tr := range s.VerifyExec() {
				if !tr.Alert {
					t.Errorf("not an alert: %+v", tr)
				}
				got[strings.TrimPrefix(tr.Path, ws+"/")] = tr.Detail
			}
			for _, f := range []string{"Makefile", "sub/Makefile"} {
				want := "the entry's stat data was cleared"
				if c.locked {
					want = `run touch "` + filepath.Join(ws, f) + `"`
				}
				if !strings.Contains(got[f], "claimed it unchanged") || !strings.Contains(got[f], want) {
					t.Errorf("%s: transition %q, want one saying the index claimed it unchanged and %q", f, got[f], want)
				}
				delete(got, f)
				if f == "sub/Makefile" {
					if d := got["sub/notes.txt"]; !strings.Contains(d, "assume-unchanged") || !c.locked && !strings.Contains(d, "the flag was cleared") {
						t.Errorf("sub/notes.txt: transition %q, want one naming assume-unchanged", d)
					}
					delete(got, "sub/notes.txt")
				}
				if c.locked {
					os.Remove(filepath.Join(ws, filepath.Dir(f), ".git/index.lock"))
					if f == "Makefile" {
						continue // the next check clears it, quietly
					}
					if out, err := exec.Command("touch", filepath.Join(ws, f)).CombinedOutput(); err != nil { // the command named
						t.Fatalf("touch: %v\n%s", err, out)
					}
					if f == "sub/Makefile" {
						git(sub, "update-index", "--no-assume-unchanged", "notes.txt")
					}
				}
			}
			if len(got) != 0 {
				t.Errorf("unexpected transitions (shown.txt and staged.txt hide nothing, conv.txt is a checkout's CRLF): %v", got)
			}
			if c.locked {
				if tr := s.VerifyExec(); len(tr) != 0 {
					t.Errorf("the lock released, the check after it: transitions %+v, want none (Makefile reported already)", tr)
				}
			}
			if out := git(ws, "status", "--porcelain"); !strings.Contains(out, " M Makefile") || !strings.Contains(out, " M sub") || strings.Contains(out, "conv.txt") {
				t.Errorf("git status at the top does not show the edits:\n%s", out)
			}
			if out := git(sub, "diff", "--name-only"); out != "Makefile\nnotes.txt\n" {
				t.Errorf("git diff in sub after the check: %q, want Makefile and notes.txt", out)
			}
			fsckAndQuiet(t, s, ws, sub)
		})
	}
}

// fsckAndQuiet checks, after the check that fixed the indexes, that the host's git fsck finds
// nothing wrong in each of dirs and that the next check reports nothing again.
func fsckAndQuiet(t *testing.T, s *State, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if out := gitIn(d, "", false, "fsck", "--no-progress"); out != "" {
			t.Errorf("git fsck in %s after the check:\n%s", d, out)
		}
	}
	if again := s.VerifyExec(); len(again) != 0 {
		t.Errorf("reported again: %+v", again)
	}
}

// forgeMakefile does what the box does in the work tree dir whose index is at index: a
// same-sized edit of the tracked Makefile, its mtime set back an hour (so that git does not
// take the entry for racily clean), and the entry given the file's new stat data.
func forgeMakefile(t *testing.T, dir, index string) {
	t.Helper()
	mk := filepath.Join(dir, "Makefile")
	mustWrite(t, mk, "all:\n\t@id > PWNED; echo buil\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(mk, old, old); err != nil {
		t.Fatal(err)
	}
	forgeIndexStat(t, index, "Makefile", mk)
}

// forgeIndexStat does what the box does: it writes the stat data of file into the entry name
// of the index at path (its object id unchanged) and recomputes the index's checksum.
func forgeIndexStat(t *testing.T, path, name, file string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hashLen := sha1.Size // the test's repositories: the checksum's length is theirs
	if sumIs(b, sha256.Size, sha256Sum) {
		hashLen = sha256.Size
	}
	es, err := indexEntries(b, hashLen)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(file, &st); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.name != name {
			continue
		}
		for i, v := range []uint32{uint32(st.Ctim.Sec), uint32(st.Ctim.Nsec), uint32(st.Mtim.Sec), uint32(st.Mtim.Nsec),
			uint32(st.Dev), uint32(st.Ino), st.Mode, st.Uid, st.Gid, uint32(st.Size)} {
			binary.BigEndian.PutUint32(b[e.off+4*i:], v)
		}
		sum := sha1Sum
		if hashLen == sha256.Size {
			sum = sha256Sum
		}
		copy(b[len(b)-hashLen:], sum(b[:len(b)-hashLen]))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s has no entry %s", path, name)
}

// TestIndexForgedStatLinkedWorktree guards review 13, F1 in linked worktrees: a worktree
// added with git worktree add inside the workspace (wt, of the workspace's repository; subwt,
// of a nested repository added as a gitlink) has its index in the common dir
// (GITDIR/worktrees/<id>/index), which the box writes. A box that edits a tracked Makefile
// there and writes the file's new stat data into that index's entry, or flags a changed file
// skip-worktree, hides its edits from the host's git status and commit -a in that worktree.
// The check reads the indexes of the linked worktrees whose work trees lie in the workspace,
// and clears the stat data and the flag as in the top index: the host's git then shows the
// edits.
func TestIndexForgedStatLinkedWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct{ name, format, version string }{{"sha1-v2", "sha1", "2"}, {"sha256-v4", "sha256", "4"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each variant its own repositories
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			sub := filepath.Join(ws, "sub")
			git := func(dir string, args ...string) string { return gitIn(dir, "", false, args...) }
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{sub, ws} {
				git(d, "init", "-q", "--object-format="+c.format, "-b", "main", d)
				for _, f := range []string{"Makefile", "notes.txt"} {
					mustWrite(t, filepath.Join(d, f), "all:\n\t@echo reviewed build\n")
				}
				git(d, "add", ".") // at the top, sub becomes a gitlink
				git(d, "commit", "-qm", "init")
			}
			// The host's linked worktrees, in the workspace.
			wt, subwt := filepath.Join(ws, "wt"), filepath.Join(ws, "subwt")
			git(ws, "worktree", "add", "-q", "-b", "wt", wt)
			git(sub, "worktree", "add", "-q", "-b", "wt", subwt)
			for _, d := range []string{wt, subwt} {
				git(d, "update-index", "--index-version", c.version)
			}
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box, in both worktrees: the same-sized edit of Makefile, its mtime set back an
			// hour, the entry given the file's new stat data; in wt, an edit of notes.txt hidden
			// by the skip-worktree flag.
			for _, d := range []string{wt, subwt} {
				index := strings.TrimSpace(git(d, "rev-parse", "--path-format=absolute", "--git-path", "index"))
				if !strings.Contains(index, "/worktrees/") || !within(index, ws) {
					t.Fatalf("the index of %s is %s, not a linked worktree's in the workspace", d, index)
				}
				forgeMakefile(t, d, index)
			}
			mustWrite(t, filepath.Join(wt, "notes.txt"), "changed\n")
			git(wt, "update-index", "--skip-worktree", "notes.txt")
			for _, d := range []string{wt, subwt} {
				if out := git(d, "status", "--porcelain"); out != "" {
					t.Fatalf("the forged index does not hide the edits from git status in %s here:\n%s", d, out)
				}
			}

			got := map[string]string{}
			for _, tr := range s.VerifyExec() {
				if !tr.Alert {
					t.Errorf("not an alert: %+v", tr)
				}
				got[strings.TrimPrefix(tr.Path, ws+"/")] = tr.Detail
			}
			for f, want := range map[string]string{
				"wt/Makefile":    "claimed it unchanged",
				"subwt/Makefile": "claimed it unchanged",
				"wt/notes.txt":   "flagged it skip-worktree",
			} {
				if !strings.Contains(got[f], want) || !strings.Contains(got[f], "was cleared") {
					t.Errorf("%s: transition %q, want one saying %q and that it was cleared", f, got[f], want)
				}
				delete(got, f)
			}
			if len(got) != 0 {
				t.Errorf("unexpected transitions: %v", got)
			}
			if out := git(wt, "status", "--porcelain"); out != " M Makefile\n M notes.txt\n" {
				t.Errorf("git status in wt after the check: %q, want Makefile and notes.txt modified", out)
			}
			if out := git(subwt, "status", "--porcelain"); out != " M Makefile\n" {
				t.Errorf("git status in subwt after the check: %q, want Makefile modified", out)
			}
			fsckAndQuiet(t, s, wt, subwt)
		})
	}
}

// TestIndexExtensionsParsed: the check walks the index's extensions as git's sequential reader
// does. One it does not know that git requires (a lower-case first letter), or one that runs
// past the index's end, makes the index one it could not check (naming the extension); an
// optional one (upper case), which git ignores, is removed with the others the check does not
// model, and git reads the index it writes.
func TestIndexExtensionsParsed(t *testing.T) {
	needGitIndex := func(t *testing.T) (string, []byte) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("no git")
		}
		ws, _ := filepath.EvalSymlinks(t.TempDir())
		gitIn(ws, "", false, "init", "-q", ".")
		mustWrite(t, filepath.Join(ws, "a/b.txt"), "b\n")
		gitIn(ws, "", false, "add", ".")
		gitIn(ws, "", false, "commit", "-qm", "init") // writes a cache tree (TREE)
		b, err := os.ReadFile(filepath.Join(ws, ".git/index"))
		if err != nil {
			t.Fatal(err)
		}
		return ws, b
	}
	withExt := func(b []byte, sig string, size uint32, payload string) []byte {
		body := append(bytes.Clone(b[:len(b)-20]), sig...)
		body = binary.BigEndian.AppendUint32(body, size)
		body = append(body, payload...)
		s := sha1.Sum(body)
		return append(body, s[:]...)
	}
	for _, c := range []struct {
		name, sig string
		size      uint32
		want      string
	}{
		{"required-unknown", "abcd", 0, `"abcd" extension, which this check does not know`},
		{"past-the-end", "ZZZZ", 1000, `"ZZZZ" extension runs past its end`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, b := needGitIndex(t)
			if _, _, err := indexContents(withExt(b, c.sig, c.size, ""), sha1.Size); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
	t.Run("optional-removed", func(t *testing.T) {
		ws, b := needGitIndex(t)
		nb := withExt(b, "ZZZZ", 3, "xyz")
		mustWrite(t, filepath.Join(ws, ".git/index"), string(nb))
		done, err := editIndex(ws, filepath.Join(ws, ".git/index"), indexEdit{strip: true}, false)
		if err != nil || strings.Join(done.stripped, " ") != "TREE ZZZZ" {
			t.Fatalf("stripped %q, %v; want TREE and ZZZZ", done.stripped, err)
		}
		after, _ := os.ReadFile(filepath.Join(ws, ".git/index"))
		if _, exts, err := indexContents(after, sha1.Size); err != nil || len(exts) != 0 {
			t.Errorf("the index written: extensions %+v, %v", exts, err)
		}
		if out := gitIn(ws, "", false, "status", "--porcelain"); out != "" {
			t.Errorf("git status after the check: %q", out)
		}
		fsckAndQuiet(t, &State{Workspace: ws}, ws)
	})
}

// testdataDir is the package's testdata folder, found before any test changes directory.
var testdataDir, _ = filepath.Abs("testdata")

// TestIndexTrailerDoesNotChooseIDLength: the check reads an index with the object id length of
// its repository, as git does, not the one its trailing checksum suggests (git does not verify
// the checksum when it reads an index). A box rewrote a SHA-1 repository's index, forged stat
// data of an edited Makefile and all, to end in a SHA-256 of itself (testdata/index_polyglot.py,
// from review 14's F13): read as 32-byte ids, its bytes gave the check decoy entries while git
// read the real ones, and the forged entry went unreported.
func TestIndexTrailerDoesNotChooseIDLength(t *testing.T) {
	for _, tool := range []string{"git", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("no " + tool)
		}
	}
	t.Parallel()
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ws)
	for f, c := range map[string]string{"Makefile": "all:\n\t@echo reviewed build\n", "a.txt": "aaa\n", "b.txt": "bbb\n", "src/main.c": "int main(){}\n"} {
		mustWrite(t, filepath.Join(ws, f), c)
	}
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})
	index := filepath.Join(ws, ".git/index")
	forgeMakefile(t, ws, index)
	poly := filepath.Join(testdataDir, "index_polyglot.py")
	if out, err := exec.Command("python3", poly, index).CombinedOutput(); err != nil {
		t.Fatalf("index_polyglot.py: %v\n%s", err, out)
	}
	// --no-optional-locks: git status would otherwise write the index anew, as SHA-1's.
	if out := git("--no-optional-locks", "status", "--porcelain"); out != "" {
		t.Fatalf("git status before the check: %q, want nothing (the forgery hides the edit from git)", out)
	}
	var found bool
	for _, tr := range s.VerifyExec() {
		if tr.Path == filepath.Join(ws, "Makefile") && strings.Contains(tr.Detail, "claimed it unchanged") {
			found = true
		}
	}
	if !found {
		t.Errorf("the forged entry of Makefile was not reported")
	}
	if out := git("status", "--porcelain"); !strings.Contains(out, " M Makefile") {
		t.Errorf("git status after the check: %q, want Makefile modified", out)
	}
}

// lockedFlaggedIndex makes a repository with a committed Makefile, snapshots it, then does
// what a box does: edits the Makefile, flags it skip-worktree and leaves git's lock index.lock.
// It returns the workspace, the state, the flagged index's bytes and the lock's path.
func lockedFlaggedIndex(t *testing.T) (string, *State, []byte, string) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed\n")
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo BOXCODE\n")
	git("update-index", "--skip-worktree", "Makefile")
	flagged, err := os.ReadFile(filepath.Join(ws, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(ws, ".git/index.lock")
	mustWrite(t, lock, "")
	return ws, s, flagged, lock
}

// TestSettleIndexesAfterLock: what the daemon runs after the check at exit (review 15, F8):
// once the lock of an index written beside it goes, the index is checked again, and the flag a
// host git put back with the index it held is cleared and reported as the check at exit's.
func TestSettleIndexesAfterLock(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, s, flagged, lock := lockedFlaggedIndex(t)
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	got := make(chan Transition, 16)
	w := &Watcher{State: s, OnTransition: func(src Source, tr Transition) {
		if src == SourceExit && tr.Path == filepath.Join(ws, "Makefile") {
			got <- tr
		}
	}}
	w.Verify(SourceExit, true)
	<-got // the check at exit's
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-done }()
	go func() { defer close(done); w.SettleIndexes(ctx) }()
	if err := os.WriteFile(lock, flagged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(lock, filepath.Join(ws, ".git/index")); err != nil {
		t.Fatal(err)
	}
	select {
	case tr := <-got:
		if !tr.Alert || !strings.Contains(tr.Detail, "the flag was cleared") {
			t.Errorf("transition %+v, want an alert saying the flag was cleared", tr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the index was not checked again once its lock went")
	}
	<-done // nothing left to wait for: it returns
	if out := git("status", "--porcelain"); out != " M Makefile\n" {
		t.Errorf("git status after the lock went: %q", out)
	}
}

// sumIs reports whether want is the checksum of what precedes it in b under h.
func sumIs(b []byte, n int, sum func([]byte) []byte) bool {
	return len(b) >= 12+n && bytes.Equal(sum(b[:len(b)-n]), b[len(b)-n:])
}

func sha1Sum(b []byte) []byte   { s := sha1.Sum(b); return s[:] }
func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// TestIndexEntriesPastBound: an index whose entries pass maxIndexBytes (here one entry with a
// 257 MiB path) cannot be checked; one written while the box ran is moved aside, so that git
// reads no flag or stat data no one checked (review 15, F15), and the alert names git reset.
func TestIndexEntriesPastBound(t *testing.T) {
	ws := newWS(t)
	s := Snapshot(resolveWS(t, ws), Limits{})
	index := filepath.Join(ws, ".git/index")
	f, err := os.Create(index)
	if err != nil {
		t.Fatal(err)
	}
	entry := make([]byte, 12+62)
	copy(entry, "DIRC\x00\x00\x00\x02\x00\x00\x00\x01")
	binary.BigEndian.PutUint32(entry[12+24:], 0o100644)
	binary.BigEndian.PutUint16(entry[12+60:], 0x0fff)
	f.Write(entry)
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for range 257 {
		f.Write(chunk)
	}
	f.Write(make([]byte, 8+20))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var on []Transition
	for _, tr := range s.VerifyExec() {
		if tr.Path == index {
			on = append(on, tr)
		}
	}
	if len(on) != 1 || !on[0].Alert || !strings.Contains(on[0].Detail, "moved aside to") || !strings.Contains(on[0].Detail, "git reset") {
		t.Fatalf("transitions on the index %+v, want one alert saying it was moved aside", on)
	}
	if _, err := os.Lstat(index); !os.IsNotExist(err) {
		t.Errorf("the index is still there: %v", err)
	}
	if _, err := os.Lstat(index + QuarantineSuffix + "1"); err != nil {
		t.Errorf("the index moved aside: %v", err)
	}
}

// TestSplitIndexSharedOutside: a split index whose shared index the check cannot read (here a
// symlink leading out of the workspace, which git follows) is moved aside when the launch wrote
// it, as git would read entries no one checked (review 15, F2).
func TestSplitIndexSharedOutside(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	t.Parallel()
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n")
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})
	git("update-index", "--split-index")
	shared, _ := filepath.Glob(filepath.Join(ws, ".git/sharedindex.*"))
	if len(shared) != 1 {
		t.Fatalf("shared indexes %v, want one", shared)
	}
	outside := filepath.Join(t.TempDir(), "shared")
	if err := os.Rename(shared[0], outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, shared[0]); err != nil {
		t.Fatal(err)
	}
	if out := git("ls-files"); out != "Makefile\n" {
		t.Fatalf("git does not read the shared index through the link here: %q", out)
	}
	index := filepath.Join(ws, ".git/index")
	var on []Transition
	for _, tr := range s.VerifyExec() {
		if tr.Path == index {
			on = append(on, tr)
		}
	}
	if len(on) != 1 || !on[0].Alert || !strings.Contains(on[0].Detail, "moved aside to") {
		t.Fatalf("transitions on the index %+v, want one alert saying it was moved aside", on)
	}
	if _, err := os.Lstat(index); !os.IsNotExist(err) {
		t.Errorf("the index is still there: %v", err)
	}
}

// TestResolveLinkedWorktreeObjectFormat: the resolver reads the gitlinks of the workspace's
// index with the repository's object format, which a linked worktree's gitdir takes from its
// common dir's config (it has none of its own). The workspace is a linked worktree of a
// SHA-256 repository whose common dir lies in it (.main/.git), with an uninitialised gitlink
// lib: lib/.git must be guarded (a pointer a box writes there is moved into its proposed
// changes as it appears; review 13, F9). Before, the resolver read the worktree's gitdir's
// config, found none, read the index as SHA-1's, and only noted that it could not.
func TestResolveLinkedWorktreeObjectFormat(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	tmp, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(dir string, args ...string) string { return gitIn(dir, "", false, args...) }
	main, ws := filepath.Join(tmp, "main"), filepath.Join(tmp, "ws")
	git(tmp, "init", "-q", "--object-format=sha256", "-b", "main", main)
	git(tmp, "init", "-q", "--object-format=sha256", "-b", "main", filepath.Join(main, "lib"))
	mustWrite(t, filepath.Join(main, "lib/f"), "x\n")
	git(filepath.Join(main, "lib"), "add", "f")
	git(filepath.Join(main, "lib"), "commit", "-qm", "lib")
	git(main, "add", "lib")
	git(main, "commit", "-qm", "top")
	git(main, "worktree", "add", "-q", "-b", "w", ws)
	// The common dir moved into the workspace, the worktree's .git following it.
	if err := os.Rename(main, filepath.Join(ws, ".main")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, ".git"), "gitdir: "+filepath.Join(ws, ".main/.git/worktrees/ws")+"\n")
	if out := git(ws, "ls-files", "-s", "lib"); !strings.HasPrefix(out, "160000 ") {
		t.Fatalf("lib is not a gitlink of the worktree's index: %q", out)
	}
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "lib/.git")
	for _, n := range lay.Notes {
		if strings.Contains(n, "index") {
			t.Errorf("note: %s", n)
		}
	}
}

// TestIndexSameSecondEntry: an entry of the index's own second whose file the launch changed,
// same size. Its mtime's nanoseconds differ from the file's (an agent's ordinary edit after git
// add, within a second): git compares the content (Debian's git, built without USE_NSEC, takes
// the entry for racily clean) or the nanoseconds, and shows the change, so the check leaves it
// (it reported each such edit of an agent's git loop, and took git's lock to clear it:
// TestBoxGitNeverMeetsTheCheckLock). Forged to the file's nanoseconds, or with
// core.checkStat=minimal in the repository's configuration, it can pass for unchanged (a git
// built with USE_NSEC): reported.
func TestIndexSameSecondEntry(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name        string
		forged      bool
		minimal     bool
		wantAlerted bool
		indexAt     time.Duration // when in the second the index was written (0: at .5)
	}{
		{"ordinary-edit", false, false, false, 0},
		{"forged-nanoseconds", true, false, true, 0},
		{"checkstat-minimal", false, true, true, 0},
		// The file rewritten within the clock tick of its staging, and the index written in
		// that tick: the entry's nanoseconds are the file's, and the index is not newer than
		// them, so every git takes the entry for racily clean and compares the content.
		{"same-tick", true, false, false, 200 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			git := func(args ...string) string { return gitIn(ws, "", false, args...) }
			git("init", "-q", ws)
			if c.minimal {
				git("config", "core.checkStat", "minimal")
			}
			f, index := filepath.Join(ws, "loop.txt"), filepath.Join(ws, ".git/index")
			mustWrite(t, f, "12\n")
			git("add", ".")
			git("commit", "-qm", "init")
			s := Snapshot(resolveWS(t, ws), Limits{})
			sec := time.Now().Add(-time.Hour).Truncate(time.Second)
			// staged at .1 of the second, the file edited at .2, the index written at .5
			if err := os.Chtimes(f, sec.Add(100*time.Millisecond), sec.Add(100*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			forgeIndexStat(t, index, "loop.txt", f)
			mustWrite(t, f, "13\n")
			at := sec.Add(200 * time.Millisecond)
			if err := os.Chtimes(f, at, at); err != nil {
				t.Fatal(err)
			}
			if c.forged {
				forgeIndexStat(t, index, "loop.txt", f)
			}
			ixAt := sec.Add(500 * time.Millisecond)
			if c.indexAt != 0 {
				ixAt = sec.Add(c.indexAt)
			}
			if err := os.Chtimes(index, ixAt, ixAt); err != nil {
				t.Fatal(err)
			}
			alerted := false
			for _, tr := range s.VerifyExec() {
				if tr.Path == f && strings.Contains(tr.Detail, "claimed it unchanged") {
					alerted = true
				} else {
					t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
				}
			}
			if alerted != c.wantAlerted {
				t.Errorf("reported: %v, want %v", alerted, c.wantAlerted)
			}
			if out := git("status", "--porcelain"); out != " M loop.txt\n" {
				t.Errorf("git status after the check: %q, want loop.txt modified", out)
			}
			if _, err := os.Stat(index + ".lock"); err == nil {
				t.Error("the check left index.lock")
			}
		})
	}
}

// TestIndexRewrittenAfterRead: the entries are judged by the time of the index they were read
// from. A box's edit-add-commit loop writes a new index between the check's read and its look
// at the files; that index's later second (the time git compares the files with) made the read
// entry of a file edited in the same second as its staging look trusted, and the check took it
// for forged, alerted, and took git's lock to clear it while the box's git worked
// (TestBoxGitNeverMeetsTheCheckLock failed so in CI, as the ordinary user: "fails=4").
func TestIndexRewrittenAfterRead(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ws)
	f, index := filepath.Join(ws, "loop.txt"), filepath.Join(ws, ".git/index")
	mustWrite(t, f, "12\n")
	git("add", ".")
	git("commit", "-qm", "init")
	// A second back: the kernel stamps ctime from its coarse clock, which can lag time.Now()
	// by a tick, and the edit below must count as the launch's.
	since := time.Now().Add(-time.Second).UnixNano()
	sec := time.Now().Add(-time.Hour).Truncate(time.Second)
	// staged at .1 of the second, the index written at .5, the file edited at .2 (its edit
	// comes before the next git add: in the same second, git compares the content)
	if err := os.Chtimes(f, sec.Add(100*time.Millisecond), sec.Add(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	forgeIndexStat(t, index, "loop.txt", f)
	if err := os.Chtimes(index, sec.Add(500*time.Millisecond), sec.Add(500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ix := &gitIndex{path: index, top: ws, hashLen: 20}
	var err error
	if ix.b, ix.mtime, ix.entries, ix.exts, err = readIndex(ws, index, 20); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "13\n")
	at := sec.Add(200 * time.Millisecond)
	if err := os.Chtimes(f, at, at); err != nil {
		t.Fatal(err)
	}
	// The box's git writes the next index, a second later.
	if err := os.Chtimes(index, sec.Add(1500*time.Millisecond), sec.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got := staleEntries(ws, ix, since, nil); len(got) != 0 {
		t.Errorf("entries taken for forged: %v; the index they were read from is of the file's second, where git compares the content", got)
	}
	// The same entries read from the index of the later second are trusted by git: forged.
	if ix.b, ix.mtime, ix.entries, ix.exts, err = readIndex(ws, index, 20); err != nil {
		t.Fatal(err)
	}
	if got := staleEntries(ws, ix, since, nil); len(got) != 1 || got[0].name != "loop.txt" {
		t.Errorf("entries taken for forged: %v, want loop.txt (its stat data trusted by the index's time)", got)
	}
}

// TestBlobMemo: the check at exit's memo gives the id hashed before for the same file as
// fstatat described it, and hashes again once the file's description changed (here another
// file renamed over it); nil hashes every time.
func TestBlobMemo(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, "f.txt")
	mustWrite(t, p, "one\n")
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(wfd)
	stat := func() *unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Fstatat(wfd, "f.txt", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
		return &st
	}
	var z objectHasher
	var m blobMemo
	st1 := stat()
	one, err := m.id(&z, wfd, "f.txt", st1, unix.S_IFREG, sha1.Size)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := blobID(&z, wfd, "f.txt", unix.S_IFREG, sha1.Size, false); !bytes.Equal(one, want) {
		t.Fatalf("memo id %x, blobID %x", one, want)
	}
	// Replaced by another file of the same size (a new inode: its description differs
	// whatever the clock's tick).
	mustWrite(t, p+".new", "two\n")
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	if again, _ := m.id(&z, wfd, "f.txt", st1, unix.S_IFREG, sha1.Size); !bytes.Equal(again, one) {
		t.Errorf("the memo hashed again a file described as before: %x, want %x", again, one)
	}
	two, _ := m.id(&z, wfd, "f.txt", stat(), unix.S_IFREG, sha1.Size)
	if want, _ := blobID(&z, wfd, "f.txt", unix.S_IFREG, sha1.Size, false); bytes.Equal(two, one) || !bytes.Equal(two, want) {
		t.Errorf("after the rewrite the memo gave %x (before %x, the file's %x)", two, one, want)
	}
	// A folder on the way swapped between the caller's fstatat and the memo's open (review
	// 30b): the id read is the other file's, given back, but never kept under this file's
	// description.
	sub := filepath.Join(ws, "sub")
	mustWrite(t, filepath.Join(sub, "x"), "xxx\n")
	mustWrite(t, filepath.Join(ws, "other", "x"), "yyy\n") // the same size
	var xst unix.Stat_t
	if err := unix.Fstatat(wfd, "sub/x", &xst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	swap := func() {
		t.Helper()
		if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, filepath.Join(ws, "other"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	swap()
	ySeen, _ := m.id(&z, wfd, "sub/x", &xst, unix.S_IFREG, sha1.Size)
	swap()
	xID, _ := blobID(&z, wfd, "sub/x", unix.S_IFREG, sha1.Size, false)
	if bytes.Equal(ySeen, xID) {
		t.Fatalf("the swap did not take place (the test proves nothing)")
	}
	if got, _ := m.id(&z, wfd, "sub/x", &xst, unix.S_IFREG, sha1.Size); !bytes.Equal(got, xID) {
		t.Errorf("after a swapped folder, the memo gave %x for sub/x, the other file's; want its own %x", got, xID)
	}
	var none *blobMemo
	if got, _ := none.id(&z, wfd, "f.txt", st1, unix.S_IFREG, sha1.Size); !bytes.Equal(got, two) {
		t.Errorf("a nil memo gave %x, want the file's %x", got, two)
	}
}
