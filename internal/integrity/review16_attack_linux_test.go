package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// Review 16's attack tests on the check at exit's rule for files left in git-ignored places
// (docs/integrity.md, "Files a box leaves in git-ignored places"). Each fails on main at the
// time of the review (REVIEW16.md says as whom).

// TestAttackIgnoredQuarantineName (review 16, F1): the walk of the ignored places does not look
// into any path that contains ".agentbox-quarantined-" (lookInto), a name the box chooses
// freely. The box writes bin/tools.agentbox-quarantined-1/tools_test.go in the ignored bin/;
// it is neither moved out nor listed by agentbox changes, and the host's go test ./... (which
// takes every folder whose name does not begin with "." or "_") runs its TestMain.
func TestAttackIgnoredQuarantineName(t *testing.T) {
	t.Parallel()
	goBin := hostGo()
	if goBin == "" {
		t.Skip("go not installed")
	}
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "go.mod"), "module example.org/app\n\ngo 1.21\n")
	write(t, filepath.Join(e.work, "app.go"), "package main\n\nfunc F() int { return 1 }\n\nfunc main() {}\n")
	ignoringRepo(t, e.work, "bin/\n")
	mark, _ := e.marker("go-testmain-quarantine-name")
	dir := "bin/tools.agentbox-quarantined-1"
	out := e.boxPlant(fmt.Sprintf(`mkdir -p %s && printf 'package tools\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.WriteFile(%q, nil, 0o644)\n\tos.Exit(m.Run())\n}\n' > %s/tools_test.go && echo planted`, dir, mark, dir))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, dir+"/tools_test.go")
	c := exec.Command(goBin, "test", "./...")
	c.Dir = e.work
	c.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	got, _ := c.CombinedOutput()
	notRun(t, mark, "the host's go test ./... ("+dir+"/tools_test.go)", out+"\nthe host's go test said:\n"+string(got))
}

// TestAttackIgnoredUnlistableFolder (review 16, tried, held): the walk of the ignored places
// skips a folder it cannot list (changedFiles returns nil on the error). The box replaces the
// host's build/app (ignored) and then makes build/ mode 0311: the daemon of an ordinary user
// could not list it, while anyone can still open build/app by its name, and the host's make
// test would run the box's program (newer than main.c). It holds, as root and as the ordinary
// user: the workspace scan before the check gives the owner its read bit back
// (restoreOwnerAccess), so the walk lists build/ and takes build/app.
func TestAttackIgnoredUnlistableFolder(t *testing.T) {
	for _, p := range []string{"make", "cc"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skip(p + " not installed")
		}
	}
	t.Parallel()
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "main.c"), "#include <stdio.h>\nint main(void){puts(\"host app ok\");return 0;}\n")
	write(t, filepath.Join(e.work, "Makefile"), "build/app: main.c\n\tmkdir -p build && cc -o build/app main.c\ntest: build/app\n\t./build/app\n")
	ignoringRepo(t, e.work, "build/\n")
	if got := hostRun(t, e.work, "make", "-s", "test"); !strings.Contains(got, "host app ok") {
		t.Fatalf("the host's first make test: %q", got)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(e.work, "build"), 0o755) })
	mark, _ := e.marker("make-unlistable")
	out := e.boxPlant(fmt.Sprintf(`printf '#!/bin/sh\necho BOX BINARY RAN; touch %s\n' > build/app && chmod +x build/app && chmod 0311 build && echo planted`, mark))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "build/app")
	c := exec.Command("make", "-s", "test")
	c.Dir = e.work
	got, _ := c.CombinedOutput()
	notRun(t, mark, "the host's make test (build/app in a folder the check could not list)", out+"\nmake said:\n"+string(got))
}

// TestIgnoredProtectedFilesStay (review 16, tried): protected files the user keeps git-ignored
// (.claude/settings.local.json, .vscode/settings.json, go.work, .npmrc) are the box's
// staged copies or read-only binds; the box writes its copies. The host's files must stay in
// the workspace with the host's content: the check at exit's ignored-places rule must not take
// them (their ctime must not move because of the launch).
func TestIgnoredProtectedFilesStay(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	files := map[string]string{
		".claude/settings.local.json":     "{\"permissions\":{}}\n",
		".vscode/settings.json":           "{}\n",
		"go.work":                         "go 1.21\n",
		".npmrc":                          "fund=false\n",
		".devcontainer/devcontainer.json": "{}\n",
	}
	for p, c := range files {
		write(t, filepath.Join(e.work, p), c)
	}
	ignoringRepo(t, e.work, ".claude/settings.local.json\n.vscode/\ngo.work\n.npmrc\n.devcontainer/\n")
	var script strings.Builder
	for p := range files {
		fmt.Fprintf(&script, "echo box >> %s 2>/dev/null; ", p)
	}
	script.WriteString("echo done")
	out := e.boxPlant(script.String())
	if !strings.Contains(out, "done") {
		t.Fatalf("the box did not run:\n%s", out)
	}
	for p, c := range files {
		b, err := os.ReadFile(filepath.Join(e.work, p))
		if err != nil || string(b) != c {
			t.Errorf("the host's %s after the box: %q, %v; want the host's %q\nthe box said:\n%s\nagentbox changes:\n%s", p, b, err, c, out, e.run("changes", e.lastLaunch().ID))
		}
	}
}

// TestAttackIgnoredRenamedQuarantine (review 16, F2): the ignored-places rule takes only files
// whose ctime is at or after the launch's start, and a folder renamed keeps its files' ctimes
// (docs/integrity.md: "What they hold is the host's"). But the workspace holds box content
// with old ctimes: what the check at exit of an earlier launch moved aside in place. Launch 1
// makes lib/node_modules/x.test.js (a dependency folder the box made: moved aside at its exit
// into lib/.agentbox-quarantined-N/, hidden, git-ignored as node_modules/). Launch 2 renames
// that folder to dist/ (ignored): its file keeps launch 1's ctime, is not taken, git status is
// empty, and the host's npm test (node --test, which finds *.test.js in every folder but
// node_modules) runs it.
func TestAttackIgnoredRenamedQuarantine(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "package.json"), `{"name":"app","version":"1.0.0","scripts":{"test":"node --test"}}`+"\n")
	write(t, filepath.Join(e.work, "test", "a.test.js"), "require('node:test')('ok', () => {})\n")
	ignoringRepo(t, e.work, "dist/\nnode_modules/\n")
	mark, _ := e.marker("renamed-quarantine")
	out1 := e.boxPlant(fmt.Sprintf(`mkdir -p lib/node_modules && echo 'require("fs").writeFileSync(%q, "box")' > lib/node_modules/x.test.js && echo planted`, mark))
	if !strings.Contains(out1, "planted") {
		t.Fatalf("launch 1's plant failed (the test would prove nothing):\n%s", out1)
	}
	aside, _ := filepath.Glob(filepath.Join(e.work, "lib", ".agentbox-quarantined-*", "node_modules", "x.test.js"))
	if len(aside) != 1 {
		out, _ := exec.Command("find", e.work, "-not", "-path", "*/.git/*").CombinedOutput()
		t.Fatalf("launch 1's lib/node_modules was not moved aside as expected; the workspace:\n%s\nlaunch 1 said:\n%s", out, out1)
	}
	out2 := e.boxPlant(`mv lib/.agentbox-quarantined-*/node_modules dist && rmdir lib/.agentbox-quarantined-* lib && echo moved`)
	if !strings.Contains(out2, "moved") {
		t.Fatalf("launch 2's rename failed (the test would prove nothing):\n%s", out2)
	}
	if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
		t.Logf("the host's git status after launch 2: %q", st)
	}
	c := exec.Command("npm", "test")
	if _, err := exec.LookPath("npm"); err != nil {
		c = exec.Command("node", "--test")
	}
	c.Dir = e.work
	got, _ := c.CombinedOutput()
	notRun(t, mark, "the host's npm test (dist/x.test.js, renamed from launch 1's quarantine)", out2+"\nthe host's npm test said:\n"+string(got))
	if _, err := os.Lstat(filepath.Join(e.work, "dist", "x.test.js")); err == nil {
		t.Errorf("dist/x.test.js, the box's file renamed into an ignored place, is still in the workspace\nagentbox changes:\n%s", e.run("changes", e.lastLaunch().ID))
	}
}

// TestAttackHistoryRewrittenSymref (review 16, F3): the branch-rewrite alert (review 15, F9)
// reads each branch's tip as an object id in refs/heads/NAME, over packed-refs; a loose ref
// whose text is not an id alone is skipped, so the branch keeps the tip packed-refs gives it,
// while git reads it. The user's main is packed (as after a clone or git gc); the box folds its
// Makefile into the user's last commit on a ref outside refs/heads (same message and date) and
// expires the reflogs, then writes refs/heads/main as git reads it and the check does not:
// a symbolic ref to that ref ("ref: refs/wip", git follows it as it follows HEAD), the new id
// followed by a space and more text (git takes the id and ignores the rest), or a symlink to a
// file holding the new id (git reads a loose ref through a symlink whose target is no refname). The host's git
// status is clean, git log shows the user's message, make runs the box's Makefile, and the end
// of the run must say that main's history was rewritten.
func TestAttackHistoryRewrittenSymref(t *testing.T) {
	for name, write := range map[string]string{
		"symref":   `git symbolic-ref refs/heads/main refs/wip`,
		"trailing": `printf '%s x\n' "$(git rev-parse refs/wip)" > .git/refs/heads/main`,
		"symlink":  `git rev-parse refs/wip > .git/wip-tip && rm -f .git/refs/heads/main && ln -s ../../wip-tip .git/refs/heads/main`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			attackHistoryRewrittenRef(t, write)
		})
	}
}

func attackHistoryRewrittenRef(t *testing.T, writeMain string) {
	needGit(t)
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, "Makefile"), "all:\n\t@echo HOST\n")
	git(t, e.work, "add", "Makefile")
	git(t, e.work, "commit", "-q", "-m", "the user's Makefile")
	git(t, e.work, "pack-refs", "--all")
	was, _ := hostGit(e.work, "rev-parse", "main")
	was = strings.TrimSpace(was)
	_, stderr, code := e.runAll("run", "sh", "--", "-c", `git update-ref refs/wip HEAD && git symbolic-ref HEAD refs/wip &&
printf 'all:\n\t@echo BOX\n' > Makefile && git add Makefile && `+boxGit+` commit -q --amend --no-edit --date="$(git log -1 --format=%ad)" &&
`+writeMain+` && git symbolic-ref HEAD refs/heads/main && git reflog expire --expire=now --all && echo planted`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
		t.Fatalf("the box's amend left a trace in git status (the test would prove less): %q", st)
	}
	now, _ := hostGit(e.work, "rev-parse", "main")
	if strings.TrimSpace(now) == was {
		t.Fatalf("main did not move (the plant failed, the test would prove nothing)\n%s", stderr)
	}
	if got := hostRun(t, e.work, "make", "-s"); !strings.Contains(got, "BOX") {
		t.Fatalf("the host's make after the box: %q, want the box's Makefile (the plant failed)", got)
	}
	for _, want := range []string{"agentbox: integrity alert: ", "the history of the branch main was rewritten", "git branch -f main " + was} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the end of the run lacks %q (main is now %s, was %s):\n%s", want, strings.TrimSpace(now), was, stderr)
		}
	}
}

// TestAttackIgnoredHardLinkAfterReview (review 16, F4): the check at exit moves a file left in
// an ignored place into the launch's proposed changes by a rename (the state folder is on the
// workspace's file system): the inode stays the same, and a second name of it that the box
// made where the walk does not look stays in the workspace. (.git/ is a mount of its own in the
// box, so a link there fails with EXDEV; a name holding ".agentbox-quarantined-" is not looked
// at, F1.) The user reviews the change with agentbox changes; the next box writes through the
// second name; agentbox apply then puts back content the user never saw.
func TestAttackIgnoredHardLinkAfterReview(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "bin/\n")
	out1 := e.boxPlant(`mkdir -p bin && printf '#!/bin/sh\necho benign tool\n' > bin/tool && chmod +x bin/tool && ln bin/tool bin/keep.agentbox-quarantined-9 && echo planted`)
	if !strings.Contains(out1, "planted") {
		t.Fatalf("launch 1's plant failed (the test would prove nothing):\n%s", out1)
	}
	// Since F1's fix the second name is taken too (a name is no mark of what the check moved
	// aside): both names go into the store, and nothing of the inode stays in the workspace.
	e.leftIgnored(out1, "bin/tool", "bin/keep.agentbox-quarantined-9")
	id := e.lastLaunch().ID
	reviewed := e.run("changes", id)
	if !strings.Contains(reviewed, "benign tool") || strings.Contains(reviewed, "EVIL") {
		t.Fatalf("agentbox changes %s does not show the box's benign bin/tool:\n%s", id, reviewed)
	}
	out2 := e.boxPlant(`printf '#!/bin/sh\necho EVIL\n' > bin/keep.agentbox-quarantined-9 && echo rewrote`)
	if !strings.Contains(out2, "rewrote") {
		t.Fatalf("launch 2's write failed (the test would prove nothing):\n%s", out2)
	}
	if got := e.run("apply", id, "bin/tool"); !strings.Contains(got, "applied bin/tool") {
		t.Fatalf("agentbox apply %s bin/tool: %q", id, got)
	}
	b, _ := os.ReadFile(filepath.Join(e.work, "bin", "tool"))
	if string(b) != "#!/bin/sh\necho benign tool\n" {
		t.Errorf("agentbox apply put back bin/tool holding %q, not what agentbox changes showed the user:\n%s\nlaunch 2 said:\n%s", b, reviewed, out2)
	}
}

// TestAttackUntrackedFolderHidesNewFiles (review 16, F5): the ignored-places rule takes what a
// box leaves where git status does not show it, but git status does not show every untracked
// file either. "folder": git status (its default untracked mode) shows an untracked folder by
// its name only; the user keeps an untracked, not ignored scratch/ ("?? scratch/" before the
// launch), and the box adds scratch/scratch_test.go. "showUntrackedFiles=no": the user's
// repository sets status.showUntrackedFiles=no (what git advises for large repositories: git
// status then shows no untracked file at all), and the box adds tools/tools_test.go. Either
// way git status is the same after the launch, nothing is taken or said, and the host's go test
// ./... runs the box's TestMain.
func TestAttackUntrackedFolderHidesNewFiles(t *testing.T) {
	goBin := hostGo()
	if goBin == "" {
		t.Skip("go not installed")
	}
	for name, c := range map[string]struct{ dir, setup string }{
		"folder":                {"scratch", ""},
		"showUntrackedFiles=no": {"tools", "status.showUntrackedFiles"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			write(t, filepath.Join(e.work, "go.mod"), "module example.org/app\n\ngo 1.21\n")
			write(t, filepath.Join(e.work, "app.go"), "package main\n\nfunc main() {}\n")
			ignoringRepo(t, e.work, "bin/\n")
			if c.setup != "" {
				git(t, e.work, "config", c.setup, "no")
			} else {
				write(t, filepath.Join(e.work, c.dir, "notes.txt"), "the user's notes, never committed\n")
			}
			before, _ := hostGit(e.work, "status", "--porcelain")
			mark, _ := e.marker("untracked-" + c.dir)
			out := e.boxPlant(fmt.Sprintf(`mkdir -p %s && printf 'package %s\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.WriteFile(%q, nil, 0o644)\n\tos.Exit(m.Run())\n}\n' > %s/%s_test.go && echo planted`, c.dir, c.dir, mark, c.dir, c.dir))
			if !strings.Contains(out, "planted") {
				t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
			}
			after, _ := hostGit(e.work, "status", "--porcelain")
			cmd := exec.Command(goBin, "test", "./...")
			cmd.Dir = e.work
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
			got, _ := cmd.CombinedOutput()
			if before == after && !strings.Contains(out, c.dir+"/") {
				notRun(t, mark, fmt.Sprintf("the host's go test ./... (%s/%s_test.go; git status %q before and after the launch, the end of the run said nothing of it)", c.dir, c.dir, after),
					out+"\nthe host's go test said:\n"+string(got))
			}
		})
	}
}

// TestAttackWorkspaceOnPath (review 16, F6): the daemon refuses a workspace that is the home,
// holds it, or is or holds a harness home or ~/.config (docs/security.md, "Which folder can be
// a workspace"), but not ~/bin or ~/.local/bin, which Debian's and Ubuntu's ~/.profile put
// first on PATH at login when they exist: a user's scripts kept in git there ("fix my
// scripts"). A folder that is on the PATH agentbox run is given is a toolchain, bound
// read-only, and the box cannot write it; but one made since the shell started (mkdir ~/bin,
// git init, then the agent) is not on that PATH yet, and is on the next login shell's. The box
// adds an executable named git (untracked: git status would show it, but the user's own git
// status, from any folder, is the box's program), and the host's next login shell runs it at
// its next git. The launch must be refused (exit 125) or the host must not run it.
func TestAttackWorkspaceOnPath(t *testing.T) {
	for _, dir := range []string{"bin", ".local/bin"} {
		t.Run(strings.ReplaceAll(dir, "/", "_"), func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			ws := filepath.Join(e.home, dir)
			write(t, filepath.Join(ws, "backup.sh"), "#!/bin/sh\necho backup\n")
			git(t, ws, "init", "-q")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-q", "-m", "my scripts")
			mark, _ := e.marker("path-" + strings.ReplaceAll(dir, "/", "_"))
			out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
				fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexec /usr/bin/git "$@"\n' > git && chmod +x git && echo planted`, mark))
			if code == 125 && strings.Contains(stderr, "workspace_refused") {
				return
			}
			if !strings.Contains(out, "planted") {
				t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
			}
			// The host's login shell: ~/.profile's PATH, ~/bin and ~/.local/bin first.
			c := exec.Command("sh", "-c", "git --version")
			c.Dir = e.work
			c.Env = append(os.Environ(), "HOME="+e.home, "PATH="+filepath.Join(e.home, ".local/bin")+":"+filepath.Join(e.home, "bin")+":"+os.Getenv("PATH"))
			c.Run()
			notRun(t, mark, "the host's shell running git with ~/"+dir+" on PATH (a workspace the daemon accepted)", out+stderr)
		})
	}
}

// TestBadLaunchIDSaysWhich (review 16, F7): a launch id that is empty or holds a slash is put
// into the API's path as it is. The daemon keeps running, but agentbox says "307 Temporary
// Redirect … [internal]" (with the redirect's HTML) instead of naming the argument and the fix,
// and "../.." reaches another route of the daemon's API than the command's.
func TestBadLaunchIDSaysWhich(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	e.boxPlant("true")
	for _, args := range [][]string{{"changes", ""}, {"apply", "", "x"}, {"stop", ""}, {"revoke", ""}, {"changes", "../.."}, {"attach", ""}} {
		_, stderr, code := e.runAll(args...)
		if code != 125 || strings.Contains(stderr, "Redirect") || strings.Contains(stderr, "[internal]") || strings.Contains(stderr, "no such route") ||
			!strings.Contains(strings.ToLower(stderr), "launch id") {
			t.Errorf("agentbox %q: exit %d, %q; want a refusal naming the launch id", args, code, stderr)
		}
	}
	if _, err := e.cmd("launches").Output(); err != nil {
		t.Errorf("the daemon after the bad ids: %v", err)
	}
}

// TestHostProtectedEditKept (review 16, tried, holds): protected files are the box's staged copies or
// read-only binds, so a change of the host's own file while the box runs is the host's (the
// watch reports it as drift). Claude Code writes .claude/settings.local.json when the user
// answers "don't ask again", and ignores it in git; VS Code writes .vscode/settings.json, often
// ignored. The host edits both while a box runs; at exit the ignored-places rule, which does not
// leave protected paths out, must not move the user's own files out of the workspace.
func TestHostProtectedEditKept(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	files := map[string]string{
		".claude/settings.local.json": "{\"permissions\":{\"allow\":[]}}\n",
		".vscode/settings.json":       "{}\n",
	}
	for p, c := range files {
		write(t, filepath.Join(e.work, p), c)
	}
	ignoringRepo(t, e.work, ".claude/settings.local.json\n.vscode/\n")
	out := e.boxPlantDuring(`echo ready > `+syncFIFO+`; read go < `+syncFIFO+`; echo done`, func() {
		for p := range files {
			write(t, filepath.Join(e.work, p), "{\"edited\":\"by the host while the box ran\"}\n")
		}
	})
	if !strings.Contains(out, "done") {
		t.Fatalf("the box did not run:\n%s", out)
	}
	for p := range files {
		b, err := os.ReadFile(filepath.Join(e.work, p))
		if err != nil || !strings.Contains(string(b), "by the host") {
			t.Errorf("the host's own %s, edited on the host while the box ran: %q, %v; want the host's edit in place\nthe box said:\n%s", p, b, err, out)
		}
	}
}

// TestAttackIgnoredOpenFileAfterReview (review 16, F4, without F1's name): two boxes on one
// workspace. Box B writes bin/tool (ignored) and ends: its check at exit moves the file into
// B's proposed changes by a rename, the inode unchanged. Box A, running beside it, opened
// bin/tool before B ended and keeps the descriptor. The user reviews agentbox changes B; A
// then writes through its descriptor, and ends. agentbox apply B bin/tool puts back A's
// content, which the user never saw.
func TestAttackIgnoredOpenFileAfterReview(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "bin/\n.a-has-it\n.reviewed\n")
	const benign, evil = "#!/bin/sh\necho fine\n", "#!/bin/sh\necho EVIL\n"
	var idB, reviewed string
	outA := e.boxPlantDuring(`(until [ -e bin/tool ]; do sleep 0.05; done; exec 3<>bin/tool; touch .a-has-it
until [ -e .reviewed ]; do sleep 0.05; done; printf '#!/bin/sh\necho EVIL\n' >&3; echo wrote) &
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`; wait`, func() {
		outB := e.boxPlant(`mkdir -p bin && printf '#!/bin/sh\necho fine\n' > bin/tool && chmod +x bin/tool && until [ -e .a-has-it ]; do sleep 0.05; done; echo planted`)
		if !strings.Contains(outB, "planted") {
			t.Errorf("box B's plant failed (the test would prove nothing):\n%s", outB)
		}
		for _, l := range e.launches() {
			if l.State != api.StateRunning && l.State != api.StateStarting {
				idB = l.ID
			}
		}
		reviewed = e.run("changes", idB)
		write(t, filepath.Join(e.work, ".reviewed"), "")
	})
	if !strings.Contains(outA, "wrote") || !strings.Contains(reviewed, "echo fine") {
		t.Fatalf("the plant failed (the test would prove nothing): box A said:\n%s\nagentbox changes %s:\n%s", outA, idB, reviewed)
	}
	if got := e.run("apply", idB, "bin/tool"); !strings.Contains(got, "applied bin/tool") {
		t.Fatalf("agentbox apply %s bin/tool: %q", idB, got)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "bin", "tool")); string(b) != benign {
		t.Errorf("agentbox apply put back bin/tool holding %q (box A wrote %q through its descriptor), not what agentbox changes showed the user:\n%s", b, evil, reviewed)
	}
}

// TestHostWorktreeEditKept (review 16, F9): a linked worktree kept inside the workspace, in a
// folder the workspace's .gitignore ignores (.worktrees/, a common layout). The user edits a
// tracked file of that worktree on the host while a box runs in the main worktree. The
// ignored-places rule lists .worktrees/ as ignored (the top's git sees a nested repository
// there) and takes every file in it whose ctime is in the launch: the user's own source file
// is moved out of their worktree at the box's exit (git -C .worktrees/feature status: deleted).
// It must stay.
func TestHostWorktreeEditKept(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "app.go"), "package main\n\nfunc main() {}\n")
	ignoringRepo(t, e.work, ".worktrees/\n")
	git(t, e.work, "worktree", "add", "-q", ".worktrees/feature", "-b", "feature")
	src := filepath.Join(e.work, ".worktrees", "feature", "app.go")
	const edit = "package main\n\n// the user's work on the feature branch\nfunc main() {}\n"
	out := e.boxPlantDuring(`echo ready > `+syncFIFO+`; read go < `+syncFIFO+`; echo done`, func() {
		write(t, src, edit)
	})
	if !strings.Contains(out, "done") {
		t.Fatalf("the box did not run:\n%s", out)
	}
	if b, err := os.ReadFile(src); err != nil || string(b) != edit {
		st, _ := hostGit(filepath.Join(e.work, ".worktrees", "feature"), "status", "--porcelain")
		t.Errorf("the user's .worktrees/feature/app.go, edited on the host while the box ran: %q, %v; want the user's edit in place (git status there: %q)\nthe end of the run said:\n%s", b, err, st, out)
	}
}

// TestAttackWorkspaceVimConfig (review 16, F6): ~/.vim, a user's vim configuration kept in git
// ("fix my vim config"), is accepted as a workspace. The box adds plugin/x.vim; git status
// shows "?? plugin/x.vim", and the user's next vim, anywhere (opening that very file to review
// it, say), runs it: vim loads every plugin/*.vim of ~/.vim at start. The launch must be
// refused (exit 125), as ~/.config is, or the host's vim must not run it.
func TestAttackWorkspaceVimConfig(t *testing.T) {
	t.Parallel()
	vim, err := exec.LookPath("vim")
	if err != nil {
		t.Skip("vim not installed")
	}
	e := newDaemonEnv(t)
	ws := filepath.Join(e.home, ".vim")
	write(t, filepath.Join(ws, "vimrc"), "set number\n")
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "my vim config")
	mark, _ := e.marker("vim-plugin")
	out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
		fmt.Sprintf(`mkdir -p plugin && echo "call writefile([], '%s')" > plugin/x.vim && echo planted`, mark))
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if !strings.Contains(out, "planted") {
		t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
	}
	c := exec.Command(vim, "-c", "qa!")
	c.Dir = e.work
	c.Env = append(os.Environ(), "HOME="+e.home, "TERM=dumb")
	c.Run()
	notRun(t, mark, "the host's vim (~/.vim/plugin/x.vim, written by a box whose workspace was ~/.vim)", out+stderr)
}

// TestAttackRefsRewrittenUnsaid (review 16, F10; docs/integrity.md names both as not covered):
// the branch-rewrite alert reads refs/heads only. "tag": the box moves the user's tag v1.0 to
// a commit with its Makefile (same message and date) and expires the reflogs; the host's
// git checkout v1.0 && make runs it. "stash": the user stashed a change to the Makefile; the
// box pops it, adds its own line, and stashes it again with the same message; git stash list
// is the same line, and the host's git stash pop && make runs the box's line. The end of the
// run must say that the tag or the stash was rewritten.
func TestAttackRefsRewrittenUnsaid(t *testing.T) {
	for name, c := range map[string]struct{ setup, plant, after string }{
		"tag": {
			setup: "tag",
			plant: `git update-ref refs/wip v1.0 && git symbolic-ref HEAD refs/wip && printf 'all:\n\t@echo BOX\n' > Makefile && git add Makefile && ` + boxGit + ` commit -q --amend --no-edit --date="$(git log -1 --format=%ad)" && git tag -f v1.0 refs/wip >/dev/null && git symbolic-ref HEAD refs/heads/main && git reset -q --hard main && git update-ref -d refs/wip && git reflog expire --expire=now --all && echo planted`,
			after: "git checkout -q v1.0 && make -s",
		},
		"stash": {
			setup: "stash",
			plant: `git stash pop -q && printf '\t@echo BOX\n' >> Makefile && ` + boxGit + ` stash push -q -m WIP && echo planted`,
			after: "git stash pop -q && make -s",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			write(t, filepath.Join(e.work, "Makefile"), "all:\n\t@echo HOST\n")
			git(t, e.work, "add", "Makefile")
			git(t, e.work, "commit", "-q", "-m", "the user's Makefile")
			if c.setup == "tag" {
				git(t, e.work, "tag", "v1.0")
			} else {
				write(t, filepath.Join(e.work, "Makefile"), "all:\n\t@echo HOST\n\t@echo WIP\n")
				git(t, e.work, "stash", "push", "-q", "-m", "WIP")
			}
			_, stderr, code := e.runAll("run", "sh", "--", "-c", c.plant)
			if code != 0 {
				t.Fatalf("run: exit %d: %s", code, stderr)
			}
			if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
				t.Fatalf("the plant left a trace in git status (the test would prove less): %q", st)
			}
			got, _ := exec.Command("sh", "-c", "cd "+e.work+" && "+c.after).CombinedOutput()
			if !strings.Contains(string(got), "BOX") {
				t.Fatalf("the host's %s: %q, want the box's line (the plant failed)", c.after, got)
			}
			if !strings.Contains(stderr, "agentbox: integrity alert: ") {
				t.Errorf("the box rewrote the %s and the host's %s ran its line (%q); the end of the run said no alert:\n%s", name, c.after, got, stderr)
			}
		})
	}
}
