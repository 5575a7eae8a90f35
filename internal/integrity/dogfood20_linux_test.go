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
