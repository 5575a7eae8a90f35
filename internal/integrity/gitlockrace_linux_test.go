package integrity_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoxGitNeverMeetsTheCheckLock: an agent's ordinary git loop in a box (change a file,
// git add, git commit, 300 times, in a workspace of more folders than the watch covers) must never fail on a lock the integrity check took. Each
// commit writes the cache tree (TREE) into an index the launch changed; a check that removed it
// while the box ran, under git's index.lock, made the box's next git fail with "Unable to
// create '.git/index.lock': File exists" (TestAttackBeyondEventCover's plant, as the ordinary
// user, in a .ci/run). The extensions go at exit, when no git of the box is at work.
func TestBoxGitNeverMeetsTheCheckLock(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	// More folders than the watch covers (4,096): the check then rescans the whole workspace,
	// indexes included, at every interval (1 s here) while the box runs, as in a large
	// monorepo or a project with its node_modules.
	for i := 0; i <= 4300; i++ {
		if err := os.MkdirAll(filepath.Join(e.work, "pad", fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(e.work, ".gitignore"), "pad/\n")
	git(t, e.work, "add", ".gitignore")
	git(t, e.work, "commit", "-q", "-m", "ignore pad")
	out := e.boxPlant(fmt.Sprintf(`i=0; fails=0
while [ $i -lt 300 ]; do
  echo $i > loop.txt
  %[1]s add loop.txt 2>>git.err || fails=$((fails+1))
  %[1]s commit -q -m "step $i" 2>>git.err || fails=$((fails+1))
  i=$((i+1))
done
echo "fails=$fails"; grep -v '^hint:' git.err | head -n 5; rm -f git.err`, boxGit))
	if !strings.Contains(out, "fails=") {
		t.Fatalf("the loop did not run:\n%s", out)
	}
	if !strings.Contains(out, "fails=0\n") {
		t.Errorf("the box's git failed while the check ran:\n%s", out)
	}
	l := e.lastLaunch()
	for _, ev := range l.DriftEvents {
		if strings.HasSuffix(ev.Path, "/.git/index") && strings.Contains(ev.Detail, "extensions") {
			t.Errorf("the box's own commits reported as a forged index: %+v", ev)
		}
	}
}
