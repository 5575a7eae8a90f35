package integrity

import (
	"encoding/json"
	"os"
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
// workspace's top (agentCommandFiles), and the text of its .envrc, each read only when it is
// protected (pinned itself, or in a pinned folder: a file the box may write names nothing the
// host trusts), through the bounded, no-follow reader.
func (r *resolver) agentTexts() (out []string, envrc *hookText) {
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
			envrc = &hookText{text: envrcText(b), dir: ".", envrc: true}
			r.lay.PathDirs = append(r.lay.PathDirs, r.envrcPathDirs(b, ".")...)
			continue
		}
		out = append(out, agentCommands(rel, b)...)
	}
	return out, envrc
}

// maxAllowedEnvrcs bounds how many of direnv's allow files are read, and maxEnvrcTexts how
// many allowed .envrc files beneath the workspace (other than the top's) are followed.
const (
	maxAllowedEnvrcs = 10000
	maxEnvrcTexts    = 64
)

// subEnvrcs pins the .envrc files beneath the workspace, other than the top's (agentTexts),
// that the host's direnv runs: those the user allowed (direnvAllowed) and those a whitelist of
// direnv's configuration names exactly (direnvWhitelist); and returns their texts, each with
// its folder (direnv runs an .envrc in its own folder: what it sources and puts on PATH is
// relative to it), for hookScripts, and adds the folders they put on PATH to the layout's
// PathDirs. Review 32, F5: only the top's was read, so a monorepo's svc/api/.envrc (or a
// linked worktree's) sourced .envrc.local and put bin/ on PATH from files a box wrote. When the
// workspace lies beneath a whitelisted prefix, direnv runs every .envrc in it without an allow:
// a new or changed one anywhere is moved aside by the workspace scan (EnvrcWhitelisted; without
// a whitelist it is reported), but what the existing ones in subfolders source is not known
// without reading every folder.
func (r *resolver) subEnvrcs() []hookText {
	prefix, exact := direnvWhitelist()
	for _, p := range prefix {
		if within(r.ws, p) || within(p, r.ws) {
			r.lay.EnvrcWhitelisted = true
			r.note("the workspace lies beneath %s, which direnv's configuration whitelists: direnv runs any .envrc in it without an allow (one a box writes or changes is moved aside by the workspace scan); what an existing one in a subfolder sources is not pinned", p)
			break
		}
	}
	var out []hookText
	seen := map[string]bool{".envrc": true}
	for _, p := range append(exact, direnvAllowed()...) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			p = filepath.Join(p, ".envrc")
		}
		rel, in := r.beneathLinked(filepath.Clean(p))
		if !in || filepath.Base(rel) != ".envrc" || seen[rel] {
			continue
		}
		seen[rel] = true
		if len(seen) > maxEnvrcTexts+1 {
			r.note("more than %d allowed .envrc files beneath the workspace: %s and later ones are not followed", maxEnvrcTexts, filepath.Join(r.ws, rel))
			break
		}
		r.protect(rel, false)
		b, err := r.fs.read(rel, maxCheckedFile)
		if err != nil {
			continue
		}
		dir := filepath.Dir(rel)
		out = append(out, hookText{text: envrcText(b), dir: dir, envrc: true})
		r.lay.PathDirs = append(r.lay.PathDirs, r.envrcPathDirs(b, dir)...)
	}
	return out
}

// direnvAllowed returns the paths of the .envrc files the user allowed (direnv allow): direnv
// keeps a file per allowed .envrc in $XDG_DATA_HOME/direnv/allow (~/.local/share by default),
// named by the hash of the path and the text it allowed, holding the path. An allowed file
// whose text changed no longer matches its hash, and direnv refuses it, but what it sources
// and puts on PATH is read at every cd without a new allow.
func direnvAllowed() []string {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		dir = filepath.Join(home, ".local", "share")
	}
	f, err := os.Open(filepath.Join(dir, "direnv", "allow"))
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(maxAllowedEnvrcs)
	var out []string
	for _, n := range names {
		b, err := readFollow(filepath.Join(f.Name(), n), 4096)
		if err != nil {
			continue
		}
		if p := strings.TrimSpace(string(b)); filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

// direnvWhitelist returns the [whitelist] of direnv's configuration ($DIRENV_CONFIG, else
// $XDG_CONFIG_HOME/direnv or ~/.config/direnv; direnv.toml or config.toml): the prefixes
// beneath which it runs any .envrc without an allow, and the exact ones ("~" expanded).
func direnvWhitelist() (prefix, exact []string) {
	dir := os.Getenv("DIRENV_CONFIG")
	if dir == "" {
		base := os.Getenv("XDG_CONFIG_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, nil
			}
			base = filepath.Join(home, ".config")
		}
		dir = filepath.Join(base, "direnv")
	}
	for _, n := range []string{"direnv.toml", "config.toml"} {
		b, err := readFollow(filepath.Join(dir, n), maxCheckedFile)
		if err != nil {
			continue
		}
		var c struct {
			Whitelist struct {
				Prefix []string `toml:"prefix"`
				Exact  []string `toml:"exact"`
			} `toml:"whitelist"`
		}
		if toml.Unmarshal(b, &c) != nil {
			continue
		}
		for _, p := range c.Whitelist.Prefix {
			if v, ok := expandHome(p); ok && filepath.IsAbs(v) {
				prefix = append(prefix, filepath.Clean(v))
			}
		}
		for _, p := range c.Whitelist.Exact {
			if v, ok := expandHome(p); ok && filepath.IsAbs(v) {
				exact = append(exact, filepath.Clean(v))
			}
		}
	}
	return prefix, exact
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

// envrcCommands splits a line of an .envrc into the shell's simple commands, as far as a
// PATH folder's name goes: at ;, &&, ||, |, ( ) { } and the keywords that begin a command (then,
// do, else): `[ -d bin ] && PATH_add bin`, `if …; then PATH_add bin; fi` (review 32 C, F1).
var envrcCommands = regexp.MustCompile(`;|&&|\|\||\||[(){}]|\b(then|do|else)\b`)

// envrcPathSelf matches what a PATH assignment keeps of PATH itself ($PATH, ${PATH},
// ${PATH:+:$PATH}), dropped before its folders are read.
var envrcPathSelf = regexp.MustCompile(`\$\{PATH[^}]*\}|\$PATH\b`)

// envrcExpandPath matches direnv's $(expand_path DIR), the folder DIR relative to the .envrc's.
var envrcExpandPath = regexp.MustCompile(`\$\(\s*expand_path\s+["']?([^)"'\s$]+)["']?\s*\)`)

// envrcPathDirs returns the workspace-relative folders beneath the workspace (the workspace's
// top included) that an .envrc in the folder dir (workspace-relative) puts first on the
// shell's PATH, comment lines left out, in every simple command of a line (envrcCommands):
// PATH_add DIR…, path_add PATH DIR…, load_prefix DIR (DIR/bin), and each assignment PATH=… or
// PATH+=… (after export or not, beside other assignments) of folders written relative to the
// .envrc's folder or through it ($PWD/x, ${PWD}/x, $(pwd)/x: projectDir; $(expand_path x)), what it keeps of PATH
// itself dropped (review 32 F4, C F1). A folder that is a symlink beneath the workspace is
// followed: the folder it leads to is one too (review 32 C, F2). Other names built at run time
// ($VAR, $(…)) are not among them.
func (r *resolver) envrcPathDirs(b []byte, dir string) []string {
	var out []string
	add := func(w string) {
		w = strings.NewReplacer(`"`, "", "'", "").Replace(w)
		if w == "" || strings.ContainsAny(w, "$`*?[;&|") || filepath.IsAbs(w) {
			return
		}
		p := filepath.Join(r.ws, dir, w)
		rel, err := filepath.Rel(r.ws, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || slices.Contains(out, rel) {
			return
		}
		out = append(out, rel)
		if k, err := r.fs.kind(rel); err == nil && k == KindSymlink {
			if t, err := r.fs.follow(rel); err == nil && within(t, r.ws) {
				if trel, err := filepath.Rel(r.ws, t); err == nil && !slices.Contains(out, trel) {
					out = append(out, trel)
				}
			}
		}
	}
	assign := func(w string) bool {
		v, ok := strings.CutPrefix(w, "PATH=")
		if !ok {
			v, ok = strings.CutPrefix(w, "PATH+=")
		}
		if ok {
			for _, e := range strings.Split(v, ":") {
				add(e)
			}
		}
		return ok
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		line = envrcExpandPath.ReplaceAllString(line, "./$1")
		line = envrcPathSelf.ReplaceAllString(projectDir.ReplaceAllString(line, "./"), "")
		for _, cmd := range envrcCommands.Split(line, -1) {
			f := strings.Fields(cmd)
			for len(f) > 0 && (f[0] == "if" || f[0] == "!" || f[0] == "export" || f[0] == "declare" || f[0] == "local" || f[0] == "-x") {
				f = f[1:]
			}
			switch {
			case len(f) > 1 && f[0] == "PATH_add":
				for _, w := range f[1:] {
					add(w)
				}
			case len(f) > 2 && f[0] == "path_add" && f[1] == "PATH":
				for _, w := range f[2:] {
					add(w)
				}
			case len(f) > 1 && f[0] == "load_prefix":
				add(filepath.Join(strings.Trim(f[1], `"'`), "bin"))
			default:
				for _, w := range f {
					if !assign(w) && !strings.Contains(w, "=") {
						break // the command's name: what follows are its arguments
					}
				}
			}
		}
	}
	return out
}
