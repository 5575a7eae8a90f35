package integrity_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackFIFOLeftAside (session 19, what review 18's fix left): the check at exit moved a
// FIFO the box made at x/.gitignore aside, in place, as x/.gitignore.agentbox-quarantined-1,
// so that git would not wait on it. It stayed in the workspace after agentbox run returned:
// git status does not list a FIFO, but the host's other tools open it by name (an editor's
// file tree, cat x/*, a script reading every file of a folder) and wait on it as git did. Now
// it is removed and named at the end of run; the host's git status is empty and nothing of
// the box's is left under a quarantine name.
func TestAttackFIFOLeftAside(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), "*.log\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "ignore")
	out := e.boxPlant(`echo box > run.log && mkdir -p x && mkfifo x/.gitignore && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	if !strings.Contains(out, "x/.gitignore") {
		t.Errorf("the end of run does not name the box's FIFO x/.gitignore:\n%s", out)
	}
	if st := git(t, e.work, "status", "--porcelain"); strings.TrimSpace(st) != "" {
		t.Errorf("the host's git status after the launch is not empty:\n%s\nthe box said:\n%s", st, out)
	}
	var left []string
	filepath.WalkDir(e.work, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (d.Type()&fs.ModeNamedPipe != 0 || strings.Contains(d.Name(), ".agentbox-quarantined-")) {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("what the box made stays in the workspace: %q\nthe box said:\n%s", left, out)
	}
}
