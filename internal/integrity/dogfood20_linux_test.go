package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSaysGitCachesAreNoInstructionFiles: a box's ordinary `git gc` (and `git maintenance
// run`, and the auto gc of a commit) writes a commit-graph, which the check at exit moves aside
// without an alert (a cache git rebuilds: docs/integrity.md, "Objects that are not what their
// names say"). The end of `agentbox run` must not call it an instruction file: before, every
// non-alert event but HEAD was listed so, and a box that ran git gc ended with "the launch
// changed instruction files: .git/objects/info/commit-graph" (dogfood20, seen by hand in the
// workspace's repository and in a nested clone). CLAUDE.md, changed in the same box, is still
// said.
func TestRunSaysGitCachesAreNoInstructionFiles(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	_, stderr, code := e.runAll("run", "sh", "--", "-c",
		"echo notes > CLAUDE.md && echo more >> main.go && "+boxGit+" commit -qam more && "+boxGit+" gc -q && ls .git/objects/info")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	aside, _ := filepath.Glob(filepath.Join(e.work, ".git", "objects", "info", "commit-graph*"))
	if len(aside) == 0 {
		t.Fatalf("the box's git gc wrote no commit-graph (the test would prove nothing):\n%s", stderr)
	}
	if strings.Contains(stderr, "instruction files: .git") || strings.Contains(stderr, "commit-graph, ") ||
		strings.Contains(stderr, ", .git/") {
		t.Errorf("the end of agentbox run calls a git cache an instruction file:\n%s", stderr)
	}
	if !strings.Contains(stderr, "the launch changed instruction files: CLAUDE.md\n") {
		t.Errorf("the end of agentbox run does not say CLAUDE.md alone:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(e.work, ".git", "objects", "info", "commit-graph")); err == nil {
		t.Errorf("the box's commit-graph was left in place (the check at exit moves it aside)")
	}
}

// TestRunSaysGitDirOutsideWorkspace: agentbox run in a linked worktree of a repository that
// lies elsewhere (`git worktree add ../wt`, a common way to give each agent its own checkout)
// has the worktree as its workspace; its git directory (the main repository's
// .git/worktrees/wt) is never bound in the box, so every git command there fails with "not a
// git repository". Before, only the daemon's log said why (dogfood20, by hand); the start
// of agentbox run now says so, with what to do. A linked worktree beneath the main worktree
// works in the box and gets no such notice.
func TestRunSaysGitDirOutsideWorkspace(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	main := filepath.Join(e.root, "main")
	if err := os.Mkdir(main, 0o700); err != nil {
		t.Fatal(err)
	}
	repo(t, main)
	wt := filepath.Join(e.work, "wt")
	git(t, main, "worktree", "add", "-q", wt, "-b", "agent")
	c := e.cmd("run", "sh", "--", "-c", "git status --short; echo git-rc=$?")
	c.Dir = wt
	out, _ := c.CombinedOutput()
	if !strings.Contains(string(out), "git-rc=128") {
		t.Fatalf("git in the box reached the outside git directory (the test would prove nothing):\n%s", out)
	}
	if !strings.Contains(string(out), "agentbox: the workspace "+wt+" is a linked worktree or a submodule whose git directory "+
		filepath.Join(main, ".git", "worktrees", "wt")+" lies outside it") {
		t.Errorf("agentbox run does not say why git fails in the box:\n%s", out)
	}
	// A linked worktree beneath the main worktree: git works, nothing said.
	inner := filepath.Join(main, ".worktrees", "inner")
	git(t, main, "worktree", "add", "-q", inner, "-b", "inner")
	c = e.cmd("run", "--workspace", main, "sh", "--", "-c", "git status --short; echo git-rc=$?")
	c.Dir = inner
	out, _ = c.CombinedOutput()
	if !strings.Contains(string(out), "git-rc=0") || strings.Contains(string(out), "lies outside it") {
		t.Errorf("a linked worktree beneath the workspace: want git to work and no notice:\n%s", out)
	}
}
