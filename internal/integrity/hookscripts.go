package integrity

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/pelletier/go-toml/v2"
	"github.com/tidwall/jsonc"
)

// maxHookScripts bounds the files hookScripts pins, and maxHookScriptDepth how far it follows
// what a pinned script names in turn.
const (
	maxHookScripts     = 256
	maxHookScriptDepth = 4
)

// hookScriptExts are the extensions of a file a hook may name without a folder (sh check.sh,
// node lint.mjs): such a word counts when it names a file at the top.
var hookScriptExts = []string{".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".py", ".rb", ".pl"}

// hookScripts pins the files the host's git hooks run by naming their path, which a box could
// otherwise rewrite as ordinary work for the host's next git commit to run (a protected
// .husky/pre-commit that runs ./scripts/check.sh): every word of a hook's commands that is a
// relative path (relative to the repository's top, where git runs its hooks) of a file beneath
// the workspace, outside node_modules (the box's own, never the host's), that the hook runs
// (hookPaths: after an interpreter, with a script's extension, or executable) is protected
// like any protected path (staged: the box's edit becomes a proposed change), or guarded while
// absent. The commands are those of the hooks git runs (the files of the
// repository's hooks folder in its common dir and of every core.hooksPath folder), the run
// commands of lefthook's configuration (hooksText, from lefthook), the entries of
// pre-commit's local hooks, the commands of the agents' and editors' protected configuration
// at the top, which their next unboxed session runs by itself (agentTexts: Claude Code's hooks
// and MCP servers, OpenCode's, Codex's, Gemini CLI's, VS Code's tasks, …), the top's allowed
// .envrc (what it sources: source_env, dotenv, `.`), and the part of the top's package.json an
// installed hook or those commands read (packageHooks: the hook keys and the npm scripts they
// name, transitively). What a pinned shell script, or a file a text sources, names by the same
// rule is pinned too, maxHookScriptDepth deep. Not covered, for none of
// it can be told from the text: names built at run time ($VAR, $(…), globs, run-s "lint:*"),
// paths relative to a script's own folder, the files a program finds by itself (a Makefile,
// a linter's JavaScript configuration, the modules a script imports).
func (r *resolver) hookScripts() {
	var texts []hookText
	top := func(ts ...string) {
		for _, t := range ts {
			texts = append(texts, hookText{text: t, dir: "."})
		}
	}
	top(r.hookTexts...)
	folders := r.hookDirs
	if common, ok := r.commonRel(); ok {
		folders = append(folders, filepath.Join(common, "hooks"))
	}
	var hookWords []string
	for _, d := range folders {
		for _, t := range r.folderTexts(d) {
			top(t)
			hookWords = append(hookWords, words(t)...)
		}
	}
	// The hook managers' commands (lefthook's run, pre-commit's local entries): scripts by
	// their path, and the npm scripts they name (run: npm run lint).
	managed := slices.Clone(r.hookTexts)
	if b, err := r.fs.read(".pre-commit-config.yaml", maxCheckedFile); err == nil {
		managed = append(managed, managerCommands(".pre-commit-config.yaml", b)...)
	}
	// The commands of the agents' and editors' protected configuration and the top's .envrc
	// (agentTexts), which the host's next unboxed session runs by itself: scripts by their
	// path, and the npm scripts they name (a SessionStart hook's npm run setup).
	agent, envrc := r.agentTexts()
	managed = append(managed, agent...)
	top(managed[len(r.hookTexts):]...)
	for _, t := range managed {
		hookWords = append(hookWords, words(t)...)
	}
	// The top's .envrc, and the allowed .envrc files of subfolders, each read from its own
	// folder.
	if envrc != nil {
		texts = append(texts, *envrc)
		hookWords = append(hookWords, words(envrc.text)...)
	}
	texts = append(texts, r.subEnvrcs()...)
	if b, err := r.fs.read("package.json", maxCheckedFile); err == nil {
		if part, _, err := packageHooks(b, hookWords); err == nil && part != "" {
			var v any
			json.Unmarshal([]byte(part), &v)
			top(strings.Join(words(v), " "))
		}
	}
	seen := map[string]bool{}
	pinned := 0
	for depth := 0; len(texts) > 0 && depth <= maxHookScriptDepth; depth++ {
		var next []hookText
		for _, t := range texts {
			for _, h := range r.hookPaths(t.text, t.dir) {
				rel := h.rel
				if seen[rel] || pinned >= maxHookScripts {
					continue
				}
				seen[rel] = true
				pinned++
				r.protect(rel, false)
				if b, err := r.fs.read(rel, maxCheckedFile); err == nil && (h.sourced || shellScript(rel, b)) {
					nt := hookText{text: string(b), dir: t.dir, envrc: t.envrc && h.sourced}
					if filepath.Base(rel) == ".envrc" && h.sourced {
						// source_env DIR: direnv runs DIR/.envrc in DIR.
						nt.dir = filepath.Dir(rel)
					}
					if nt.envrc {
						// What an .envrc sources runs in its shell: the folders it puts on
						// PATH count as the .envrc's own (review 32 C, F1: source_env
						// .envrc.shared holding PATH_add bin).
						nt.text = envrcText(b)
						r.lay.PathDirs = append(r.lay.PathDirs, r.envrcPathDirs(b, nt.dir)...)
					}
					next = append(next, nt)
				}
			}
		}
		texts = next
	}
	if pinned >= maxHookScripts {
		r.note("the git hooks name more than %d files: those after them are not pinned", maxHookScripts)
	}
}

// hookInterpreters are the programs whose next word a hook runs as a script (sh x, node x, . x),
// direnv's stdlib words that read a file (envrcFileWords) among them; hookSourcing those that
// run it in the shell itself, whose file is a shell script whatever its name (.envrc.local).
var (
	hookInterpreters = append([]string{".", "source", "sh", "bash", "dash", "zsh", "ksh", "node", "deno", "bun", "tsx", "ts-node", "python", "python3", "ruby", "perl", "exec"}, envrcFileWords...)
	hookSourcing     = []string{".", "source", "source_env", "source_env_if_exists"}
)

// hookText is a text hookScripts reads (a hook, a configuration's commands, an .envrc), with
// the workspace-relative folder it runs in, from which its relative paths are read: the top
// for git's hooks and the agents' configuration, an .envrc's own folder.
type hookText struct {
	text, dir string
	// envrc says direnv runs the text in its shell: an .envrc, or what one sources.
	envrc bool
}

// hookPath is a workspace-relative path a hook's text runs; sourced when it is read by the
// shell itself (. x, source_env x), so a shell script whatever its name.
type hookPath struct {
	rel     string
	sourced bool
}

// hookPaths returns the workspace-relative paths a hook's text runs (hookScripts' rule),
// comment lines left out: a word that is a relative path beneath the workspace (outside
// node_modules) and names a file the hook runs: one after an interpreter (sh x, node x, . x),
// one with a script's extension, or an executable file; absent, one after an interpreter, with
// a script's extension, or ./NAME without an extension. A file the hook only reads
// ([ -f ./package.json ], require("./package.json")) is not one. A Python module run as
// `python3 -m MOD` (or `uv run -m MOD`) names MOD with its dots as slashes, + .py and
// /__main__.py, and the __init__.py of each package above it. After a `cd DIR` in the line
// (`cd tools && sh mcp.sh`, an MCP server's cwd: agentCommands), a relative path is read from
// DIR as well as from the top; the project's folder written as a variable or as the shell's
// $PWD, $(pwd) or $(git rev-parse --show-toplevel) is read as ./ (projectDir).
func (r *resolver) hookPaths(text, dir string) []hookPath {
	var out []hookPath
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		ws := words(projectDir.ReplaceAllString(line, "./"))
		dirs := []string{filepath.Join(r.ws, dir)} // the folders a relative path is read from: the text's, and a cd's
		for i, w := range ws {
			if i > 0 && ws[i-1] == "cd" && !strings.HasPrefix(w, "-") {
				d := w
				if !filepath.IsAbs(d) {
					d = filepath.Join(dirs[len(dirs)-1], d)
				}
				if len(dirs) < 8 {
					dirs = append(dirs, d)
				} else {
					dirs[len(dirs)-1] = d
				}
				continue
			}
			if filepath.IsAbs(w) || strings.HasPrefix(w, "-") || strings.Contains(w, "://") {
				continue
			}
			run := i > 0 && slices.Contains(hookInterpreters, path.Base(ws[i-1]))
			cands := []string{w}
			if i > 1 && ws[i-1] == "-m" && slices.ContainsFunc(ws[:i-1], pythonRunner) {
				cands = pythonModuleFiles(w)
				run = true
			}
			script := slices.Contains(hookScriptExts, path.Ext(w))
			if !strings.Contains(w, "/") && !script && !run {
				continue
			}
			sourced := i > 0 && slices.Contains(hookSourcing, ws[i-1])
			for _, d := range dirs {
				for _, c := range cands {
					rel, ok := r.beneath(filepath.Join(d, c))
					if !ok || slices.Contains(strings.Split(rel, "/"), "node_modules") || r.pinnedBeneath(rel) {
						continue
					}
					k, err := r.fs.kind(rel)
					if err == nil && k == KindDir && sourced && i > 0 && strings.HasPrefix(ws[i-1], "source_env") {
						// source_env DIR runs DIR/.envrc (review 32 C, F5).
						rel = filepath.Join(rel, ".envrc")
						k, err = r.fs.kind(rel)
					}
					switch {
					case err != nil:
					case k == KindFile && (run || script || executable(filepath.Join(r.ws, rel))):
						out = append(out, hookPath{rel, sourced})
					case k == KindAbsent && (run || script || strings.HasPrefix(w, "./") && path.Ext(w) == ""):
						out = append(out, hookPath{rel, sourced})
					}
				}
			}
		}
	}
	return out
}

// pythonRunner reports whether the word w runs Python with its -m: python, python3, python3.12,
// or uv (uv run -m MOD).
func pythonRunner(w string) bool {
	b := path.Base(w)
	return b == "uv" || b == "python" || strings.HasPrefix(b, "python3")
}

// pythonModuleFiles returns the files `python -m mod` runs for the module name mod
// (pkg.tool): pkg/tool.py, pkg/tool/__main__.py, and pkg/__init__.py (and
// pkg/tool/__init__.py), which the import runs first; none for a name that is no module's.
func pythonModuleFiles(mod string) []string {
	parts := strings.Split(mod, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, "/:@") {
			return nil
		}
	}
	f := strings.Join(parts, "/")
	out := []string{f + ".py", f + "/__main__.py", f + "/__init__.py"}
	for i := 1; i < len(parts); i++ {
		out = append(out, strings.Join(parts[:i], "/")+"/__init__.py")
	}
	return out
}

// executable reports whether the file p (no symlink followed) has an execute bit.
func executable(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// shellScript reports whether the file rel, whose text is b, is a shell script (by its
// extension or its #! line): the paths it names are relative to the folder it runs in, the
// repository's top for a hook's script. Another language's relative paths are its own
// (a module's import, relative to the module's folder): not followed.
func shellScript(rel string, b []byte) bool {
	if bytes.Contains(b[:min(len(b), 8192)], []byte{0}) {
		return false
	}
	switch path.Ext(rel) {
	case ".sh", ".bash", ".zsh":
		return true
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return false
	}
	f := strings.Fields(string(line[2:]))
	if len(f) > 1 && path.Base(f[0]) == "env" {
		f = f[1:]
	}
	return len(f) > 0 && slices.Contains([]string{"sh", "bash", "dash", "zsh", "ksh"}, path.Base(f[0]))
}

// pinnedBeneath reports whether rel lies in a folder already pinned (a hooks folder).
func (r *resolver) pinnedBeneath(rel string) bool {
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if r.prot[filepath.Join(r.ws, d)] {
			return true
		}
	}
	return false
}

// folderTexts returns the texts of the hooks in the folder rel (but samples). A file of any
// other name is read, one a check moved aside included: the launch begins with no record of
// what was moved (State.Aside), a name is no mark (a box chooses its names, review 16, F1), and
// a text read in excess only pins more.
func (r *resolver) folderTexts(rel string) []string {
	if k, err := r.fs.kind(rel); err != nil || k != KindDir {
		return nil
	}
	names, err := readDirNames(filepath.Join(r.ws, rel))
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sample") {
			continue
		}
		if b, err := r.fs.read(filepath.Join(rel, n), maxCheckedFile); err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// managerCommands returns the commands a git hook manager's configuration file name (a
// lefthook config, YAML, JSON or TOML, or .pre-commit-config.yaml) runs: lefthook's run
// commands, the entries (with their args) of pre-commit's local hooks; none when it cannot be
// read.
func managerCommands(name string, b []byte) (out []string) {
	// The file may be a box's (in a subfolder): a parser's panic must not end the daemon. A
	// text its parser cannot read runs nothing (the hook manager refuses it as well).
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	if path.Base(name) == ".pre-commit-config.yaml" {
		var cfg struct {
			Repos []struct {
				Repo  string `yaml:"repo"`
				Hooks []struct {
					Entry string   `yaml:"entry"`
					Args  []string `yaml:"args"`
				} `yaml:"hooks"`
			} `yaml:"repos"`
		}
		if yaml.Unmarshal(b, &cfg) != nil {
			return nil
		}
		for _, rp := range cfg.Repos {
			if rp.Repo != "local" {
				continue
			}
			for _, h := range rp.Hooks {
				out = append(out, h.Entry+" "+strings.Join(h.Args, " "))
			}
		}
		return out
	}
	var doc any
	switch path.Ext(name) {
	case ".toml":
		toml.Unmarshal(b, &doc)
	case ".jsonc":
		yaml.Unmarshal(jsonc.ToJSON(b), &doc) // as lefthook reads JSONC
	default:
		yaml.Unmarshal(b, &doc)
	}
	return lefthookRuns(doc)
}

// lefthookRuns returns the run commands of a lefthook configuration document (any value of a
// key "run", at any depth: commands, jobs, groups).
func lefthookRuns(doc any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "run" {
					out = append(out, s)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return out
}
