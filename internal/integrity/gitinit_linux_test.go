package integrity_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/integrity"
)

// TestGitInitInBox guards issue #20: a box started in a folder that is no git repository may
// make one there (git init, git init -b main, git clone URL .) and commit, and the host gets a
// working repository. Before, the absent .git was guarded as a folder: what git wrote into it
// (HEAD, config, the sample hooks) was moved out as it appeared, the box's git commit failed
// with "not a git repository", the host was left with a broken .git, 17 proposed changes and
// three integrity alerts. Now the new repository is under the nested repositories' rule (the
// attack tests below); its default configuration and sample hooks are no finding. The next
// launch in that workspace pins the repository as usual (its .git/config staged).
func TestGitInitInBox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, subject string
		// empty leaves the workspace empty (else it holds a.txt, which the box commits).
		empty bool
		// aside is what the alert of the one finding the launch makes says: the config moved
		// aside ("": no alert, nothing proposed).
		aside string
	}{
		{name: "init", script: "git init -q && git add -A && " + boxGit + " commit -qm x", subject: "x"},
		{name: "init-b-main", script: "git init -q -b main && git add -A && " + boxGit + " commit -qm x && [ \"$(git symbolic-ref HEAD)\" = refs/heads/main ]", subject: "x"},
		// A local bare repository the box makes in the box cache (outside the workspace,
		// which stays empty: a clone into "." needs an empty folder). Its origin is a path out
		// of the workspace, whose hooks the host's git push would run (review 22,
		// TestAttackPushToBoxCacheRemote): the config is moved aside; the clone's commit and
		// files stay, and the host's git reads the repository without it.
		{name: "clone", empty: true, subject: "src", aside: "remote.origin.url = ", script: `C=$(dirname "$(dirname "$CARGO_TARGET_DIR")")/gitinit-$$
git init -q -b main "$C/src" && echo s > "$C/src/s.txt" && git -C "$C/src" add -A && ` + boxGit + ` -C "$C/src" commit -qm src
git clone -q --bare "$C/src" "$C/src.git"
[ -z "$(ls -A)" ]
git clone -q "$C/src.git" . && [ -f s.txt ]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := noRepoEnv(t)
			if !tc.empty {
				write(t, filepath.Join(e.work, "a.txt"), "hi\n")
			}
			out, stderr, code := e.runAll("run", "sh", "--", "-c", "set -e; exec 1>&2\n"+tc.script)
			if code != 0 {
				t.Fatalf("run: exit %d:\n%s%s", code, out, stderr)
			}
			if tc.aside != "" {
				if !strings.Contains(stderr, "integrity alert: created .git/config: git configuration leading out of the workspace: "+tc.aside) {
					t.Errorf("the end of run does not say the config was moved aside for %q:\n%s", tc.aside, stderr)
				}
			} else {
				for _, bad := range []string{"integrity alert", "proposed", "moved out"} {
					if strings.Contains(stderr, bad) {
						t.Errorf("the end of run says %q:\n%s", bad, stderr)
					}
				}
			}
			if got, err := hostGit(e.work, "log", "--format=%s"); err != nil || got != tc.subject+"\n" {
				t.Errorf("the host's git log: %q, %v; want the box's commit %q", got, err, tc.subject)
			}
			if got, err := hostGit(e.work, "status", "--porcelain"); err != nil || got != "" {
				t.Errorf("the host's git status --porcelain: %q, %v; want nothing", got, err)
			}
			for _, f := range []string{".git/HEAD", ".git/config", ".git/description", ".git/hooks/pre-commit.sample"} {
				if _, err := os.Lstat(filepath.Join(e.work, f)); err != nil && (f != ".git/config" || tc.aside == "") {
					t.Errorf("%s is not on the host: %v", f, err)
				}
			}
			if tc.aside != "" {
				return
			}
			l := e.lastLaunch()
			if l.Proposed != nil && l.Proposed.Changes > 0 {
				t.Errorf("the launch proposed %d changes, want none", l.Proposed.Changes)
			}
			if ch := e.run("changes", l.ID); strings.Contains(ch, "+++ ") {
				t.Errorf("agentbox changes lists changes:\n%s", ch)
			}
			for _, ev := range l.DriftEvents {
				if ev.Alert {
					t.Errorf("an integrity alert: %+v", ev)
				}
			}
			if tc.name != "init" {
				return
			}
			// The next launch sees the repository and pins it: its .git/config is a staged
			// copy (a symlink in the box), what the box's git config writes is a proposed
			// change, and the host's config stays.
			cfg, err := os.ReadFile(filepath.Join(e.work, ".git/config"))
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, code = e.runAll("run", "sh", "--", "-c", `set -e; exec 1>&2; [ -L .git/config ]; git config user.name y; echo b > b.txt; git add b.txt; `+boxGit+` commit -qm y`)
			if code != 0 {
				t.Fatalf("second run: exit %d:\n%s%s", code, out, stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(e.work, ".git/config")); string(b) != string(cfg) {
				t.Errorf("the second box changed the host's .git/config:\n%s", b)
			}
			if ch := e.run("changes", e.lastLaunch().ID); !strings.Contains(ch, "+++ b/.git/config") || !strings.Contains(ch, "+\tname = y") {
				t.Errorf("agentbox changes of the second launch lacks its .git/config:\n%s", ch)
			}
			if got, _ := hostGit(e.work, "log", "--format=%s"); got != "y\nx\n" {
				t.Errorf("the host's git log after the second box: %q", got)
			}
		})
	}
}

// TestAttackGitInitInBox: a box in a workspace that is no repository makes one (git init) and
// plants what the host's git would run in it: (a) core.fsmonitor, and core.pager in a file of
// the workspace that include.path names; (b) a pre-commit hook in .git/hooks; (c)
// core.hooksPath naming a folder of the workspace with a pre-commit hook. The host's git
// status, git log (on a terminal, for the pager) and git commit, after the box and, for the
// config and the hook, while it runs (each moved aside once the watch sees it), run none of
// them. Without the scan of the new .git (it skipped by the scan), each of the three runs.
func TestAttackGitInitInBox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		plant func(touch string) string
		// moved is the path whose plant (needle, an extended regular expression: every
		// part of it) must be gone (moved aside) while the box runs.
		moved, needle string
	}{
		{name: "fsmonitor-include", moved: ".git/config", needle: "fsmonitor|inc.cfg", plant: func(touch string) string {
			return fmt.Sprintf(`git config core.fsmonitor "%s.fsmonitor; false" && printf '[core]\n\tpager = "%s.pager; cat"\n' > inc.cfg &&
git config include.path ../inc.cfg`, touch, touch)
		}},
		{name: "hook", moved: ".git/hooks/pre-commit", needle: ".hook", plant: func(touch string) string {
			// Made executable outside the workspace and moved in (the watch may move a hook
			// aside between its write and a chmod; a file made in the workspace would have
			// the scan read the repository by its own event).
			return fmt.Sprintf(`h=$(mktemp) && printf '#!/bin/sh\n%s.hook\n' > "$h" && chmod +x "$h" && mv "$h" .git/hooks/pre-commit`, touch)
		}},
		{name: "hooksPath", moved: ".git/config", needle: "myhooks", plant: func(touch string) string {
			return fmt.Sprintf(`mkdir myhooks && printf '#!/bin/sh\n%s.hook\n' > myhooks/pre-commit && chmod +x myhooks/pre-commit &&
git config core.hooksPath myhooks`, touch)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := noRepoEnv(t)
			write(t, filepath.Join(e.work, "a.txt"), "hi\n")
			mark, touch := e.marker(tc.name)
			marks := func() []string { m, _ := filepath.Glob(mark + ".*"); return m }
			hostRuns := func(when string) {
				t.Helper()
				res, _ := hostGit(e.work, "status")
				res2, _ := hostScript(e.work, "git log --oneline")
				res3, _ := hostGit(e.work, "commit", "-q", "--allow-empty", "-m", "host "+when)
				if m := marks(); len(m) > 0 {
					t.Errorf("%s, the host's git ran what the box planted: %v\ngit status:\n%s\ngit log:\n%s\ngit commit:\n%s", when, m, res, res2, res3)
				}
			}
			moved := filepath.Join(e.work, tc.moved)
			// No set -e: the box reaches the hand-over whatever fails (a box that ends
			// first leaves the harness waiting on the FIFO).
			out := e.boxPlantDuring(fmt.Sprintf(`git init -q && git add a.txt && %s commit -qm x &&
sleep 0.5 &&
%s &&
echo planted
# Nothing written in the workspace until the plant is gone: only the watch of the new .git
# (and of its hooks folder) can have the scan see it meanwhile.
i=0; while grep -qsE '%s' %s && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
grep -qsE '%s' %s || echo gone-while-running
echo ready > %s; read go < %s`, boxGit, tc.plant(touch), tc.needle, tc.moved, tc.needle, tc.moved, syncFIFO, syncFIFO), func() {
				// The watch moves the plant aside while the box runs (a hang guard, not
				// a timing assertion: the move follows the file event within milliseconds).
				deadline := time.Now().Add(30 * time.Second)
				for {
					b, err := os.ReadFile(moved)
					if err != nil || !regexp.MustCompile(tc.needle).Match(b) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s is still in place while the box runs:\n%s", tc.moved, b)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				hostRuns("while the box runs")
			})
			requirePlanted(t, out)
			if !strings.Contains(out, "gone-while-running") {
				t.Errorf("%s kept the plant while the box ran (the box waited 10 s for the watch to move it):\n%s", tc.moved, out)
			}
			if m := marks(); len(m) > 0 {
				t.Fatalf("a marker exists before the host's git ran (the box made it, or the host's git ran it while the box ran): %v\n%s", m, out)
			}
			hostRuns("after the box")
			if got, err := hostGit(e.work, "log", "--format=%s"); err != nil || !strings.HasSuffix(got, "x\n") {
				t.Errorf("the host's git log: %q, %v; want the box's commit", got, err)
			}
		})
	}
}

// noRepoEnv is newDaemonEnv for a test of a workspace in no repository: skipped where the test's
// folder lies beneath a .git or a HEAD.
func noRepoEnv(t *testing.T) *daemonEnv {
	t.Helper()
	e := newDaemonEnv(t)
	if !integrity.SurelyNoRepository(e.work) {
		t.Skipf("%s lies beneath a .git or a HEAD", e.work)
	}
	return e
}
