package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/enginetest"
)

// TestAttackPackedRefsPadded guards review 15, F14: a box that writes a replace ref into a
// packed-refs padded past 64 MiB (1.25 million tags, 82 MB) kept it, since the check read no
// file over that bound, and the host's git show HEAD:Makefile gave the box's Makefile (git has
// no bound), git status empty. The file is read in records now: the replace ref is removed, the
// tags are kept, and the finding is recorded once.
func TestAttackPackedRefsPadded(t *testing.T) {
	t.Parallel()
	needGit(t)
	script := `set -e
printf 'all:\n\t@echo BOXCODE\n' > /tmp/M; new=$(git hash-object -w /tmp/M)
old=$(git rev-parse HEAD:Makefile); c=$(git rev-parse HEAD)
{ echo "# pack-refs with: peeled fully-peeled sorted "; echo "$new refs/replace/$old"
  seq -f "%09g" 1 1250000 | sed "s|^|$c refs/tags/pad-|"; } > .git/packed-refs
git show HEAD:Makefile`
	pb, r := newProtectedBox(t, makefileRepo(t), script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	packed := filepath.Join(pb.ws, ".git/packed-refs")
	if fi, err := os.Stat(packed); err != nil || fi.Size() <= 64<<20 {
		t.Fatalf("the box's packed-refs: %v, %d bytes (want more than 64 MiB)", err, fi.Size())
	}
	if out := git(t, pb.ws, "show", "HEAD:Makefile"); !strings.Contains(out, "BOXCODE") {
		t.Fatalf("the replace ref does not give the host's git show the box's Makefile here:\n%s", out)
	}
	n := 0
	for _, tr := range append(pb.state.VerifyExec(), pb.state.VerifyExit()...) {
		switch {
		case tr.Path == packed && tr.Alert && strings.Contains(tr.Detail, "the 1 replace refs added since the launch began were removed"):
			n++
		case tr.Path == packed:
			t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
		}
	}
	if n != 1 {
		t.Errorf("%d alerts saying the replace ref was removed, want one", n)
	}
	if out := git(t, pb.ws, "show", "HEAD:Makefile"); strings.Contains(out, "BOXCODE") || !strings.Contains(out, "reviewed") {
		t.Errorf("after the check, the host's git show HEAD:Makefile:\n%s", out)
	}
	if out := git(t, pb.ws, "status", "--porcelain"); out != "" {
		t.Errorf("the host's git status: %q", out)
	}
	if out := git(t, pb.ws, "rev-parse", "--verify", "-q", "refs/tags/pad-000000001"); strings.TrimSpace(out) == "" {
		t.Error("the packed tags went with the replace ref")
	}
	if out, err := exec.Command("git", "-C", pb.ws, "fsck", "--no-dangling", "--connectivity-only").CombinedOutput(); err != nil {
		t.Errorf("git fsck after the check: %v\n%s", err, out)
	}
}
