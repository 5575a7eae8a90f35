package integrity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/profile"
)

// TestHookScriptsPinned: the files the host's hooks name by their path are protected (pinned,
// or guarded while absent), from every place hookScripts reads commands: the hooks folder, a
// core.hooksPath folder, lefthook's run commands (YAML and TOML), pre-commit's local entries,
// package.json's hook part (npm scripts named in turn) and what a named script names; words
// that are no path of the workspace are not.
func TestHookScriptsPinned(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\thooksPath = .husky\n")
	mustWrite(t, filepath.Join(ws, ".git/hooks/pre-push"), "#!/bin/sh\n./scripts/push.sh \"$@\"\n")
	mustWrite(t, filepath.Join(ws, ".husky/pre-commit"), "#!/bin/sh\n# sh scripts/commented.sh\nsh scripts/check.sh --fix >/dev/null\nnpm test\nnode node_modules/x/y.js\n$HOME/bin/z.sh\n[ -f ./package.json ] && grep -q x conf/settings.json\nsh tools/noext\n./tools/exe\n")
	mustWrite(t, filepath.Join(ws, "lefthook.yml"), "pre-commit:\n  commands:\n    a:\n      run: bash tools/a.sh {staged_files}\n  jobs:\n    - run: ./absent.sh\n    - run: npm run --silent fmt\n")
	mustWrite(t, filepath.Join(ws, "lefthook-local.toml"), "[pre-commit.commands.b]\nrun = \"python3 tools/b.py\"\n")
	mustWrite(t, filepath.Join(ws, ".pre-commit-config.yaml"), "repos:\n  - repo: local\n    hooks:\n      - id: c\n        entry: tools/c.rb\n        language: script\n  - repo: https://git.example.org/x/y\n    hooks:\n      - id: d\n        entry: tools/d.sh\n")
	mustWrite(t, filepath.Join(ws, "package.json"), `{"scripts":{"test":"npm run unit","unit":"node test/run.mjs","build":"node tools/build.js","fmt":"sh tools/fmt"}}`)
	for _, f := range []string{"scripts/push.sh", "scripts/commented.sh", "tools/a.sh", "tools/b.py", "tools/c.rb", "tools/d.sh", "tools/build.js", "node_modules/x/y.js", "test/lib.sh"} {
		mustWrite(t, filepath.Join(ws, f), "true\n")
	}
	mustWrite(t, filepath.Join(ws, "scripts/check.sh"), "#!/bin/sh\n. test/lib.sh\n")
	mustWrite(t, filepath.Join(ws, "conf/settings.json"), "{}\n")
	mustWrite(t, filepath.Join(ws, "tools/noext"), "true\n")
	mustWrite(t, filepath.Join(ws, "tools/fmt"), "true\n")
	mustWrite(t, filepath.Join(ws, "tools/exe"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "tools/exe"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "test/run.mjs"), "import './helper.mjs'\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "scripts/push.sh", "scripts/check.sh", "test/lib.sh", "tools/a.sh", "absent.sh", "tools/b.py", "tools/c.rb", "test/run.mjs", "tools/noext", "tools/exe", "tools/fmt")
	got := pinnedRels(lay)
	for _, f := range []string{"scripts/commented.sh", "tools/d.sh", "tools/build.js", "node_modules/x/y.js", "helper.mjs", "bin/z.sh", "package.json", "conf/settings.json"} {
		if got[f] {
			t.Errorf("%s is pinned: no hook runs it by that path", f)
		}
	}
}

// TestHookScriptsAgentConfig: the scripts the agents' and editors' protected configuration
// runs by its path (agentTexts: Claude Code's hooks, statusLine, apiKeyHelper and project MCP
// servers, OpenCode's local MCP servers in JSONC, Codex's MCP servers and notify, Gemini CLI's
// MCP servers and hooks, VS Code's tasks (per-OS ones too), Copilot CLI's .github/hooks/*.json, the project folder as a variable
// ("$CLAUDE_PROJECT_DIR"/x, ${workspaceFolder}/x)) and those the top's .envrc reads
// (source_env, source_env_if_exists, dotenv, a bare dotenv's .env, `.`, and what a sourced
// file sources in turn) are pinned, or guarded while absent, and so are the npm scripts'
// scripts a hook of theirs names; a configuration file that is not protected names nothing,
// and source_up's file lies above the workspace.
func TestHookScriptsAgentConfig(t *testing.T) {
	set, err := profile.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := newWS(t)
	files := map[string]string{
		".claude/settings.json":       `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"sh scripts/session.sh"}]}],"PostToolUse":[{"matcher":"Edit","hooks":[{"type":"command","command":"npm run fmt"}]}]},"statusLine":{"type":"command","command":"./tools/status"},"permissions":{"allow":["Bash(ls)"]}}`,
		".claude/settings.local.json": `{"apiKeyHelper":"bash tools/key.sh","hooks":{"Stop":[{"hooks":[{"type":"command","command":"\"$CLAUDE_PROJECT_DIR\"/hooks/stop.py"},{"type":"command","command":"node \"${CLAUDE_PROJECT_DIR}/hooks/stop2.js\""}]}]}}`,
		".mcp.json":                   `{"mcpServers":{"a":{"command":"node","args":["tools/mcp-a.js","--port","1"]}}}`,
		"opencode.jsonc":              "{\n  // local servers\n  \"mcp\": {\"b\": {\"type\": \"local\", \"command\": [\"python3\", \"tools/mcp_b.py\"],},},\n}\n",
		".codex/config.toml":          "notify = [\"sh\", \"tools/notify.sh\"]\n[mcp_servers.c]\ncommand = \"bash\"\nargs = [\"tools/mcp-c\"]\n",
		".gemini/settings.json":       `{"mcpServers":{"d":{"command":"sh","args":["tools/mcp-d"]}},"hooks":{"BeforeTool":[{"hooks":[{"type":"command","command":"./tools/gemini-hook.sh"}]}]}}`,
		".vscode/tasks.json":          `{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"sh","args":["tools/task.sh"],"runOptions":{"runOn":"folderOpen"}},{"label":"y","command":"${workspaceFolder}/tools/task2.sh","linux":{"command":"bash","args":["tools/task-linux.sh"]}}]}`,
		".envrc":                      "source_env_if_exists .envrc.local\nsource_env envs/dev.sh\ndotenv_if_exists\ndotenv conf/extra.env\n. tools/env.sh\nsource_up .envrc\n",
		"envs/dev.sh":                 "source_env envs/more.sh\n",
		"package.json":                `{"scripts":{"fmt":"sh tools/fmt.sh","other":"sh tools/other.sh"}}`,
		".github/hooks/start.json":    `{"version":1,"hooks":{"sessionStart":[{"type":"command","bash":"./scripts/copilot-start.sh","powershell":"x.ps1"}]}}`,
		".claude/other.json":          `{"command":"sh tools/unprotected.sh"}`,
	}
	for f, b := range files {
		mustWrite(t, filepath.Join(ws, f), b+"\n")
	}
	for _, f := range []string{"scripts/session.sh", "tools/key.sh", "tools/mcp-a.js", "tools/mcp_b.py", "tools/notify.sh", "tools/mcp-c", "tools/mcp-d", "tools/gemini-hook.sh", "tools/task.sh", "tools/task2.sh", "tools/task-linux.sh", "hooks/stop.py", "hooks/stop2.js", "scripts/copilot-start.sh", "envs/more.sh", "conf/extra.env", "tools/env.sh", "tools/fmt.sh", "tools/other.sh", "tools/unprotected.sh"} {
		mustWrite(t, filepath.Join(ws, f), "true\n")
	}
	lay, err := Resolve(ws, set.WorkspaceConfig())
	if err != nil {
		t.Fatal(err)
	}
	wantPinned(t, lay, "scripts/session.sh", "tools/status", "tools/key.sh", "tools/mcp-a.js", "tools/mcp_b.py", "tools/notify.sh", "tools/mcp-c", "tools/mcp-d", "tools/gemini-hook.sh", "tools/task.sh",
		"tools/task2.sh", "tools/task-linux.sh", "hooks/stop.py", "hooks/stop2.js", "scripts/copilot-start.sh", ".envrc.local", "envs/dev.sh", "envs/more.sh", ".env", "conf/extra.env", "tools/env.sh", "tools/fmt.sh")
	got := pinnedRels(lay)
	for _, f := range []string{"tools/other.sh", "tools/unprotected.sh", "package.json"} {
		if got[f] {
			t.Errorf("%s is pinned: no protected configuration runs it", f)
		}
	}
}

// TestHookScriptsCommandForms: the forms of a command line that name a script other than by
// its path from the top (review 21b): a Python module run with -m, a cd within the line, an
// MCP server's or a task's cwd, and the shell's forms of the top ($PWD, $(pwd),
// $(git rev-parse --show-toplevel)).
func TestHookScriptsCommandForms(t *testing.T) {
	set, err := profile.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	ws := newWS(t)
	files := map[string]string{
		".claude/settings.json": `{"hooks":{"SessionStart":[{"hooks":[` +
			`{"type":"command","command":"sh \"$(git rev-parse --show-toplevel)/scripts/top.sh\""},` +
			`{"type":"command","command":"bash $PWD/scripts/pwd.sh; sh ${PWD}/scripts/pwd2.sh; sh $(pwd)/scripts/pwd3.sh"},` +
			`{"type":"command","command":"cd hooks; sh semi.sh"}]}]}}`,
		".mcp.json": `{"mcpServers":{"a":{"command":"python3","args":["-m","tools.mcp"]},` +
			`"b":{"command":"sh","args":["-c","cd srv && sh run.sh && cd sub && sh deeper.sh"]},` +
			`"c":{"command":"uv","args":["run","-m","pkg"]}}}`,
		".gemini/settings.json": `{"mcpServers":{"g":{"command":"sh","args":["mcp.sh"],"cwd":"gem"}}}`,
		".vscode/tasks.json":    `{"version":"2.0.0","tasks":[{"label":"x","command":"sh","args":["task.sh"],"options":{"cwd":"${workspaceFolder}/vs"}}]}`,
		".codex/config.toml":    "[mcp_servers.c]\ncommand = \"node\"\nargs = [\"server.js\"]\ncwd = \"cx\"\n",
	}
	for f, b := range files {
		mustWrite(t, filepath.Join(ws, f), b+"\n")
	}
	for _, f := range []string{"scripts/top.sh", "scripts/pwd.sh", "scripts/pwd2.sh", "scripts/pwd3.sh", "hooks/semi.sh", "tools/mcp.py", "tools/__init__.py", "srv/run.sh", "srv/sub/deeper.sh", "pkg/__main__.py", "gem/mcp.sh", "vs/task.sh", "cx/server.js", "other/mcp.py"} {
		mustWrite(t, filepath.Join(ws, f), "true\n")
	}
	lay, err := Resolve(ws, set.WorkspaceConfig())
	if err != nil {
		t.Fatal(err)
	}
	wantPinned(t, lay, "scripts/top.sh", "scripts/pwd.sh", "scripts/pwd2.sh", "scripts/pwd3.sh", "hooks/semi.sh", "tools/mcp.py", "tools/__init__.py", "srv/run.sh", "srv/sub/deeper.sh", "pkg/__main__.py", "gem/mcp.sh", "vs/task.sh", "cx/server.js")
	if pinnedRels(lay)["other/mcp.py"] {
		t.Errorf("other/mcp.py is pinned: nothing runs it")
	}
}
