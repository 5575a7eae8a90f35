package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Finding is executable configuration found in the workspace: a git config with ExecKeys, or
// an .envrc.
type Finding struct {
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// ScanExec walks ws (bounded by lim.ScanDirs directories, without following symlinked
// folders) and returns its executable configuration outside the paths in skip (the protected
// roots, which the watch covers itself), by path: every git directory's config files and
// hooks (GitSurfaceFiles: nested repositories, bare ones, the gitdir a .git file points to
// within ws, submodule gitdirs at any depth and linked worktrees' gitdirs, also beneath the
// workspace's own .git), .git files and symlinks and commondir files that lead out of ws, and
// .envrc files. A config file that is a symlink is read through it as git reads it, as long as
// it stays beneath ws. notChecked is the number of folders found but not looked into because
// the bound was reached (0 when the scan is complete).
func ScanExec(ws string, skip map[string]bool, lim Limits) (found map[string]string, notChecked int) {
	lim = lim.withDefaults()
	out := map[string]string{}
	stack := []string{ws}
	visited := 0
	for len(stack) > 0 && visited < lim.ScanDirs {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visited++
		stack = append(stack, scanDir(ws, dir, skip, out)...)
	}
	return out, len(stack)
}

// scanDir records the findings of one directory's entries and returns its subdirectories to
// descend into (never into a .git directory: scanGitDir reads what counts in it).
func scanDir(ws, dir string, skip map[string]bool, out map[string]string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var sub []string
	hasHEAD, hasObjects, hasConfig := false, false, false
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		switch {
		case name == ".git" && de.IsDir():
			scanGitDir(ws, p, skip, out, 0)
			continue
		case name == ".git" && (de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0):
			// git follows a symlinked .git, to a gitdir or to a .git file.
			if gd, ok := dotGitTarget(ws, p); ok {
				scanGitDir(ws, gd, skip, out, 0)
			} else if t, far := dotGitOutside(ws, p); far && !skip[p] {
				// The gitdir lies where the scan does not look (the box cache, which boxes
				// write, persists and has the same path on the host): its config and hooks
				// are the box's to choose. A new or changed pointer is moved aside.
				out[p] = "git pointer (.git) leading out of the workspace to " + t
			}
		case name == ".envrc" && !skip[p]:
			if de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0 {
				out[p] = "direnv script (.envrc)"
			}
		case !de.IsDir() && !skip[p] && !skip[dir] && nestedConfig(filepath.Base(dir), name) != "":
			hashed(ws, p, nestedConfig(filepath.Base(dir), name), out)
		case name == "HEAD":
			hasHEAD = true
		case name == "objects" && de.IsDir():
			hasObjects = true
		case name == "config" && (de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0):
			hasConfig = true
		}
		if de.IsDir() && name != ".git" {
			sub = append(sub, p)
		}
	}
	if hasHEAD && hasObjects && hasConfig { // a bare repository
		scanGitDir(ws, dir, skip, out, 0)
	}
	return sub
}

// NestedConfigFile is a file of executable configuration that an agent or an editor reads
// from the folder it is started in or opens, which need not be the workspace's top: pinned
// there, found by the workspace scan elsewhere, and moved aside when new or changed.
type NestedConfigFile struct {
	// Dir is the base name of the folder it lies in ("" for any folder).
	Dir string
	// Name is its name, a filepath.Match pattern.
	Name string
	// Reads says who reads it and what it runs.
	Reads string
}

// NestedConfigFiles are the agents' and editors' executable configuration the scan looks for
// in every folder of the workspace.
var NestedConfigFiles = []NestedConfigFile{
	{"", ".mcp.json", "Claude Code's project MCP servers"},
	{".claude", "settings*.json", "Claude Code's project settings: hooks, MCP servers, permissions"},
	{".vscode", "tasks.json", "VS Code tasks (runOn: folderOpen runs one on opening)"},
	{".vscode", "settings.json", "VS Code settings (terminal profiles, tool paths)"},
	{".vscode", "launch.json", "VS Code launch configurations"},
	{".vscode", "mcp.json", "VS Code's MCP servers"},
	{".devcontainer", "devcontainer.json", "a dev container: initializeCommand runs on the host"},
	{"", ".devcontainer.json", "a dev container: initializeCommand runs on the host"},
	{"", "*.code-workspace", "a VS Code workspace: settings, tasks, launch configurations"},
	{"", ".npmrc", "npm's project configuration, in a folder with a package.json of its own (a nested project, a workspace package): script-shell runs at npm test"},
	{"", ".yarnrc", "yarn 1's configuration, read from the current folder and each one above: yarn-path runs another yarn"},
	{"", ".yarnrc.yml", "yarn's configuration, read from the current folder and each one above: yarnPath runs another yarn, plugins load"},
	{"", ".pnpmfile.cjs", "pnpm's hooks, at the root of a project of its own: run at install"},
	{".cargo", "config", "cargo's configuration, read from the current folder and each one above: build.rustc-wrapper, runners"},
	{".cargo", "config.toml", "cargo's configuration, read from the current folder and each one above: build.rustc-wrapper, runners"},
	{"", "rust-toolchain", "rustup's toolchain override, read from the current folder and each one above: a path toolchain runs at any cargo"},
	{"", "rust-toolchain.toml", "rustup's toolchain override, read from the current folder and each one above: a path toolchain runs at any cargo"},
	{"", "go.work", "Go's workspace file, read from the current folder and each one above: use and replace directives make go build and go run compile other code"},
}

// nestedConfig returns what reads the file name in a folder named dir, or "".
func nestedConfig(dir, name string) string {
	for _, f := range NestedConfigFiles {
		if ok, _ := filepath.Match(f.Name, name); ok && (f.Dir == "" || f.Dir == dir) {
			return f.Reads
		}
	}
	return ""
}

// hashed records the file at path as what, with a hash of its content so that a rewrite is a
// change (a symlink leading out of the workspace counts by itself).
func hashed(ws, path, what string, out map[string]string) {
	b, err := readBeneath(ws, path, 1<<20)
	switch {
	case errors.Is(err, errOutside):
		out[path] = what + " (a symlink leading out of the workspace)"
	case err == nil:
		sum := sha256.Sum256(b)
		out[path] = what + " (sha256 " + hex.EncodeToString(sum[:6]) + ")"
	}
}

// maxGitNesting bounds how deep scanGitDir follows modules/ and worktrees/ within gitdirs.
const maxGitNesting = 8

// scanGitDir records the executable configuration of one git directory: its config files
// (and its common dir's, when commondir points elsewhere beneath ws), its hooks, and those of
// the submodule gitdirs (modules/**) and linked worktrees' gitdirs (worktrees/*) beneath it.
func scanGitDir(ws, gd string, skip map[string]bool, out map[string]string, depth int) {
	if depth > maxGitNesting {
		return
	}
	for _, f := range GitDirConfigFiles {
		checkConfig(ws, filepath.Join(gd, f), skip, out)
	}
	checkHooks(ws, filepath.Join(gd, "hooks"), skip, out)
	if common, ok := commonDir(ws, gd); ok && common != gd {
		checkConfig(ws, filepath.Join(common, "config"), skip, out)
		checkHooks(ws, filepath.Join(common, "hooks"), skip, out)
	} else if cf := filepath.Join(gd, "commondir"); !ok && common != "" && !skip[cf] {
		// git takes config and hooks from a common dir out of the workspace: as a .git
		// pointer leading out (dotGitOutside), the commondir file is the finding.
		out[cf] = "git commondir leading out of the workspace to " + common
	}
	for _, sub := range moduleGitDirs(gd) {
		scanGitDir(ws, sub, skip, out, depth+1)
	}
	if names, err := readDirNames(filepath.Join(gd, "worktrees")); err == nil {
		for _, n := range names {
			if wt := filepath.Join(gd, "worktrees", n); isDir(wt) {
				scanGitDir(ws, wt, skip, out, depth+1)
			}
		}
	}
}

// moduleGitDirs returns the submodule gitdirs directly beneath gd/modules (a submodule named
// "a/b" lies at modules/a/b): every folder git could take for a gitdir (looksLikeGitDir),
// whatever kind its HEAD is.
func moduleGitDirs(gd string) []string {
	var out []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		names, err := readDirNames(dir)
		if err != nil || depth > 4 {
			return
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			if !isDir(p) {
				continue
			}
			if looksLikeGitDir(p) {
				out = append(out, p)
				continue
			}
			walk(p, depth+1)
		}
	}
	walk(filepath.Join(gd, "modules"), 0)
	return out
}

// looksLikeGitDir reports whether dir holds any of what makes a git directory (HEAD of any
// kind — git accepts a symlinked HEAD —, config, objects, refs, commondir): the resolver and
// the scan take such a folder for a gitdir rather than follow git's own stricter test, which
// a box could fail on purpose for one launch and pass again for the host's git.
func looksLikeGitDir(dir string) bool {
	for _, n := range []string{"HEAD", "config", "objects", "refs", "commondir"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// checkConfig records path when it holds executable git configuration (ExecKeys). A symlink
// is followed beneath ws, as git follows it; one leading elsewhere is recorded as such.
func checkConfig(ws, path string, skip map[string]bool, out map[string]string) {
	if skip[path] {
		return
	}
	b, err := readBeneath(ws, path, 1<<20)
	if errors.Is(err, errOutside) {
		out[path] = "git config that is a symlink leading out of the workspace"
		return
	}
	if err != nil {
		return
	}
	if keys := ExecKeys(b); len(keys) > 0 {
		out[path] = "executable git configuration: " + strings.Join(keys, ", ")
	}
}

// checkHooks records every hook in dir (a gitdir's hooks folder): each file git would run by
// its name, whatever its mode (a box can chmod), with a hash of its content so that a
// rewritten hook is a change. Samples and quarantined files are not hooks.
func checkHooks(ws, dir string, skip map[string]bool, out map[string]string) {
	if skip[dir] {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		if de.IsDir() || strings.HasSuffix(name, ".sample") || strings.Contains(name, QuarantineSuffix) || skip[p] {
			continue
		}
		hashed(ws, p, "git hook "+name, out)
	}
}

// commonDir returns the common dir a gitdir's commondir file names (relative to the gitdir,
// or absolute), and whether it lies beneath ws ("" when the file is absent or empty).
func commonDir(ws, gd string) (string, bool) {
	b, err := readBeneath(ws, filepath.Join(gd, "commondir"), 4096)
	if err != nil {
		return "", false
	}
	c := strings.TrimSpace(string(b))
	if c == "" {
		return "", false
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gd, c)
	}
	c = filepath.Clean(c)
	return c, within(c, ws)
}

// dotGitOutside returns where a .git entry leads when that is out of ws, as git would follow
// it: a symlink's target (dangling or not: a box may make its target later), or the gitdir a
// .git file, or the file a symlink leads to, names.
func dotGitOutside(ws, dotGit string) (string, bool) {
	if fi, err := os.Lstat(dotGit); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		t, err := filepath.EvalSymlinks(dotGit)
		if err != nil {
			l, lerr := os.Readlink(dotGit)
			if lerr != nil {
				return "", false
			}
			if !filepath.IsAbs(l) {
				l = filepath.Join(filepath.Dir(dotGit), l)
			}
			t = filepath.Clean(l)
		}
		if !within(t, ws) {
			return t, true
		}
		if isDir(t) {
			return "", false
		}
		dotGit = t
	}
	gd, ok := readGitdir(dotGit)
	if !ok || within(gd, ws) {
		return "", false
	}
	return gd, true
}

// dotGitTarget returns the gitdir a .git entry (a file, or a symlink git follows) leads to,
// when it lies beneath ws.
func dotGitTarget(ws, dotGit string) (string, bool) {
	if fi, err := os.Lstat(dotGit); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		t, err := filepath.EvalSymlinks(dotGit)
		if err != nil || !within(t, ws) {
			return "", false
		}
		if isDir(t) {
			return t, true
		}
		dotGit = t
	}
	gd, ok := readGitdir(dotGit)
	if !ok || !within(gd, ws) {
		return "", false
	}
	return gd, true
}

// readGitdir reads a .git file ("gitdir: PATH") and returns the absolute, cleaned gitdir.
func readGitdir(dotGit string) (string, bool) {
	f, err := openNoFollow(dotGit)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var b bytes.Buffer
	b.ReadFrom(io.LimitReader(f, 4096))
	line, _, _ := strings.Cut(b.String(), "\n")
	gd, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", false
	}
	gd = strings.TrimSpace(gd)
	if gd == "" {
		return "", false
	}
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(filepath.Dir(dotGit), gd)
	}
	return filepath.Clean(gd), true
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
