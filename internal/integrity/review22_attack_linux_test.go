package integrity_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// boxPromisorPlant is the box's shell script that makes the workspace's repository (git init)
// a partial clone whose promisor remote's uploadpack is the command touch (run by the host's
// git wherever it reads the repository with its configuration and expands its sparse index:
// git ls-files --stage fetches the missing tree), then keeps that configuration in place for
// secs seconds (or until a file stop appears): whenever the watch has moved the config aside,
// the box writes it again.
func boxPromisorPlant(touch string, secs int) string {
	return fmt.Sprintf(`git init -q -b main && mkdir -p a b && echo a > a/f && echo b > b/g &&
git add a b && %s commit -qm box &&
git sparse-checkout set --cone a && git config index.sparse true && git sparse-checkout reapply &&
t=$(git rev-parse HEAD:b) && rm -f .git/objects/$(echo $t | cut -c1-2)/$(echo $t | cut -c3-) &&
cp .git/config /tmp/base.cfg &&
printf '[extensions]\n\tpartialClone = origin\n[remote "origin"]\n\turl = %%s/none\n\tpromisor = true\n\tuploadpack = "%s; false"\n' "$PWD" >> /tmp/base.cfg &&
echo planted
end=$(( $(date +%%s) + %d )); n=0
while [ $(date +%%s) -lt $end ] && [ ! -e stop ]; do
	if ! grep -qs uploadpack .git/config; then cp /tmp/base.cfg .git/config.new && mv .git/config.new .git/config; n=$((n+1)); fi
done
echo replanted $n
`, boxGit, touch, secs)
}

// TestAttackRecordFoldersReadsBoxConfig: in a workspace in no repository at launch, the record
// of the folders in git-ignored places (State.RecordFolders, started beside the box) ran the
// host's git in the workspace with the repository's configuration before review 22's fix (it
// copied the state without NoRepository, so workTreeGitEnv read the box-made repository as the
// workspace's own, its configuration taken for pinned; now it walks nothing there). A box
// that makes the repository (git init) before the record's walk reaches git has the daemon's
// git ls-files --stage fetch through the promisor remote and run its uploadpack. The workspace
// holds a user's project of many folders (the walk before git, blockingGitFiles, takes a
// while); the box keeps its config in place against the watch's moves.
func TestAttackRecordFoldersReadsBoxConfig(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	// The user's project, not yet a repository: 300 folders of 200 folders.
	for i := range 300 {
		for j := range 200 {
			if err := os.MkdirAll(filepath.Join(e.work, "data", fmt.Sprint(i), fmt.Sprint(j)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark, touch := e.marker("record")
	out := e.boxPlant(boxPromisorPlant(touch, 8))
	requirePlanted(t, out)
	if _, err := os.Lstat(mark); err == nil {
		t.Errorf("the daemon's git ran the uploadpack of the box-made repository's config (marker %s)\nthe box said:\n%s", mark, out)
	}
}

// TestAttackSecondLaunchTrustsBoxRepo: a first box in a workspace in no repository makes one
// (git init) and keeps a config whose promisor remote's uploadpack is a command in place (the
// watch moves it aside ~50 ms after each write; the box writes it again). A second launch in the
// same workspace, started while the first box runs, found a repository at the top and took it
// for the user's before review 22's fix (Layout.NoRepository false): its .git/config pinned,
// and the checks of that launch ran the host's git with that configuration, which fetched
// through the promisor remote and ran the command. Now the daemon's registry makes the
// repository a box's for every launch beside the first (Registry.Prepare).
func TestAttackSecondLaunchTrustsBoxRepo(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	mark, touch := e.marker("second")
	id := strings.TrimSpace(e.run("run", "-d", "sh", "--", "-c", boxPromisorPlant(touch, 90)))
	e.waitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning })
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(e.work, ".git", "config"))
		if strings.Contains(string(b), "uploadpack") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first box never planted its config:\n%s", e.daemonLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Fatalf("a marker exists before the second launch (the test would prove nothing)")
	}
	// The second launch: the user starts another agent in the same folder (up to three times:
	// the first box's config is moved aside a moment after each write, and git reads it when
	// it starts).
	second := ""
	for i := range 3 {
		out, stderr, code := e.runAll("run", "sh", "--", "-c", "echo second > second.txt; sleep 2")
		t.Logf("second launch %d: exit %d\n%s%s", i, code, out, stderr)
		if second == "" {
			second = e.lastLaunch().ID
		}
		if _, err := os.Lstat(mark); err == nil {
			break
		}
	}
	write(t, filepath.Join(e.work, "stop"), "")
	e.waitLaunch(id, "settled", func(l api.Launch) bool { return l.State == api.StateExited && l.Settled })
	e.waitEnded(id)
	if _, err := os.Lstat(mark); err == nil {
		t.Errorf("the daemon's git, for the second launch, ran the uploadpack of the config the first box wrote (marker %s)", mark)
	}
	// What the second launch proposes: its staged .git/config is the one the first box
	// wrote, planted; agentbox apply would write it back as the user's.
	if ch := e.run("changes", second); strings.Contains(ch, "uploadpack") {
		t.Errorf("the second launch proposes the first box's planted .git/config (agentbox apply writes it back):\n%s", ch)
	}
	// After both, the host's own git.
	res, _ := hostGit(e.work, "ls-files", "--stage")
	if _, err := os.Lstat(mark); err == nil && !t.Failed() {
		t.Errorf("the host's git ls-files --stage after both boxes ran the box's uploadpack:\n%s", res)
	}
}

// hostAfterPlant runs script in a box (the workspace holds a.txt), hands over through
// syncFIFO once the script has written to it, waits wait on the host (the watch's time to move
// what it sees), runs host there (the host's git while the box runs) and, after the box, again;
// each time the marker mark appears, the test fails saying when and what ran (ran), with host's
// output. It returns the box's output.
func hostAfterPlant(t *testing.T, e *daemonEnv, script string, wait time.Duration, mark, ran string, host func() (string, error)) string {
	t.Helper()
	write(t, filepath.Join(e.work, "a.txt"), "hi\n")
	check := func(when string) {
		res, err := host()
		if _, lerr := os.Lstat(mark); lerr == nil {
			os.Remove(mark)
			t.Errorf("%s, %s: %v\n%s", when, ran, err, res)
		}
	}
	out := e.boxPlantDuring(script+"\necho ready > "+syncFIFO+"; read go < "+syncFIFO+"\n", func() {
		time.Sleep(wait)
		check("while the box runs")
	})
	requirePlanted(t, out)
	check("after the box")
	return out
}

// TestAttackCommondirHooks: a box makes the workspace's repository (git init), copies its git
// directory to a workspace folder c (without HEAD: no repository of its own for git, nor for
// the scan's look for bare repositories) and points .git/commondir there; once the scan has
// read the new .git, it writes c/hooks/pre-commit. The host's git commit runs the common dir's
// hooks: the scan reads them only when it reads .git (an event in .git or .git/hooks), and an
// event in c/hooks is one of an ordinary folder.
func TestAttackCommondirHooks(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	mark, touch := e.marker("commondir")
	out := hostAfterPlant(t, e, fmt.Sprintf(`git init -q && git add a.txt && %s commit -qm x &&
cp -r .git c && rm c/HEAD c/index && echo ../c > .git/commondir && sleep 1 &&
h=$(mktemp) && printf '#!/bin/sh\n%s\n' > "$h" && chmod +x "$h" && mv "$h" c/hooks/pre-commit && echo planted`, boxGit, touch),
		3*time.Second, mark, "the host's git commit ran the pre-commit hook the box put in the common dir c/hooks",
		func() (string, error) { return hostGit(e.work, "commit", "-q", "--allow-empty", "-m", "host") })
	t.Logf("the box said:\n%s", out)
}

// TestAttackTrailerCommand: a box makes the workspace's repository (git init) and sets
// trailer.co.command, which was no key of GitProgramKeys before review 22's fix (the scan kept
// the config). The
// host's git commit --trailer (and git interpret-trailers) runs every configured trailer
// command.
func TestAttackTrailerCommand(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	mark, touch := e.marker("trailer")
	hostAfterPlant(t, e, fmt.Sprintf(`git init -q && git add a.txt && %s commit -qm x &&
git config trailer.co.key Co-authored-by && git config trailer.co.command '%s; true' && echo planted`, boxGit, touch),
		2*time.Second, mark, "the host's git commit --trailer ran the trailer command the box set",
		func() (string, error) {
			return hostGit(e.work, "commit", "-q", "--allow-empty", "-m", "host", "--trailer", "Reviewed-by: U <u@example.com>")
		})
}

// TestAttackBareAtTop: a box in a workspace in no repository writes a bare repository's layout
// at the workspace's top (HEAD, objects/, refs/, config with core.pager): the host's git in the
// workspace, finding no .git, takes the folder for a git directory (safe.bareRepository is
// "all" by default) and git log on a terminal runs the pager.
func TestAttackBareAtTop(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	mark, touch := e.marker("bare")
	hostAfterPlant(t, e, fmt.Sprintf(`d=$(mktemp -d) && git init -q -b main "$d/s" && echo s > "$d/s/f" && git -C "$d/s" add f && %s -C "$d/s" commit -qm s &&
git clone -q --bare "$d/s" "$d/b" && git -C "$d/b" config core.pager '%s; cat' &&
cp -r "$d/b/objects" "$d/b/refs" . && cp "$d/b/packed-refs" "$d/b/config" "$d/b/HEAD" . && echo planted`, boxGit, touch),
		2*time.Second, mark, "the host's git log in the workspace ran the pager of a bare repository's config the box wrote at the top",
		func() (string, error) { return hostScript(e.work, "git log --oneline; git config --list") })
}

// TestAttackPushToBoxCacheRemote: a box makes the workspace's repository (git init), a bare
// repository in the box cache (outside the workspace, writable by boxes, the same path on the
// host) with a pre-receive hook, and names it the repository's origin (remote.origin.url, no
// key of GitProgramKeys nor of GitPathKeys: before review 22's fix the scan kept the config;
// now a remote that is a path out of the workspace is a finding). The host's git push runs
// receive-pack in that repository, which runs its hook: no scan reads the box cache.
//
// The remote is one append to .git/config, not git remote add: that writes the config twice
// (the url, then the fetch refspec), and once in CI the integrity watch moved the first
// version aside in between, git's second write failed ("invalid config file") and the plant
// did not complete.
func TestAttackPushToBoxCacheRemote(t *testing.T) {
	t.Parallel()
	e := noRepoEnv(t)
	mark, touch := e.marker("push")
	pushes := 0
	out := hostAfterPlant(t, e, fmt.Sprintf(`C=$(dirname "$(dirname "$CARGO_TARGET_DIR")")/review22-$$ &&
git init -q --bare "$C/r.git" && printf '#!/bin/sh\n%s\n' > "$C/r.git/hooks/pre-receive" && chmod +x "$C/r.git/hooks/pre-receive" &&
git init -q -b main && git add a.txt && %s commit -qm x &&
printf '[remote "origin"]\n\turl = %%s\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n' "$C/r.git" >> .git/config && echo planted "$C"`, touch, boxGit),
		2*time.Second, mark, "the host's git push ran the pre-receive hook of the box's bare repository in the box cache (the remote its repository names)",
		func() (string, error) {
			pushes++
			return hostGit(e.work, "push", "-q", "origin", fmt.Sprintf("HEAD:refs/heads/host-%d", pushes))
		})
	t.Logf("the box said:\n%s", out)
}
