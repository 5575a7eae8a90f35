package integrity

import (
	"encoding/json"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/tidwall/jsonc"
)

// agentCommandFiles are the protected (plan.WorkspaceProtected, the built-in profiles'
// workspaceConfig) configuration files, workspace-relative, whose commands the host's next
// unboxed agent or editor session runs by itself, without the user asking: Claude Code's
// settings (hooks, statusLine, apiKeyHelper and the other helpers) and project MCP servers,
// OpenCode's local MCP servers, Codex's MCP servers and notify, Gemini CLI's MCP servers,
// hooks and tool discovery, VS Code's tasks and MCP servers, Cursor's MCP servers and hooks,
// Windsurf's hooks, Copilot CLI's settings and hooks (agentCommandDirs). hookScripts reads
// them (agentTexts) for the scripts they run by a path.
var agentCommandFiles = []string{
	".claude/settings.json",
	".claude/settings.local.json",
	".mcp.json",
	"opencode.json",
	"opencode.jsonc",
	".codex/config.toml",
	".gemini/settings.json",
	".vscode/tasks.json",
	".vscode/mcp.json",
	".cursor/mcp.json",
	".cursor/hooks.json",
	".windsurf/hooks.json",
	".github/copilot/settings.json",
	".github/copilot/settings.local.json",
}

// agentCommandDirs are protected folders each of whose JSON files is such configuration:
// Copilot CLI's repository hooks (.github/hooks/*.json: a hook's bash command).
var agentCommandDirs = []string{".github/hooks"}

// agentCommandKeys are the keys whose value (a string, or an array of words: OpenCode's
// command, Codex's notify) is a command line an agent or an editor runs; agentArgKeys those
// whose words follow a command in the same object (an MCP server's args).
var (
	agentCommandKeys = []string{"command", "bash", "notify", "apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper", "discoveryCommand", "callCommand"}
	agentArgKeys     = []string{"args"}
)

// agentCommands returns the command lines of an agent's configuration file name (JSON, JSONC
// or TOML) with the text b: at any depth, each object's command keys (agentCommandKeys), the
// one named "command" followed by the object's args, as one line each, after `cd CWD &&` when
// the object names its folder (commandCwd) (the project's folder as a variable read as ./:
// commandWords); none when it cannot be
// read (the agent refuses it as well). Keys at other places than the agents' own (a
// "command" in a permission rule) only pin more.
func agentCommands(name string, b []byte) (out []string) {
	// The file may be a box's (in a subfolder): a parser's panic must not end the daemon.
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	var doc any
	if path.Ext(name) == ".toml" {
		if toml.Unmarshal(b, &doc) != nil {
			return nil
		}
	} else if json.Unmarshal(jsonc.ToJSON(b), &doc) != nil {
		return nil
	}
	var walk func(any, int)
	walk = func(v any, depth int) {
		if depth > maxCommandDepth {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range agentCommandKeys {
				c, ok := v[k]
				if !ok {
					continue
				}
				line := commandWords(c)
				if k == "command" {
					for _, a := range agentArgKeys {
						line = append(line, commandWords(v[a])...)
					}
				}
				if cwd := commandCwd(v); len(line) > 0 && len(cwd) > 0 {
					line = append([]string{"cd", cwd[0], "&&"}, line...)
				}
				if len(line) > 0 {
					out = append(out, strings.Join(line, " "))
				}
			}
			for _, e := range v {
				walk(e, depth+1)
			}
		case []any:
			for _, e := range v {
				walk(e, depth+1)
			}
		}
	}
	walk(doc, 0)
	return out
}

// commandCwd returns the words of the folder an object's command runs in, when it names one:
// an MCP server's "cwd" (Gemini CLI, VS Code, Codex), a task's "options": {"cwd": …} (VS
// Code), a hook's "cwd" (Copilot CLI); agentCommands reads the command line as `cd CWD && …`,
// which hookPaths follows.
func commandCwd(v map[string]any) []string {
	c, ok := v["cwd"].(string)
	if o, isMap := v["options"].(map[string]any); !ok && isMap {
		c, ok = o["cwd"].(string)
	}
	if !ok || c == "" {
		return nil
	}
	return commandWords(c)
}

// projectDir matches the variable an agent or an editor sets to the project's folder at the
// head of a path ("$CLAUDE_PROJECT_DIR"/scripts/x.sh, ${workspaceFolder}/x.sh, as their
// documentation writes a hook's or a task's script), with the quotes around it, and the
// shell's forms of the folder a command runs in ($PWD, ${PWD}, $(pwd), `pwd`) and of the
// repository's top ($(git rev-parse --show-toplevel)): read as ./.
var projectDir = regexp.MustCompile(`"?(\$\{?(CLAUDE_PROJECT_DIR|GEMINI_PROJECT_DIR|workspaceFolder|workspaceRoot|PWD)\}?|\$\(\s*pwd\s*\)|` + "`pwd`" + `|\$\(\s*git\s+rev-parse\s+--show-toplevel\s*\))"?/`)

// commandWords returns the words of a command's value (a string, or an array of them: words),
// the project's folder written as a variable read as ./ first (projectDir).
func commandWords(v any) []string {
	switch v := v.(type) {
	case string:
		return words(projectDir.ReplaceAllString(v, "./"))
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, commandWords(e)...)
		}
		return out
	}
	return words(v)
}

// maxCommandDepth bounds how deep agentCommands looks for commands in a configuration.
const maxCommandDepth = 16

// envrcFileWords are direnv's stdlib functions that read a file of the workspace, by its path
// relative to the .envrc's folder: the first two run it as bash (followed in turn), the
// others read it as a dotenv file (a variable such as BASH_ENV or PATH changes what the
// user's shell runs next). source_up and source_up_if_exists read a file above the folder
// (outside the workspace); a source_env of a folder reads its .envrc, which the workspace
// scan finds.
var envrcFileWords = []string{"source_env", "source_env_if_exists", "dotenv", "dotenv_if_exists"}

// envrcDotenvDefault matches a line calling dotenv or dotenv_if_exists without a file: direnv
// reads .env then.
var envrcDotenvDefault = regexp.MustCompile(`(?m)^[ \t]*(dotenv|dotenv_if_exists)[ \t]*(;.*)?$`)

// envrcText returns the text of the top's .envrc as a hook's text: the file the user allowed
// with `direnv allow` runs, at the shell's next cd into the workspace, what it sources by a
// path (. x, source x, source_env x, dotenv x: hookInterpreters), and the .env a bare dotenv
// reads.
func envrcText(b []byte) string {
	return envrcDotenvDefault.ReplaceAllString(string(b), "$1 .env $2")
}

// agentTexts returns the command lines of the protected agent and editor configuration at the
// workspace's top (agentCommandFiles) and the text of its .envrc, each read only when it is
// protected (pinned itself, or in a pinned folder: a file the box may write names nothing the
// host trusts), through the bounded, no-follow reader.
func (r *resolver) agentTexts() []string {
	var out []string
	files := append(slices.Clone(agentCommandFiles), ".envrc")
	for _, d := range agentCommandDirs {
		if k, err := r.fs.kind(d); err != nil || k != KindDir {
			continue
		}
		names, _ := readDirNames(filepath.Join(r.ws, d))
		for _, n := range names {
			if path.Ext(n) == ".json" {
				files = append(files, filepath.Join(d, n))
			}
		}
	}
	for _, rel := range files {
		if !r.pinnedFile(rel) {
			continue
		}
		b, err := r.fs.read(rel, maxCheckedFile)
		if err != nil {
			continue
		}
		if rel == ".envrc" {
			out = append(out, envrcText(b))
			r.lay.PathDirs = r.envrcPathDirs(b)
			continue
		}
		out = append(out, agentCommands(rel, b)...)
	}
	return out
}

// pinnedFile reports whether the file rel (a symlink followed beneath the workspace, as the
// reader does) is pinned, itself or as part of a pinned folder.
func (r *resolver) pinnedFile(rel string) bool {
	p, err := r.fs.follow(rel)
	if err != nil {
		return false
	}
	trel, err := filepath.Rel(r.ws, p)
	if err != nil {
		return false
	}
	return r.prot[p] || r.pinnedBeneath(trel)
}

// envrcPathDirs returns the workspace-relative folders beneath the workspace (the workspace's
// top included) that an .envrc's PATH_add DIR… or path_add PATH DIR… puts first on the
// shell's PATH, comment lines left out; names built at run time ($VAR, $(…)) are not among
// them.
func (r *resolver) envrcPathDirs(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "PATH_add":
			f = f[1:]
		case len(f) > 2 && f[0] == "path_add" && f[1] == "PATH":
			f = f[2:]
		default:
			continue
		}
		for _, w := range f {
			w = strings.Trim(w, `"'`)
			if w == "" || strings.ContainsAny(w, "$`*?[;&|") || filepath.IsAbs(w) {
				continue
			}
			p := filepath.Join(r.ws, w)
			if rel, err := filepath.Rel(r.ws, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	return out
}
