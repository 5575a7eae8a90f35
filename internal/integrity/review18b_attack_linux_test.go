package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackIdentHidesEdit (review 18b): docs/integrity.md says `.gitattributes` files "are
// ordinary work, not pinned: they can select only the filter, diff and merge drivers the
// (pinned) configuration defines". They also select git's built-in conversions, which need no
// configuration: `ident` collapses any `$Id: …$` (up to the next `$` on the line) to `$Id$`
// when git reads the work tree. A tracked script holding `$Id$` (the keyword of CVS and SVN
// days, still in many old headers) is rewritten by the box so that the keyword's text is a
// command, and `.gitattributes` gains the one line `build.sh ident`; the box also runs `git
// read-tree HEAD` (the index's stat data zero, so git compares by content). On the host,
// `git diff` (and `git diff HEAD`, and `git status`) show nothing of build.sh, `git add -A`
// and `git commit` record only the attribute line, and the host's `sh build.sh` (what `make`,
// `npm test` or CI run) runs the box's command. What a box writes where the host's git shows
// it is work the user reviews; here the user is shown one innocuous attribute line while an
// executable file's change is hidden from every git view.
func TestAttackIdentHidesEdit(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, "build.sh"), "#!/bin/sh\nVERSION='$Id$'\necho built\n")
	git(t, e.work, "add", "build.sh")
	git(t, e.work, "commit", "-q", "-m", "build script")
	mark, touch := e.marker("ident")
	if strings.Contains(touch, "$") {
		t.Fatalf("marker path %s holds a $: ident would stop there", touch)
	}
	out := e.boxPlant(fmt.Sprintf(`echo 'build.sh ident' > .gitattributes
printf '%%s\n' '#!/bin/sh' "VERSION='\$Id: '; %s; : ' \$'" 'echo built' > build.sh
git read-tree HEAD
cat build.sh`, touch))
	got, err := os.ReadFile(filepath.Join(e.work, "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), touch) {
		t.Fatalf("the box's build.sh did not stay (the test would prove nothing): %q\nthe box said:\n%s", got, out)
	}
	// The host's review: git status, git diff, git diff HEAD must name build.sh, whose bytes
	// are not the committed blob's.
	status := git(t, e.work, "status", "--porcelain")
	diff := git(t, e.work, "diff", "HEAD", "--name-only")
	if !strings.Contains(status, "build.sh") || !strings.Contains(diff, "build.sh") {
		sh := exec.Command("sh", "build.sh")
		sh.Dir = e.work
		run, _ := sh.CombinedOutput()
		_, ran := os.Lstat(mark)
		t.Errorf("the box's edit of build.sh is hidden from the host's git (git status --porcelain:\n%s\ngit diff HEAD --name-only:\n%s)\nwhile build.sh is now %q; the host's sh build.sh said %q, marker made: %v\nthe box said:\n%s",
			status, diff, got, run, ran == nil, out)
	}
}
