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

	"github.com/agentbox/agentbox/internal/testenv"
)

// direnvHost runs the host's own direnv with a state of its own (its allow list), as the user's
// shell does on entering the workspace: `direnv exec WS CMD` loads WS's .envrc (which must have
// been allowed) and runs CMD in that environment.
type direnvHost struct {
	t   *testing.T
	env []string
}

func newDirenvHost(t *testing.T, root string) *direnvHost {
	t.Helper()
	if _, err := exec.LookPath("direnv"); err != nil {
		t.Skip("no direnv on PATH (apt-get install direnv): the attack needs the host's own direnv")
	}
	home := filepath.Join(root, "direnv-home")
	for _, d := range []string{home, filepath.Join(home, "data"), filepath.Join(home, "config")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &direnvHost{t: t, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"DIRENV_LOG_FORMAT=", "LANG=C.UTF-8"}}
}

func (d *direnvHost) run(dir string, args ...string) (string, error) {
	cmd := exec.Command("direnv", args...)
	cmd.Dir = dir
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAttackDirenvSourcedFile (review 21): the user's .envrc, allowed with `direnv allow`, does
// what direnv's own documentation suggests for machine-local settings: `source_env_if_exists
// .envrc.local`. The .envrc itself is protected (staged: a box's edit of it is a proposed
// change, and direnv would ask again anyway), but the file it sources is not: direnv checks
// the allow of .envrc alone, never of what it sources. A box writes .envrc.local; the host's
// direnv — what the user's shell runs on its own at every `cd` into the project, without the
// user asking — runs it, unboxed, as the user:
//
//   - while the box runs, whether .envrc.local is git-ignored or not;
//   - after the box ended, when .envrc.local is not git-ignored (an untracked file stays in
//     the workspace as work; no git command runs it, but direnv does at the next `cd`).
//
// security.md ("What remains") names this as not covered; the hook-script rule
// (integrity.(*resolver).hookScripts) already pins the files a hook runs by their path, and
// could read the allowed .envrc by the same rule (source_env, source_env_if_exists, dotenv,
// dotenv_if_exists, source, `.`). It fails on main at 13ae4ea.
func TestAttackDirenvSourcedFile(t *testing.T) {
	t.Parallel()
	for _, ignored := range []bool{true, false} {
		name := "untracked"
		if ignored {
			name = "ignored"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			dv := newDirenvHost(t, e.root)
			user, touchUser := e.marker("user-envrc")
			write(t, filepath.Join(e.work, ".envrc"), "source_env_if_exists .envrc.local\n"+touchUser+"\nexport A=1\n")
			if ignored {
				write(t, filepath.Join(e.work, ".gitignore"), ".envrc.local\n")
			}
			git(t, e.work, "add", "-A")
			git(t, e.work, "commit", "-q", "-m", "envrc")
			if out, err := dv.run(e.work, "allow", "."); err != nil {
				t.Fatalf("direnv allow: %v\n%s", err, out)
			}
			if out, err := dv.run(e.work, "exec", ".", "true"); err != nil {
				t.Fatalf("the host's direnv did not load the user's allowed .envrc (the test proves nothing): %v\n%s", err, out)
			}
			if _, err := os.Lstat(user); err != nil {
				t.Fatalf("the host's direnv did not run the user's .envrc (the test proves nothing)")
			}
			during, touchDuring := e.marker("envrc-local-during")
			var duringOut string
			// The box waits (5 s at most) for box-init's guard to take the file before the host's
			// direnv runs: the guard's reaction has a window (3–5 ms, tens under load;
			// docs/integrity.md, BenchmarkGuardWindow), which a direnv started at once raced and
			// won once in CI. Without the guard the file stays, and direnv runs it.
			out := e.boxPlantDuring(fmt.Sprintf(`printf '%%s\n' '%s' > .envrc.local && echo planted
i=0; while [ -e .envrc.local ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
echo ready > %s; read go < %s`, touchDuring, syncFIFO, syncFIFO), func() {
				duringOut, _ = dv.run(e.work, "exec", ".", "true")
			})
			requirePlanted(t, out)
			notRun(t, during, "the host's direnv (direnv exec WS true, as at the shell's cd) while the box ran:\n"+duringOut, out)
			after, touchAfter := e.marker("envrc-local-after")
			out = e.boxPlant(fmt.Sprintf(`printf '%%s\n' '%s' > .envrc.local && echo planted`, touchAfter))
			requirePlanted(t, out)
			afterOut, _ := dv.run(e.work, "exec", ".", "true")
			notRun(t, after, "the host's direnv (direnv exec WS true, as at the shell's cd) after the box ended:\n"+afterOut, out)
		})
	}
}

// claudeHost returns the real Claude Code CLI (testenv.AgentCLI), as the user's own unboxed
// install; the test is skipped without it, and in the root pass when the suites run again as an
// ordinary user: the CLI runs on the host, unboxed, the same for either.
func claudeHost(t *testing.T) string {
	t.Helper()
	return testenv.AgentCLI(t, "claude")
}

// runClaudeUntil starts the host's unboxed Claude Code in ws (`claude -p hi`, its own home, an
// API address where nothing listens: no model is reached, and none is needed, since a
// SessionStart hook runs before the first request) and ends it once one of the markers exists,
// or after 60 s. It returns what Claude Code printed.
func runClaudeUntil(t *testing.T, bin, ws, home string, markers ...string) string {
	t.Helper()
	return runAgentUntil(t, []string{bin, "-p", "hi"}, ws, home, markers...)
}

// runAgentUntil runs argv unboxed in ws as runClaudeUntil does.
func runAgentUntil(t *testing.T, argv []string, ws, home string, markers ...string) string {
	t.Helper()
	return runAgentUntilEnv(t, argv, nil, ws, home, markers...)
}

// runAgentUntilEnv is runAgentUntil with the variables env added to the agent's environment.
func runAgentUntilEnv(t *testing.T, argv, env []string, ws, home string, markers ...string) string {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ANTHROPIC_API_KEY=sk-ant-test",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	// A group of its own, killed whole: an agent that runs itself again in a child (Gemini
	// CLI) leaves that child holding the output open, and Wait waited for it (minutes).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer kill() // what the agent started and left
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return out.String()
		case <-deadline:
			kill()
			<-done
			return out.String()
		case <-tick.C:
			for _, m := range markers {
				if _, err := os.Lstat(m); err == nil {
					time.Sleep(300 * time.Millisecond) // the hook's command finishes
					kill()
					<-done
					return out.String()
				}
			}
		}
	}
}

// TestAttackClaudeHookScript (review 21): the user's own Claude Code configuration (committed,
// protected: pinned at the top) runs a script of the project by its path, as Claude Code's
// documentation shows: a SessionStart hook in .claude/settings.json, `sh
// scripts/session-start.sh`, or a project MCP server in .mcp.json, `sh tools/mcp.sh` (the
// settings' enableAllProjectMcpServers, or the user's approval of the server once, starts it
// in every session). The configuration is protected; the script it runs is not: a box
// rewrites it as ordinary work, and the host's next unboxed Claude Code session in the
// workspace runs it at its start, before any prompt is answered, without the user asking. The
// hook-script rule (integrity.(*resolver).hookScripts) pins the scripts git hooks, lefthook,
// pre-commit and package.json name by their path, but reads no agent's configuration: Claude
// Code's hooks, statusLine.command and MCP servers' commands, which the threat model's "next
// unboxed agent session" runs, are not among its sources. It fails on main at 13ae4ea.
func TestAttackClaudeHookScript(t *testing.T) {
	t.Parallel()
	bin := claudeHost(t)
	for _, c := range []struct {
		name, script string
		config       map[string]string
	}{
		{"SessionStart", "scripts/session-start.sh", map[string]string{
			".claude/settings.json": `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"sh scripts/session-start.sh"}]}]}}`}},
		{"ProjectMCPServer", "tools/mcp.sh", map[string]string{
			".claude/settings.json": `{"enableAllProjectMcpServers":true}`,
			".mcp.json":             `{"mcpServers":{"tools":{"command":"sh","args":["tools/mcp.sh"]}}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hostClaudeRunsBoxScript(t, bin, c.config, c.script, func(touch string) string { return touch })
		})
	}
}

// hostClaudeRunsBoxScript is the attack of the tests on scripts an agent's protected
// configuration runs: config (committed, protected) runs script, whose content body(touch)
// makes a marker; the host's unboxed Claude Code (bin) runs the user's script first (else the
// test proves nothing); a box rewrites the script as ordinary work; the host's next unboxed
// claude -p must not run the box's.
func hostClaudeRunsBoxScript(t *testing.T, bin string, config map[string]string, script string, body func(touch string) string) {
	e := newDaemonEnv(t)
	repo(t, e.work)
	user, touchUser := e.marker("user-script")
	for f, b := range config {
		write(t, filepath.Join(e.work, f), b+"\n")
	}
	write(t, filepath.Join(e.work, script), body(touchUser)+"\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "claude configuration")
	home := filepath.Join(e.root, "claude-home")
	first := runClaudeUntil(t, bin, e.work, home, user)
	if _, err := os.Lstat(user); err != nil {
		t.Fatalf("the host's Claude Code did not run the user's %s (the test proves nothing):\n%s", script, first)
	}
	os.Remove(user)
	mark, touch := e.marker("box-script")
	out := e.boxPlant(fmt.Sprintf(`printf '%%s\n' '%s' > %s && echo planted`, body(touch), script))
	requirePlanted(t, out)
	if _, err := os.Lstat(mark); err == nil {
		t.Fatalf("the box created the host's marker itself: the test cannot tell host from box\n%s", out)
	}
	cc := runClaudeUntil(t, bin, e.work, home, mark, user)
	notRun(t, mark, "the host's unboxed Claude Code (claude -p, at its start: "+script+"):\n"+cc, out)
}

// TestAttackDirenvPathAdd (review 21): the user's allowed .envrc puts a folder of the project
// first on PATH (`PATH_add bin`, direnv's own example, for a project's scripts kept in git).
// A box adds an executable bin/git there (untracked: git status lists it, nothing runs it);
// the host's shell, once direnv has loaded the folder's environment at the next `cd`, runs
// the box's git for the user's every `git`. security.md ("What remains") names folders an
// .envrc puts on PATH as not covered. It fails on main at 13ae4ea.
func TestAttackDirenvPathAdd(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	dv := newDirenvHost(t, e.root)
	write(t, filepath.Join(e.work, ".envrc"), "PATH_add bin\n")
	write(t, filepath.Join(e.work, "bin/setup"), "#!/bin/sh\necho setup\n")
	os.Chmod(filepath.Join(e.work, "bin/setup"), 0o755)
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "bin")
	if out, err := dv.run(e.work, "allow", "."); err != nil {
		t.Fatalf("direnv allow: %v\n%s", err, out)
	}
	if out, err := dv.run(e.work, "exec", ".", "setup"); err != nil || !strings.Contains(out, "setup") {
		t.Fatalf("the host's direnv did not put bin/ on PATH (the test proves nothing): %v\n%s", err, out)
	}
	mark, touch := e.marker("box-git")
	out := e.boxPlant(fmt.Sprintf(`printf '#!/bin/sh\n%s\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git && echo planted`, touch))
	requirePlanted(t, out)
	got, _ := dv.run(e.work, "exec", ".", "git", "status", "--short")
	notRun(t, mark, "the host's git, in the shell direnv set up (direnv exec WS git status):\n"+got, out)
}

// TestAttackOpenCodeMCPScript (review 21): the user's own opencode.json (committed, protected:
// pinned at the top) starts a local MCP server from a script of the project, `sh tools/mcp.sh`;
// OpenCode starts its local MCP servers at every start, with no trust question. A box rewrites
// tools/mcp.sh as ordinary work, and the host's next unboxed `opencode run` in the workspace
// runs it before any answer. The same gap as TestAttackClaudeHookScript: the hook-script rule
// reads no agent's configuration. It fails on main at 13ae4ea.
func TestAttackOpenCodeMCPScript(t *testing.T) {
	t.Parallel()
	bin := testenv.AgentCLI(t, "opencode")
	e := newDaemonEnv(t)
	repo(t, e.work)
	user, touchUser := e.marker("user-mcp")
	write(t, filepath.Join(e.work, "opencode.json"), `{"mcp":{"tools":{"type":"local","command":["sh","tools/mcp.sh"],"enabled":true}}}`+"\n")
	write(t, filepath.Join(e.work, "tools/mcp.sh"), touchUser+"\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "opencode mcp")
	home := filepath.Join(e.root, "opencode-home")
	argv := []string{bin, "run", "hi"}
	first := runAgentUntil(t, argv, e.work, home, user)
	if _, err := os.Lstat(user); err != nil {
		t.Fatalf("the host's OpenCode did not start the user's MCP server (the test proves nothing):\n%s", first)
	}
	os.Remove(user)
	mark, touch := e.marker("box-mcp")
	out := e.boxPlant(fmt.Sprintf(`printf '%%s\n' '%s' > tools/mcp.sh && echo planted`, touch))
	requirePlanted(t, out)
	if _, err := os.Lstat(mark); err == nil {
		t.Fatalf("the box created the host's marker itself: the test cannot tell host from box\n%s", out)
	}
	oc := runAgentUntil(t, argv, e.work, home, mark, user)
	notRun(t, mark, "the host's unboxed OpenCode (opencode run, its MCP server: sh tools/mcp.sh):\n"+oc, out)
}
