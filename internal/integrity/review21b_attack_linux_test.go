package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestAttackAgentCommandForms (review 21b): the user's own Claude Code configuration
// (committed, protected: pinned at the top) runs a script of the project in a form the
// hook-script rule (integrity.(*resolver).hookScripts, agentCommands) does not read as a
// path, while Claude Code runs it at the start of every session:
//
//   - PythonModule: a project MCP server in .mcp.json started as a module, `python3 -m
//     tools.mcp` (Python's own way of running a package's module; the working directory is on
//     sys.path), which runs tools/mcp.py: the words are python3, -m, tools.mcp; tools.mcp has
//     no / and no script extension, and -m is no interpreter;
//   - CdThenScript: a project MCP server `sh -c "cd tools && sh mcp.sh"` (a server that
//     expects its own folder as working directory): mcp.sh is read beneath the top, where it is
//     absent (guarded there), and tools/mcp.sh stays ordinary work;
//   - GitTopLevel: a SessionStart hook `sh "$(git rev-parse --show-toplevel)/scripts/start.sh"`,
//     the repository's top written the way hooks did before $CLAUDE_PROJECT_DIR: the word after
//     the split is /scripts/start.sh, absolute, left out. (security.md names names built at run
//     time as not covered; this one is a fixed name, as $CLAUDE_PROJECT_DIR is.)
//
// A box rewrites the script as ordinary work; the host's next unboxed `claude -p` in the
// workspace runs it before any answer, without the user asking. It fails on main at 1bc81cd.
func TestAttackAgentCommandForms(t *testing.T) {
	t.Parallel()
	bin := claudeHost(t)
	// body is the script's one line (no single quote: the box writes it in one).
	sh := func(touch string) string { return touch }
	py := func(touch string) string {
		return fmt.Sprintf(`open("%s", "w").close()`, strings.TrimPrefix(touch, "touch "))
	}
	for _, c := range []struct {
		name, script string
		body         func(touch string) string
		config       map[string]string
	}{
		{"PythonModule", "tools/mcp.py", py, map[string]string{
			".claude/settings.json": `{"enableAllProjectMcpServers":true}`,
			".mcp.json":             `{"mcpServers":{"tools":{"command":"python3","args":["-m","tools.mcp"]}}}`}},
		{"CdThenScript", "tools/mcp.sh", sh, map[string]string{
			".claude/settings.json": `{"enableAllProjectMcpServers":true}`,
			".mcp.json":             `{"mcpServers":{"tools":{"command":"sh","args":["-c","cd tools && sh mcp.sh"]}}}`}},
		{"GitTopLevel", "scripts/start.sh", sh, map[string]string{
			".claude/settings.json": `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"sh \"$(git rev-parse --show-toplevel)/scripts/start.sh\""}]}]}}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hostClaudeRunsBoxScript(t, bin, c.config, c.script, c.body)
		})
	}
}

// TestAttackPathDirPastBound (review 21b): the check at exit takes into the proposed changes
// what a PATH search runs that the launch left in a folder the allowed .envrc puts on PATH
// (State.pathDirsChanged, review 21's fix of TestAttackDirenvPathAdd), but looks at only the
// first 100 000 names (maxPathDirEntries, since removed: every name is read now) of the folder, in the order the file system lists
// them, and says nothing of the rest. The box sees the same order (the same folder, the same
// file system): it adds an executable bin/git, then empty files until git is listed past the
// 100 000th name, and the check at exit never looks at it. The host's git, in the shell direnv
// set up, runs the box's. Want: the box's bin/git is not run (taken aside, or the folder
// refused as too large). It fails on main at 1bc81cd.
func TestAttackPathDirPastBound(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's plant")
	}
	e := newDaemonEnv(t)
	repo(t, e.work)
	dv := newDirenvHost(t, e.root)
	write(t, filepath.Join(e.work, ".envrc"), "PATH_add bin\n")
	write(t, filepath.Join(e.work, "bin/setup"), "#!/bin/sh\necho setup\n")
	os.Chmod(filepath.Join(e.work, "bin/setup"), 0o755)
	write(t, filepath.Join(e.work, ".gitignore"), "/bin/f*\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "bin")
	if out, err := dv.run(e.work, "allow", "."); err != nil {
		t.Fatalf("direnv allow: %v\n%s", err, out)
	}
	if out, err := dv.run(e.work, "exec", ".", "setup"); err != nil || !strings.Contains(out, "setup") {
		t.Fatalf("the host's direnv did not put bin/ on PATH (the test proves nothing): %v\n%s", err, out)
	}
	mark, touch := e.marker("box-git")
	out := e.boxPlant(fmt.Sprintf(`set -e
printf '#!/bin/sh\n%s\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git
python3 - <<'PY'
import os
os.chdir("bin")
n = 0
while os.listdir(".").index("git") <= 100000 and n < 1000000:
    for i in range(n, n + 20000):
        open("f%%07d" %% i, "w").close()
    n += 20000
print("git listed at", os.listdir(".").index("git"), "of", len(os.listdir(".")))
PY
echo planted`, touch))
	requirePlanted(t, out)
	t.Logf("the launch said:\n%s", out)
	got, _ := dv.run(e.work, "exec", ".", "git", "status", "--short", "--untracked-files=no")
	notRun(t, mark, "the host's git, in the shell direnv set up (direnv exec WS git status), bin/git listed past the check's bound:\n"+got, out)
}

// TestAttackGeminiMCPCwd (review 21b): the user's own .gemini/settings.json (committed,
// protected) starts a project MCP server from its own folder, as Gemini CLI's documentation
// of mcpServers shows ("cwd"): {"command": "sh", "args": ["mcp.sh"], "cwd": "tools"}. The
// hook-script rule (agentCommands) reads command and args, not cwd: it reads mcp.sh at the
// top (absent: guarded there), and tools/mcp.sh, which Gemini CLI runs, stays ordinary work.
// A box rewrites it; the host's next unboxed `gemini -p` in the (trusted) workspace starts the
// server before any answer. It fails on main at 1bc81cd.
func TestAttackGeminiMCPCwd(t *testing.T) {
	t.Parallel()
	bin := testenv.AgentCLI(t, "gemini")
	e := newDaemonEnv(t)
	repo(t, e.work)
	user, touchUser := e.marker("user-mcp")
	write(t, filepath.Join(e.work, ".gemini/settings.json"), `{"mcpServers":{"tools":{"command":"sh","args":["mcp.sh"],"cwd":"tools"}}}`+"\n")
	write(t, filepath.Join(e.work, "tools/mcp.sh"), touchUser+"\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "gemini mcp")
	home := filepath.Join(e.root, "gemini-home")
	write(t, filepath.Join(home, ".gemini/settings.json"), `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`+"\n")
	argv := []string{bin, "-p", "hi"}
	// The API at an address where nothing listens; the workspace trusted, as the user's own
	// project is (GEMINI_CLI_TRUST_WORKSPACE, Gemini CLI's headless form of that trust).
	env := []string{"GEMINI_API_KEY=test", "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9", "GEMINI_CLI_TRUST_WORKSPACE=true"}
	first := runAgentUntilEnv(t, argv, env, e.work, home, user)
	if _, err := os.Lstat(user); err != nil {
		t.Fatalf("the host's Gemini CLI did not start the user's MCP server (the test proves nothing):\n%s", first)
	}
	os.Remove(user)
	mark, touch := e.marker("box-mcp")
	out := e.boxPlant(fmt.Sprintf(`printf '%%s\n' '%s' > tools/mcp.sh && echo planted`, touch))
	requirePlanted(t, out)
	if _, err := os.Lstat(mark); err == nil {
		t.Fatalf("the box created the host's marker itself: the test cannot tell host from box\n%s", out)
	}
	g := runAgentUntilEnv(t, argv, env, e.work, home, mark, user)
	notRun(t, mark, "the host's unboxed Gemini CLI (gemini -p, its MCP server: sh mcp.sh in tools):\n"+g, out)
}
