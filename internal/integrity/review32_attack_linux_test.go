package integrity_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// review32Hook is a hook script that touches the marker.
func review32Hook(touch string) string {
	return fmt.Sprintf("printf '#!/bin/sh\\n%s\\n'", touch)
}

// nestedHooksRepo makes ws a repository with one commit, and ws/nested a repository of its own
// with a hk/ folder and one commit, configured by config before it; it returns ws/nested.
func nestedHooksRepo(t *testing.T, ws string, config func(nested string)) string {
	git(t, ws, "init", "-q", "-b", "main")
	write(t, filepath.Join(ws, "a"), "a\n")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "a")
	nested := filepath.Join(ws, "nested")
	os.Mkdir(nested, 0o755)
	git(t, nested, "init", "-q", "-b", "main")
	os.Mkdir(filepath.Join(nested, "hk"), 0o755)
	config(nested)
	write(t, filepath.Join(nested, "n"), "n\n")
	git(t, nested, "add", "n")
	git(t, nested, "commit", "-q", "-m", "n")
	return nested
}

// TestAttackWorkTreeHooksPath (review 32, F1–F3): a relative core.hooksPath names a folder of
// each work tree git runs in, not only of the workspace's top. The resolver pinned it at the
// top alone, and the scan read a nested repository's value only when its configuration
// changed, so a hook a box wrote into the folder of another work tree ran at the host's next
// git commit there: a linked worktree beneath the workspace (the layout docs/integrity.md
// recommends), a workspace that is itself a linked worktree of a repository elsewhere, a
// submodule (with the user's relative value), and a nested repository's own value. Each fails
// without the change (resolver.fromConfig per work tree; hooksPathDirs in the scan).
func TestAttackWorkTreeHooksPath(t *testing.T) {
	t.Parallel()
	needGit(t)
	type setup struct {
		global string // the user's git configuration's text, if any
		// prepare makes the workspace ws (the folder the box runs in); it returns the folder
		// the host commits in and the box's path of the hook to plant, relative to ws.
		prepare func(t *testing.T, root, ws string) (commitIn, hook string)
	}
	hooksRepo := func(t *testing.T, dir string) {
		git(t, dir, "init", "-q", "-b", "main")
		write(t, filepath.Join(dir, ".githooks", "pre-commit"), "#!/bin/sh\nexit 0\n")
		os.Chmod(filepath.Join(dir, ".githooks", "pre-commit"), 0o755)
		write(t, filepath.Join(dir, "a"), "a\n")
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "initial")
		git(t, dir, "config", "core.hooksPath", ".githooks")
	}
	for name, c := range map[string]setup{
		"linked-worktree-beneath": {prepare: func(t *testing.T, root, ws string) (string, string) {
			hooksRepo(t, ws)
			git(t, ws, "worktree", "add", "-q", ".worktrees/feat", "-b", "feat")
			write(t, filepath.Join(ws, ".git", "info", "exclude"), ".worktrees/\n")
			return filepath.Join(ws, ".worktrees", "feat"), ".worktrees/feat/.githooks/pre-commit"
		}},
		"workspace-is-linked-worktree": {prepare: func(t *testing.T, root, ws string) (string, string) {
			main := filepath.Join(root, "mainrepo")
			os.Mkdir(main, 0o755)
			hooksRepo(t, main)
			git(t, main, "worktree", "add", "-q", ws, "-b", "feat")
			return ws, ".githooks/pre-commit"
		}},
		"submodule-user-hookspath": {global: "[core]\n\thooksPath = .githooks\n", prepare: func(t *testing.T, root, ws string) (string, string) {
			src := filepath.Join(root, "subsrc")
			os.Mkdir(src, 0o755)
			git(t, src, "init", "-q", "-b", "main")
			write(t, filepath.Join(src, "s"), "s\n")
			git(t, src, "add", "-A")
			git(t, src, "commit", "-q", "-m", "s")
			git(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, "a"), "a\n")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-q", "-m", "a")
			git(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "sub")
			git(t, ws, "commit", "-q", "-m", "sub")
			return filepath.Join(ws, "sub"), "sub/.githooks/pre-commit"
		}},
		"nested-repo-hookspath-by-include": {prepare: func(t *testing.T, root, ws string) (string, string) {
			// Review 32 C, F3: the value set through an include of the nested repository's config.
			return nestedHooksRepo(t, ws, func(nested string) {
				write(t, filepath.Join(nested, ".git", "hooks.conf"), "[core]\n\thooksPath = hk\n")
				git(t, nested, "config", "include.path", "hooks.conf")
			}), "nested/hk/pre-commit"
		}},
		"nested-repo-own-hookspath": {prepare: func(t *testing.T, root, ws string) (string, string) {
			return nestedHooksRepo(t, ws, func(nested string) { git(t, nested, "config", "core.hooksPath", "hk") }), "nested/hk/pre-commit"
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			global := "/dev/null"
			if c.global != "" {
				global = filepath.Join(e.home, ".gitconfig")
				write(t, global, c.global)
			}
			commitIn, hook := c.prepare(t, e.root, e.work)
			mark, touch := e.marker("hook")
			// A hooks folder that is pinned is bound read-only: the write fails in the box (a
			// protected folder is not staged); one that is absent is guarded. Either way the host
			// must not run a hook of the box's; without the change the plant succeeds and the
			// host's commit runs it.
			out := e.boxPlant(fmt.Sprintf("mkdir -p %s && { %s > %s && chmod +x %s && echo planted; } || echo refused",
				filepath.Dir(hook), review32Hook(touch), hook, hook))
			// Or the guard took the absent folder the box made (sub/.githooks), so the write
			// found no folder: the launch's end says so.
			if !strings.Contains(out, "planted") && !strings.Contains(out, "Read-only file system") &&
				!(strings.Contains(out, "refused") && strings.Contains(out, "proposed")) {
				t.Fatalf("the plant neither completed nor met a read-only folder (the test would prove nothing):\n%s", out)
			}
			if _, err := os.Lstat(mark); err == nil {
				t.Fatalf("the box created the host's marker itself: the test cannot tell host from box\n%s", out)
			}
			res, err := hostGitUser(commitIn, global, "commit", "-q", "--allow-empty", "-m", "host")
			notRun(t, mark, "the host's git commit in "+commitIn+":\n"+res, out)
			if err != nil && !strings.Contains(res, "hook") {
				t.Errorf("the host's git commit failed: %v\n%s", err, res)
			}
		})
	}
}

// TestAttackSubfolderEnvrc (review 32, F4–F5): only the top's .envrc was read for what direnv
// runs by a path, and only its PATH_add and path_add PATH lines for the folders it puts on
// PATH. An allowed .envrc in a subfolder (a monorepo's service, a linked worktree) sourced a
// file a box wrote and put a folder the box filled on PATH; and the top's `export
// PATH="$PWD/scripts:$PATH"` and `load_prefix tools` put scripts/ and tools/bin/ on PATH, whose
// box-written git the host's direnv exec ran. The allowed subfolder .envrc files are read from
// direnv's allow folder now, each from its own folder, and the PATH forms are read.
func TestAttackSubfolderEnvrc(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		envrc, dir, plant string // the allowed .envrc's folder and text; the box's script
	}{
		"subfolder-source-and-path": {dir: "svc/api", envrc: "source_env_if_exists .envrc.local\nPATH_add bin\n",
			plant: "printf '%%s\\n' '%[1]s' > svc/api/.envrc.local; mkdir -p svc/api/bin; printf '#!/bin/sh\\n%[1]s\\n' > svc/api/bin/git; chmod +x svc/api/bin/git"},
		// Review 32 C, F1: the usual idiom, whose ${PATH:+:$PATH} the first parser dropped whole.
		"top-path-idiom": {dir: ".", envrc: "export PATH=$PWD/scripts${PATH:+:$PATH}\n",
			plant: "printf '#!/bin/sh\\n%[1]s\\n' > scripts/git; chmod +x scripts/git"},
		"top-path-forms": {dir: ".", envrc: "export PATH=\"$PWD/scripts:$PATH\"\nload_prefix tools\n",
			plant: "mkdir -p scripts tools/bin; for f in scripts/git tools/bin/git; do printf '#!/bin/sh\\n%[1]s\\n' > $f; chmod +x $f; done"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			dv := newDirenvHost(t, e.root)
			// The daemon reads the user's allows where direnv keeps them for its HOME.
			data := filepath.Join(e.home, ".local", "share")
			for i, v := range dv.env {
				if strings.HasPrefix(v, "XDG_DATA_HOME=") {
					dv.env[i] = "XDG_DATA_HOME=" + data
				}
			}
			git(t, e.work, "init", "-q", "-b", "main")
			write(t, filepath.Join(e.work, c.dir, ".envrc"), c.envrc)
			for _, d := range []string{"scripts", "tools", "svc/api/bin"} {
				write(t, filepath.Join(e.work, d, ".keep"), "")
			}
			git(t, e.work, "add", "-A")
			git(t, e.work, "commit", "-q", "-m", "envrc")
			if out, err := dv.run(filepath.Join(e.work, c.dir), "allow", "."); err != nil {
				t.Fatalf("direnv allow: %v\n%s", err, out)
			}
			mark, touch := e.marker("envrc")
			out := e.boxPlant(fmt.Sprintf(c.plant, touch) + " && echo planted")
			requirePlanted(t, out)
			if _, err := os.Lstat(mark); err == nil {
				t.Fatalf("the box created the host's marker itself\n%s", out)
			}
			res, err := dv.run(filepath.Join(e.work, c.dir), "exec", ".", "git", "--version")
			notRun(t, mark, "the host's direnv exec . git --version:\n"+res, out)
			if err != nil {
				t.Errorf("the host's direnv exec failed: %v\n%s", err, res)
			}
		})
	}
}

// TestAttackCommittedProtectedFile (review 32 C, F6): a box commits its edit of a protected
// file. The host's file keeps its content (the box's write went to its staged copy), but the
// branch holds the box's, and the host's next git stash, checkout or reset --hard writes it
// into the work tree, where the host's direnv runs it. The end of the run names the file and
// how to restore it in the branch; before, a commit that moved the branch forward was ordinary
// work, and nothing was said.
func TestAttackCommittedProtectedFile(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work) // .envrc is tracked and protected
	was := strings.TrimSpace(git(t, e.work, "rev-parse", "main"))
	_, stderr, code := e.runAll("run", "sh", "--", "-c", `echo 'export BOX=1' >> .envrc && git add .envrc && `+boxGit+` commit -qm edit && echo planted`)
	if code != 0 || !strings.Contains(stderr+git(t, e.work, "log", "-1", "--format=%s"), "edit") {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, ".envrc")); strings.Contains(string(b), "BOX") {
		t.Fatalf("the box's edit reached the host's .envrc itself: %q", b)
	}
	for _, want := range []string{"agentbox: integrity alert: ", ".envrc", "new commits (" + was + "..", "change this protected file", "git checkout " + was + " -- '.envrc'"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the end of the run lacks %q:\n%s", want, stderr)
		}
	}
	// Staged, not committed: the host's index holds the box's version, which the user's next
	// git commit takes.
	_, stderr, code = e.runAll("run", "sh", "--", "-c", `echo 'export BOX=2' >> .claude/settings.json && git add .claude/settings.json && echo planted`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if st := git(t, e.work, "status", "--porcelain", "--", ".claude/settings.json"); !strings.HasPrefix(st, "M") {
		t.Fatalf("the box's git add did not stage its version in the host's index (the test would prove nothing): %q", st)
	}
	for _, want := range []string{"agentbox: integrity alert: ", ".claude/settings.json", "holds another version of this protected file", "restore --staged -- '.claude/settings.json'"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the end of the run lacks %q:\n%s", want, stderr)
		}
	}
	git(t, e.work, "restore", "--staged", ".claude/settings.json")
	// Review 32 E: what the first version, which trusted the entry's mtime (the box writes it)
	// and skipped entries with no file of their kind on the host, missed: update-index
	// --cacheinfo (mtime 0) of an edit, of a new file in a protected folder, of a symlink in
	// place of a file, and --chmod of a hook. And a user's unstaged edit of a protected file
	// in the launch's own second is no alert (E, F8).
	write(t, filepath.Join(e.work, ".github/workflows/ci.yml"), "on: push # the user's edit, not staged\n")
	_, stderr, code = e.runAll("run", "sh", "--", "-c", `set -e
B=$(echo 'export EVIL=1' | cat .envrc - | git hash-object -w --stdin)
git update-index --cacheinfo 100644,$B,.envrc
N=$(echo 'on: push' | git hash-object -w --stdin)
git update-index --add --cacheinfo 100644,$N,.github/workflows/new.yml
L=$(printf ../notes/s.json | git hash-object -w --stdin)
git update-index --cacheinfo 120000,$L,proj.code-workspace
git update-index --chmod=+x .claude/settings.json
echo planted`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	for _, p := range []string{".envrc", ".github/workflows/new.yml", "proj.code-workspace", ".claude/settings.json"} {
		if !strings.Contains(stderr, "restore --staged -- '"+p+"'") {
			t.Errorf("the end of the run does not name the staged %s:\n%s", p, stderr)
		}
	}
	if strings.Contains(stderr, "restore --staged -- '.github/workflows/ci.yml'") {
		t.Errorf("the user's own unstaged edit was taken for a staged version:\n%s", stderr)
	}
	// Review 32 E, F6: a stash entry the box stores holding its edit of a protected file, which
	// the user's git stash pop would write into the work tree.
	git(t, e.work, "reset", "-q")
	git(t, e.work, "checkout", "--", ".github/workflows/ci.yml")
	_, stderr, code = e.runAll("run", "sh", "--", "-c", `set -e
echo '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"id"}]}]}}' > .claude/settings.json
S=$(`+boxGit+` stash create)
git stash store -m "WIP on main" $S
echo planted`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "stored while the box ran, changes this protected file") || !strings.Contains(stderr, "git stash show -p") {
		t.Errorf("the end of the run does not name the box's stash entry holding .claude/settings.json:\n%s", stderr)
	}
	git(t, e.work, "stash", "drop", "-q")
	// Review 32 F: a protected file taken out of the index and a symlink staged at the folder
	// on its way (after the user's next commit and reset, .claude leads to the box's folder);
	// a stash entry whose untracked-files commit (^3) holds a new .mcp.json; a stash reflog
	// padded past 1 MiB so that its newest entry was not read.
	_, stderr, code = e.runAll("run", "sh", "--", "-c", `set -e
git rm --cached -q .claude/settings.json
L=$(printf evil | git hash-object -w --stdin)
git update-index --add --cacheinfo 120000,$L,.claude
H=$(git rev-parse HEAD); T=$(git rev-parse HEAD^{tree})
M=$(echo '{"mcpServers":{"x":{"command":"id"}}}' | git hash-object -w --stdin)
UT=$(printf "100644 blob $M\t.mcp.json\n" | git mktree)
U=$(`+boxGit+` commit-tree -m untracked $UT)
I=$(`+boxGit+` commit-tree -p $H -m index $T)
W=$(`+boxGit+` commit-tree -p $H -p $I -p $U -m "WIP on main" $T)
mkdir -p .git/logs/refs
i=0; while [ $i -lt 1100 ]; do printf '%s %s x <x@example.org> 1 +0000\t%01000d\n' $H $H 0; i=$((i+1)); done > .git/logs/refs/stash
printf '%s %s x <x@example.org> 2 +0000\tWIP on main\n' $H $W >> .git/logs/refs/stash
git update-ref --no-deref refs/stash $W
echo planted`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"no longer holds this protected file", "restore --staged -- '.claude'", "stored while the box ran, changes this protected file"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the end of the run lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stderr, ".mcp.json") {
		t.Errorf("the end of the run does not name the .mcp.json of the stash entry's untracked files:\n%s", stderr)
	}
}
