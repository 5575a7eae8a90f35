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
cat build.sh && echo planted`, touch))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	// Session 19: the stronger outcome. The end of run names build.sh; the host's build.sh is
	// put back as git checks it out (no hidden change left: git's view and the bytes agree),
	// so the host's sh build.sh runs no command of the box's; the box's version is a proposed
	// change that agentbox changes shows and agentbox apply puts back. Before, the file was
	// only named and stayed as the box wrote it (fix18c).
	got, err := os.ReadFile(filepath.Join(e.work, "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "integrity alert: modified build.sh") {
		t.Errorf("the end of run does not name build.sh:\n%s", out)
	}
	sh := exec.Command("sh", "build.sh")
	sh.Dir = e.work
	run, _ := sh.CombinedOutput()
	_, ran := os.Lstat(mark)
	if strings.Contains(string(got), touch) || ran == nil {
		t.Errorf("the box's build.sh stayed on the host: %q; the host's sh build.sh said %q, marker made: %v\nthe box said:\n%s", got, run, ran == nil, out)
	}
	os.Remove(mark)
	if checkout := git(t, e.work, "cat-file", "--filters", "--path=build.sh", ":build.sh"); checkout != string(got) {
		t.Errorf("build.sh is %q, not git's checkout of its object, %q: a change is hidden still", got, checkout)
	}
	if status := git(t, e.work, "status", "--porcelain", "--untracked-files=no"); strings.TrimSpace(status) != "" {
		t.Errorf("the host's git status shows tracked changes after build.sh was put back: %q", status)
	}
	id := e.launches()[0].ID
	changes := e.run("changes", id)
	t.Logf("the end of run:\n%s\nagentbox changes:\n%s", out, changes)
	if !strings.Contains(changes, "build.sh (a tracked file whose change git did not show") || !strings.Contains(changes, touch) {
		t.Errorf("agentbox changes does not show the box's build.sh:\n%s", changes)
	}
	if applied := e.run("apply", id, "build.sh"); !strings.Contains(applied, "build.sh") {
		t.Errorf("agentbox apply build.sh: %s", applied)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "build.sh")); !strings.Contains(string(b), touch) {
		t.Errorf("agentbox apply did not put the box's build.sh back: %q", b)
	}
}

// TestAttackSubmoduleDirtyTrackedEdit (review 18b): review 17's F9 fix takes the untracked
// files of a submodule whose changes the superproject's git status hides (its effective
// `ignore` is `untracked`, `dirty` or `all`). With `dirty` or `all`, git status hides the
// submodule's modified tracked files as well, and neither that fix nor the untracked-files
// rule (which names only untracked files) looks at them: a box that appends a command to the
// submodule's tracked lib/run.sh leaves the host's `git status` and `git diff` at the top
// empty, no line at the end of run says so, and the host's `sh lib/run.sh` (what the
// project's make or test runs) runs it.
func TestAttackSubmoduleDirtyTrackedEdit(t *testing.T) {
	for _, ignore := range []string{"dirty", "all"} {
		t.Run(ignore, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			lib := filepath.Join(e.root, "libsrc")
			write(t, filepath.Join(lib, "run.sh"), "echo lib\n")
			git(t, lib, "init", "-q", "-b", "main")
			git(t, lib, "add", "-A")
			git(t, lib, "commit", "-q", "-m", "lib")
			write(t, filepath.Join(e.work, "app.sh"), "sh lib/run.sh\n")
			git(t, e.work, "init", "-q", "-b", "main")
			git(t, e.work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
			git(t, e.work, "config", "-f", ".gitmodules", "submodule.lib.ignore", ignore)
			git(t, e.work, "add", "-A")
			git(t, e.work, "commit", "-q", "-m", "app with lib")
			mark, touch := e.marker("submodule-" + ignore)
			out := e.boxPlant(fmt.Sprintf(`echo '%s' >> lib/run.sh && echo planted`, touch))
			if !strings.Contains(out, "planted") {
				t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
			}
			got, _ := os.ReadFile(filepath.Join(e.work, "lib", "run.sh"))
			// Session 19: put back as the recorded commit holds it, the box's version kept.
			if string(got) != "echo lib\n" {
				t.Errorf("the submodule's lib/run.sh was not put back: %q\nthe box said:\n%s", got, out)
			}
			if ch := e.run("changes", e.launches()[0].ID); !strings.Contains(ch, "lib/run.sh") || !strings.Contains(ch, touch) {
				t.Errorf("agentbox changes does not show the box's lib/run.sh:\n%s", ch)
			}
			status := git(t, e.work, "status", "--porcelain")
			diff := git(t, e.work, "diff", "HEAD", "--stat")
			if strings.Contains(string(got), touch) && !strings.Contains(status, "lib") && !strings.Contains(diff, "lib") && !strings.Contains(out, "lib/run.sh") {
				sh := exec.Command("sh", "app.sh")
				sh.Dir = e.work
				sh.CombinedOutput()
				_, ran := os.Lstat(mark)
				t.Errorf("the box's edit of the submodule's tracked lib/run.sh (ignore = %s) stayed, hidden from the host's git status (%q) and git diff HEAD (%q) and unsaid by run; the host's sh app.sh ran it: %v\nthe box said:\n%s",
					ignore, status, diff, ran == nil, out)
			}
		})
	}
}
