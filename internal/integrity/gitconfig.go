package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
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
// workspace's own .git; their rr-cache entries: checkRerere), .git files and symlinks,
// commondir files and GitPathKeys values that lead out of ws,
// .envrc files, python bytecode (*.pyc, by size and ctime: pythonBytecode; a __pycache__ that
// is a symlink) and extension modules that shadow a source beside them (shadowsSource), and agents' and editors' configuration in subfolders (NestedConfigFiles, and
// the entries of config it lacks: the launch's programs', ProfileConfigFiles). A config file
// that is a symlink is read through it as git reads it, as long as it stays beneath ws.
// notChecked is the number of folders found but not looked into because
// the bound was reached (0 when the scan is complete).
func ScanExec(ws string, skip map[string]bool, config []NestedConfigFile, lim Limits) (found map[string]string, notChecked int) {
	found, notChecked = scanWorkspace(ws, passOver{roots: skip}, config, lim, nil, nil)
	maps.DeleteFunc(found, func(_, d string) bool { return d == packageUnsettled })
	return found, notChecked
}

// gitRepos are the repositories a workspace scan found, for the index and object checks:
// work trees (a folder with a .git folder, or a .git file or symlink that leads beneath the
// workspace: nested clones, linked worktrees, submodules) and git directories found as such
// (bare repositories, and any folder git takes for one).
type gitRepos struct{ tops, gitdirs []string }

// scanWorkspace is ScanExec, which also records in deps, when it is not nil, the workspace's
// dependency folders it visits (DepFolderKinds; without their identity, and those beneath
// another too), and in repos, when it is not nil, the repositories it visits.
func scanWorkspace(ws string, skip passOver, config []NestedConfigFile, lim Limits, deps map[string]DepFolder, repos *gitRepos) (found map[string]string, notChecked int) {
	lim = lim.withDefaults()
	files := nestedFiles(config)
	out := map[string]string{}
	stack := []string{ws}
	visited, unread := 0, 0
	for len(stack) > 0 && visited < lim.ScanDirs {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visited++
		sub, err := scanDir(ws, dir, skip, files, out, deps, repos)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			unread++
		}
		stack = append(stack, sub...)
	}
	return out, len(stack) + unread
}

// scanDir records the findings of one directory's entries and returns its subdirectories to
// descend into (never into a .git directory: scanGitDir reads what counts in it), or why it
// could not list dir. A folder its owner cannot list (a box's chmod 0311) is made listable
// first (readDirOwned). files are the nested configuration files looked for (nestedFiles).
// deps, when not nil, gets the dependency folders among dir and its entries; repos, when not
// nil, the repositories among them.
func scanDir(ws, dir string, skip passOver, files []NestedConfigFile, out map[string]string, deps map[string]DepFolder, repos *gitRepos) ([]string, error) {
	ents, err := readDirOwned(dir)
	if err != nil {
		return nil, err
	}
	if deps != nil {
		// What the launch's checks moved aside is dropped by identify, by the record, not here.
		if dir != ws && IsVenv(ents) {
			deps[dir] = DepFolder{Runs: DepFolderKinds[len(DepFolderKinds)-1].Runs}
		}
		sitePackages(ws, dir, ents, deps)
		for _, de := range ents {
			if de.IsDir() {
				if k := depFolderKind(de.Name(), ents); k != nil {
					deps[filepath.Join(dir, de.Name())] = DepFolder{Runs: k.Runs}
				}
			}
		}
	}
	rel := "."
	if dir != ws {
		if r, err := filepath.Rel(ws, dir); err == nil {
			rel = filepath.ToSlash(r)
		}
	}
	// A folder outside the workspace is scanned only as a git directory (the gitdir of a
	// worktree, which the watch rescans at an event there): the workspace's rules would take
	// the host's own folders for the workspace's (~/.codex, the parent of a watched home entry,
	// for Codex's project .codex/), which the full scan never visits.
	outside := rel == ".." || strings.HasPrefix(rel, "../")
	pinned := func(folder string) bool { return skip.roots[filepath.Join(ws, folder)] }
	var nested *nestedMatcher // made at the folder's first file that is not skipped
	skills := inSkillFolder(rel)
	var sub []string
	hasHEAD, hasObjects, hasConfig := false, false, false
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		if outside {
			switch {
			case name == "HEAD":
				hasHEAD = true
			case name == "objects" && de.IsDir():
				hasObjects = true
			case name == "config" && (de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0):
				hasConfig = true
			}
			continue
		}
		if !skip.roots[p] && (!de.IsDir() || de.Type()&os.ModeSymlink != 0) && skills {
			// A skill or command that runs commands or grants tools (review 14, F11); the
			// cases below judge the same entry as any other (a .gitignore, an .envrc).
			checkSkillFile(ws, p, de.Type()&os.ModeSymlink != 0, out)
		}
		switch {
		case name == ".git" && de.IsDir():
			scanGitDir(ws, p, skip, out, 0)
			if repos != nil {
				repos.tops = append(repos.tops, dir)
			}
			continue
		case name == ".git" && (de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0):
			// git follows a symlinked .git, to a gitdir or to a .git file.
			if gd, ok := dotGitTarget(ws, p); ok {
				scanGitDir(ws, gd, skip, out, 0)
				// The work tree this .git leads from is where a relative core.hooksPath lies,
				// whether or not the git directory names it back (review 32 C, F4: a box's
				// worktree whose gitdir file it removed).
				for _, d := range hooksPathDirs(ws, gd, dir) {
					checkHooks(ws, d, skip, out)
				}
				if repos != nil {
					repos.tops = append(repos.tops, dir)
				}
			} else if t, far := dotGitOutside(ws, p); far && !skip.roots[p] {
				// The gitdir lies where the scan does not look (the box cache, which boxes
				// write, persists and has the same path on the host): its config and hooks
				// are the box's to choose. A new or changed pointer is moved aside.
				out[p] = "git pointer (.git) leading out of the workspace to " + t
			}
		case name == ".envrc" && !skip.roots[p]:
			// New, or changed: direnv refuses a changed one until the user allows it again,
			// but runs it without an allow beneath a prefix its configuration whitelists.
			if de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0 {
				hashed(ws, p, "direnv script (.envrc)", out)
			}
		case strings.HasSuffix(name, ".pyc") && !de.IsDir() && !skip.roots[p]:
			pythonBytecode(p, de, "python bytecode, which python imports instead of the source", out)
		case strings.HasSuffix(name, ".so") && !de.IsDir() && !skip.roots[p] && shadowsSource(name, ents):
			pythonBytecode(p, de, "a python extension module, which python imports instead of the source beside it", out)
		case name == "__pycache__" && de.Type()&os.ModeSymlink != 0 && !skip.roots[p]:
			// python reads bytecode through it, from wherever it leads (the box cache, which
			// boxes write and which has the same path on the host): the scan, which never
			// follows a link, could not see what is there. New or changed, it is moved aside.
			t, _ := os.Readlink(p)
			out[p] = "python bytecode folder (__pycache__) as a symlink to " + t
		case name == "package.json" && (de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0) && !skip.roots[p] && !strings.Contains(p, "/node_modules/"):
			// The hooks read the package.json of the project they were installed from, never
			// a dependency's.
			checkPackageJSON(ws, p, func(n string) bool {
				return slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == n })
			}, skip.moved, out)
		case de.Type()&os.ModeSymlink != 0 && !skip.roots[p] && !skip.roots[dir] && !skip.moved(p) && nestedConfigFolder(files, path.Join(rel, name), pinned) != "":
			linkedFolder(ws, p, nestedConfigFolder(files, path.Join(rel, name), pinned), out)
		case !de.IsDir() && !skip.roots[p] && !skip.roots[dir] && !skip.moved(p) && nestedIn(&nested, files, rel, pinned).match(name) != "":
			hashed(ws, p, nested.match(name), out)
		case name == ".gitignore" && de.Type().IsRegular() && !skip.roots[p]:
			// git reads no .gitignore through a symlink. One that ignores itself hides itself
			// and, beside it, whatever it names from status, add and clean: a box's new files
			// (build inputs the host then compiles) disappear from the user's review.
			// One too large to read is taken for one that hides itself (review 13, F7).
			b, err := readBeneath(ws, p, maxCheckedFile)
			switch {
			case tooLarge(err) != nil:
				out[p] = "git ignore file (.gitignore) " + err.Error() + ": taken for one that hides itself"
			case err == nil && ignoresItself(b):
				hashed(ws, p, "git ignore file that hides itself (.gitignore)", out)
			}
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
	// A bare repository, or any folder git takes for a git directory (isGitDirectory: no
	// config needed, objects and refs in the common dir its commondir names); and, as before,
	// one with HEAD of any kind, objects and a config (a HEAD another git may accept).
	if hasHEAD && (isGitDirectory(dir) || hasObjects && hasConfig) {
		scanGitDir(ws, dir, skip, out, 0)
		if repos != nil {
			repos.gitdirs = append(repos.gitdirs, dir)
		}
	}
	return sub, nil
}

// NestedConfigFile is a file of executable configuration that an agent or an editor reads
// from the folder it is started in or opens, which need not be the workspace's top: pinned
// there, found by the workspace scan elsewhere, and moved aside when new or changed.
type NestedConfigFile struct {
	// Dir is the folder it lies in, as the last components of its path (".vscode",
	// ".github/copilot"); "" for any folder. One that begins with "/" is a path.Match pattern
	// of the whole workspace-relative folder ("/." the top, "/ci/*"): a lefthook extends
	// pattern's, whose later matches lefthook merges as it does the present ones.
	Dir string `json:"dir,omitempty"`
	// Name is its name, a filepath.Match pattern; "" for every file beneath Dir, at any depth
	// (a profile's workspaceConfig folder, ".codex/").
	Name string `json:"name,omitempty"`
	// Reads says who reads it and what it runs.
	Reads string `json:"reads"`
}

// NestedConfigFiles are the agents' and editors' executable configuration the scan looks for
// in every folder of the workspace: the editors' and build tools' project files below, and
// every built-in profile's workspaceConfig entry (profileConfigFiles), which the profiles pin
// at the top, so that the two cannot drift apart (TestNestedConfigCoversProfiles).
var NestedConfigFiles = append([]NestedConfigFile{
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
	{"", ".tool-versions", "asdf's and mise's tool versions, read from the current folder and each one above: a path: version puts a folder of the workspace first on PATH"},
	{"vendor", "modules.txt", "Go's vendor list, beside a go.mod (or go.work): consistent with it, go build and go run compile vendor/ in place of the modules, unchecked against go.sum"},
	{".mvn", "jvm.config", "Maven's JVM options, read from the project's top at every mvn: -javaagent runs a jar in the host's JVM"},
	{".mvn", "maven.config", "Maven's options, read from the project's top at every mvn: -s names another settings file"},
	{".mvn", "extensions.xml", "Maven's core extensions, read from the project's top at every mvn: loaded into the host's Maven"},
	{".mvn/wrapper", "maven-wrapper.properties", "the Maven wrapper's settings: distributionUrl names the Maven ./mvnw downloads and runs"},
	{"", "gradle.properties", "Gradle's project properties: org.gradle.jvmargs starts the host's Gradle daemon with them (-javaagent)"},
	{"gradle/wrapper", "gradle-wrapper.properties", "the Gradle wrapper's settings: distributionUrl names the Gradle ./gradlew downloads and runs"},
	{".cursor", "hooks.json", "Cursor's project hooks: commands its agent runs at its events, without asking"},
	{".windsurf", "hooks.json", "Windsurf's workspace hooks: commands Cascade runs at its events, without asking"},
	{".mvn/wrapper", "maven-wrapper.jar", "the Maven wrapper's jar: what ./mvnw runs"},
	{"gradle/wrapper", "gradle-wrapper.jar", "the Gradle wrapper's jar: what ./gradlew runs"},
	{"", "compose.override.yaml", "Docker Compose's override file, merged into the compose file beside it at every docker compose up: services that bind-mount the host and run any command"},
	{"", "compose.override.yml", "Docker Compose's override file, merged into the compose file beside it at every docker compose up: services that bind-mount the host and run any command"},
	{"", "docker-compose.override.yaml", "Docker Compose's override file, merged into the compose file beside it at every docker compose up: services that bind-mount the host and run any command"},
	{"", "docker-compose.override.yml", "Docker Compose's override file, merged into the compose file beside it at every docker compose up: services that bind-mount the host and run any command"},
	{"", ".dir-locals.el", "Emacs' directory-local variables, read from a visited file's folder and each one above: eval runs Lisp"},
	{"", ".dir-locals-2.el", "Emacs' second directory-local file, read beside .dir-locals.el: eval runs Lisp"},
	{".cursor", "cli.json", "Cursor CLI's project configuration: the commands its agent may run without asking"},
	{"", ".aider.conf.yml", "aider's configuration, read at the repository's top: its lint and test commands, which it runs"},
}, append(hookManagerConfigFiles(), profileConfigFiles()...)...)

// hookManagerConfigFiles returns the git hook managers' files and folders (plan.HookManagerFiles,
// which the workspace's top pins) as nested configuration: husky 4 reads its .huskyrc* and
// husky.config.* beside the package.json it was installed from (frontend/ in a repository whose
// JavaScript project lies there), and pre-commit, lefthook and overcommit theirs at a nested
// repository's top (review 13, F8).
func hookManagerConfigFiles() []NestedConfigFile {
	var out []NestedConfigFile
	for _, f := range plan.HookManagerFiles() {
		if slices.Contains(plan.ProtectedDirs, path.Base(f)) {
			f += "/"
		}
		out = append(out, nestedEntry(f, "a git hook manager's configuration, read at the host's next git commit by a hook it installed (pre-commit, lefthook, overcommit, husky 4)"))
	}
	return out
}

// nestedEntry returns a workspace-relative configuration path as nested configuration: "X/" is
// every file beneath any folder X, "a/b" the file b in any folder a, "f" the file f in any folder.
func nestedEntry(w, reads string) NestedConfigFile {
	f := NestedConfigFile{Reads: reads}
	if c := filepath.ToSlash(filepath.Clean(w)); strings.HasSuffix(w, "/") {
		f.Dir = c
	} else if d := path.Dir(c); d != "." {
		f.Dir, f.Name = d, path.Base(c)
	} else {
		f.Name = c
	}
	return f
}

// profileConfigFiles returns every built-in profile's workspaceConfig entries as nested
// configuration (ProfileConfigFiles of the built-in set). The embedded profiles are loaded by
// every test of internal/profile: an error is a build defect.
func profileConfigFiles() []NestedConfigFile {
	set, err := profile.NewSet(nil)
	if err != nil {
		panic("integrity: the built-in profiles: " + err.Error())
	}
	return ProfileConfigFiles(set)
}

// ProfileConfigFiles returns the workspaceConfig entries of every profile in set (the built-in
// ones and the programs of the user's configuration) as nested configuration: "X/" is every
// file beneath any folder X, "a/b" the file b in any folder a, "f" the file f in any folder.
// (Codex reads .codex/config.toml in every folder from the project's root to its working
// folder and runs the MCP servers there; review 11, F1.) The daemon gives a launch's scan those
// of its set (Layout.Config), so that a program the user defines is looked for in subfolders
// as the built-in ones are.
func ProfileConfigFiles(set *profile.Set) []NestedConfigFile {
	if set == nil {
		return nil
	}
	var out []NestedConfigFile
	seen := map[NestedConfigFile]bool{}
	for _, id := range set.IDs() {
		p := set.Get(id)
		for _, w := range p.WorkspaceConfig {
			f := nestedEntry(w, p.DisplayName()+"'s project configuration (workspaceConfig "+w+")")
			if k := (NestedConfigFile{Dir: f.Dir, Name: f.Name}); !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// nestedFiles returns NestedConfigFiles and, after them, the entries of extra it lacks (a
// launch's programs' workspaceConfig, ProfileConfigFiles).
func nestedFiles(extra []NestedConfigFile) []NestedConfigFile {
	if len(extra) == 0 {
		return NestedConfigFiles
	}
	out := slices.Clip(NestedConfigFiles)
	for _, f := range extra {
		if !slices.ContainsFunc(out, func(g NestedConfigFile) bool { return g.Dir == f.Dir && g.Name == f.Name }) {
			out = append(out, f)
		}
	}
	return out
}

// inDir reports whether the folder rel (workspace-relative, slash-separated, "." for the top)
// is dir or ends with it.
func inDir(rel, dir string) bool {
	return rel == dir || strings.HasSuffix(rel, "/"+dir)
}

// beneathDir reports whether the folder rel is dir, ends with it, or lies beneath such a folder.
func beneathDir(rel, dir string) bool {
	return inDir(rel, dir) || strings.HasPrefix(rel, dir+"/") || strings.Contains(rel, "/"+dir+"/")
}

// nestedConfig returns what reads the file name in the folder rel (workspace-relative,
// slash-separated, "." for the top), or "". A file beneath a folder whose every file counts is
// left to the watch of that folder when pinned reports it a root (the workspace's own .codex/,
// which the user may edit while a box runs); pinned may be nil. What was moved aside is not
// configuration. files are the nested configuration files looked for (nestedFiles).
func nestedConfig(files []NestedConfigFile, rel, name string, pinned func(folder string) bool) string {
	return newNestedMatcher(files, rel, pinned).match(name)
}

// nestedMatcher is nestedConfig for the files of one folder: what of each entry depends on
// the folder alone (its Dir, pinned) is taken once, and a file's name is looked up among the
// literal names rather than matched against every pattern. The scan calls it for every file
// of every folder it visits, and the watch rescans a folder at each batch of events in it: a
// box writing 5,000 files into 50 folders had each rescan match every name against every
// entry (about 100), 10 µs a file on the daemon's CPU beside the box (docs/benchmarks.md,
// "Work in the box").
type nestedMatcher struct {
	files []NestedConfigFile
	// first is the first entry that holds for every file of the folder (a Name "" entry
	// whose folder this is or lies beneath), or len(files).
	first int
	// lit holds, by name, the first entry with that literal Name that holds in the folder.
	lit map[string]int
	// pats are the entries with a pattern Name that hold in the folder, in order.
	pats []nestedPattern
}

// nestedPattern is an entry whose Name is a pattern, with the literal text its matches begin
// and end with (none for a pattern with an escape): a name without them is not matched.
type nestedPattern struct {
	i        int
	pre, suf string
}

func newNestedMatcher(files []NestedConfigFile, rel string, pinned func(folder string) bool) *nestedMatcher {
	m := &nestedMatcher{files: files, first: len(files)}
	for i, f := range files {
		if i >= m.first {
			break // an earlier entry holds for every file
		}
		if d, anchored := strings.CutPrefix(f.Dir, "/"); anchored {
			if ok, _ := path.Match(d, rel); !ok || f.Name == "" {
				continue // path.Match("", name) holds for no file's name
			}
		} else if f.Name == "" {
			if beneathDir(rel, f.Dir) && !pinnedFolder(rel, f.Dir, pinned) {
				m.first = i
			}
			continue
		} else if f.Dir != "" && !inDir(rel, f.Dir) {
			continue
		}
		if strings.ContainsAny(f.Name, `*?[\`) {
			p := nestedPattern{i: i}
			if !strings.Contains(f.Name, `\`) {
				p.pre = f.Name[:strings.IndexAny(f.Name, "*?[")]
				p.suf = f.Name[strings.LastIndexAny(f.Name, "*?[]")+1:]
			}
			m.pats = append(m.pats, p)
			continue
		}
		if m.lit == nil {
			m.lit = map[string]int{}
		}
		if _, had := m.lit[f.Name]; !had {
			m.lit[f.Name] = i
		}
	}
	return m
}

// nestedIn returns *m, made for the folder rel first if it is nil.
func nestedIn(m **nestedMatcher, files []NestedConfigFile, rel string, pinned func(folder string) bool) *nestedMatcher {
	if *m == nil {
		*m = newNestedMatcher(files, rel, pinned)
	}
	return *m
}

// match returns what reads the file name in the matcher's folder, or "".
func (m *nestedMatcher) match(name string) string {
	best := m.first
	if i, ok := m.lit[name]; ok && i < best {
		best = i
	}
	for _, p := range m.pats {
		i := p.i
		if i >= best {
			break
		}
		if !strings.HasPrefix(name, p.pre) || !strings.HasSuffix(name, p.suf) {
			continue
		}
		match := filepath.Match // Name is a filepath.Match pattern, an anchored Dir's a path.Match one
		if strings.HasPrefix(m.files[i].Dir, "/") {
			match = path.Match
		}
		if ok, _ := match(m.files[i].Name, name); ok {
			best = i
			break
		}
	}
	if best == len(m.files) {
		return ""
	}
	return m.files[best].Reads
}

// pythonBytecode records the .pyc file p by its size and ctime. python imports
// __pycache__/NAME.cpython-3X.pyc instead of NAME.py while the header's source mtime and size
// match, whatever the source now says, and a NAME.pyc without a NAME.py beside it as the module
// itself; git ignores both as a rule. The box's own python writes its bytecode to the box cache
// (PYTHONPYCACHEPREFIX), so one that appears or changes in the workspace while a box runs was
// written by hand (review 10, F1), and is moved aside: python compiles the source again. Any
// write, rename or link moves the ctime, which no program sets; the file is not read.
//
// The same holds for an extension module (review 12, F2): python's FileFinder tries
// EXTENSION_SUFFIXES (NAME.cpython-3XY-PLATFORM.so, NAME.abi3.so, NAME.so) before NAME.py, and
// NAME/__init__ with them before NAME/__init__.py, and git ignores *.so as a rule; one that
// shadows a source (shadowsSource) is recorded by what as well.
func pythonBytecode(p string, de fs.DirEntry, what string, out map[string]string) {
	fi, err := de.Info()
	if err != nil {
		return
	}
	_, _, ctime := identity(fi)
	out[p] = fmt.Sprintf("%s (%d bytes, ctime %d)", what, fi.Size(), ctime)
}

// shadowsSource reports whether the shared object name, among its folder's entries ents, is a
// python extension module that python would import in place of a module beside it: its name
// up to the first dot is NAME, and NAME.py or a folder NAME (a package, or a namespace
// package, which an extension module beats) lies beside it. Extension modules elsewhere (a
// venv's site-packages, a build's output) are not looked at: a box's own pip install must work.
func shadowsSource(name string, ents []fs.DirEntry) bool {
	stem, _, _ := strings.Cut(name, ".")
	if stem == "" {
		return false
	}
	for _, e := range ents {
		if (e.Name() == stem+".py" && !e.IsDir()) || (e.Name() == stem && e.IsDir()) {
			return true
		}
	}
	return false
}

// pinnedFolder reports whether rel or a folder above it that is dir (ends with it) is pinned.
func pinnedFolder(rel, dir string, pinned func(string) bool) bool {
	for p := rel; pinned != nil && p != "." && p != "/"; p = path.Dir(p) {
		if inDir(p, dir) && pinned(p) {
			return true
		}
	}
	return false
}

// nestedConfigFolder returns what reads the configuration a folder at rel
// (workspace-relative, slash-separated) would hold, or "": rel is a NestedConfigFile's folder,
// a folder on the way to one (".github" for ".github/copilot"), or lies beneath a folder whose
// every file counts. A symlink there hides its files from the scan, which names a file by the
// folders it lies in and does not follow symlinked folders (review 11, F2).
func nestedConfigFolder(files []NestedConfigFile, rel string, pinned func(string) bool) string {
	for _, f := range files {
		if f.Dir == "" || strings.HasPrefix(f.Dir, "/") {
			continue
		}
		if f.Name == "" && beneathDir(path.Dir(rel), f.Dir) && !pinnedFolder(path.Dir(rel), f.Dir, pinned) {
			return f.Reads
		}
		for p := f.Dir; p != "."; p = path.Dir(p) {
			if inDir(rel, p) {
				return f.Reads
			}
		}
	}
	return ""
}

// linkedFolder records the symlink at path, which stands where a folder of configuration
// would (nestedConfigFolder), with its target and a hash of the files it leads to beneath ws
// (followed as the tools follow it, never out of ws), so that a new link, or a change of what
// an old one leads to, is a change: moved aside, the link itself, never its target.
func linkedFolder(ws, p, what string, out map[string]string) {
	t, err := os.Readlink(p)
	if err != nil {
		return
	}
	h := sha256.New()
	outside := false
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil || depth > 4 {
			return
		}
		for _, de := range ents {
			q := filepath.Join(dir, de.Name())
			if de.IsDir() {
				walk(q, depth+1)
				continue
			}
			b, err := readBeneath(ws, q, maxCheckedFile)
			if errors.Is(err, errOutside) {
				outside = true
			}
			if tl := tooLarge(err); tl != nil {
				b = []byte(tl.Error()) // its size and ctime: changed with any write
			}
			sum := sha256.Sum256(b)
			io.WriteString(h, q+"\x00"+hex.EncodeToString(sum[:])+"\x00")
		}
	}
	if _, err := readBeneath(ws, p, 0); errors.Is(err, errOutside) {
		outside = true
	} else {
		walk(p, 0)
	}
	d := "a symlink (to " + t + ") where a folder of configuration lies: " + what
	if outside {
		out[p] = d + " (leading out of the workspace)"
		return
	}
	out[p] = d + " (sha256 " + hex.EncodeToString(h.Sum(nil)[:6]) + ")"
}

// hashed records the file at path as what, with a hash of its content so that a rewrite is a
// change (a symlink leading out of the workspace counts by itself).
// A file over maxCheckedFile is recorded by its size and ctime instead (tooLargeError), which
// any write changes: a hash of its first MiB would let a box rewrite the rest unseen.
func hashed(ws, path, what string, out map[string]string) {
	b, err := readBeneath(ws, path, maxCheckedFile)
	switch {
	case errors.Is(err, errOutside):
		out[path] = what + " (a symlink leading out of the workspace)"
	case tooLarge(err) != nil:
		out[path] = what + " (" + err.Error() + ")"
	case err == nil:
		sum := sha256.Sum256(b)
		out[path] = what + " (sha256 " + hex.EncodeToString(sum[:6]) + ")"
	}
}

// hooksPathDirs returns the folders beneath ws that a core.hooksPath names for the work tree
// git takes for the git directory gd (top, when known: the folder whose .git leads to gd; else a
// nested repository's X/.git: X; a submodule's or a linked worktree's: its core.worktree or
// gitdir file), read from its configuration and the user's, their includes followed
// (configEntries; a relative value is each work tree's folder): the host's git there runs the
// hooks in it. Review 32, F3: a nested repository's existing core.hooksPath was read only when
// its configuration changed, so a hook a box added to that folder stayed, and the host's git
// commit in the nested repository ran it; C F3: one set through an include. With husky's
// .husky/_, .husky too (its hooks run .husky/<hook>). Every value counts, not only the last.
func hooksPathDirs(ws, gd, top string) []string {
	if top == "" {
		if filepath.Base(gd) == ".git" {
			top = filepath.Dir(gd)
		}
		if b, err := readBeneath(ws, filepath.Join(gd, "gitdir"), 4096); err == nil {
			top = worktreeTop(gd, b)
		}
		top = workTree(ws, gd, top)
	}
	if top == "" {
		return nil
	}
	files := userGitConfigs()
	for _, d := range configDirs(gd, func(p string) ([]byte, error) { return readBeneath(ws, p, 4096) }) {
		for _, f := range GitDirConfigFiles {
			files = append(files, filepath.Join(d, f))
		}
	}
	var es []ConfigEntry
	for _, f := range files {
		es = append(es, configEntries(ws, f)...)
	}
	var out []string
	for _, e := range es {
		if e.Section != "core" || e.HasSub || e.Key != "hookspath" || e.Value == "" {
			continue
		}
		v, ok := expandHome(e.Value)
		if !ok {
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(top, v)
		}
		v = filepath.Clean(v)
		if !within(v, ws) || v == ws || v == filepath.Join(gd, "hooks") || slices.Contains(out, v) {
			continue
		}
		out = append(out, v)
		if filepath.Base(v) == "_" && filepath.Base(filepath.Dir(v)) == ".husky" {
			out = append(out, filepath.Dir(v))
		}
	}
	return out
}

// configWalk reads git configuration files as git does, with every file each includes
// (include.path, includeIf.*.path, whatever the condition; "~" expanded, a relative one beside
// the including file), maxIncludes deep. read reads a file; the optional hooks see each include
// target before it is read (include), each file read or not (file: why it could not be read,
// or why git would stop reading it partway) and each include past the bound (deep). The resolver (the repository's
// and the user's configuration: it pins the targets and notes what it cannot read) and the
// workspace scan (configEntries) walk it the same way.
type configWalk struct {
	read    func(p string) ([]byte, error)
	include func(p string)
	file    func(p string, readErr, parseErr error)
	deep    func(p string)
}

// walk reads the file p (depth includes deep) and what it includes; it returns their entries
// in git's order.
func (w configWalk) walk(p string, depth int) []ConfigEntry {
	b, err := w.read(p)
	if err != nil {
		if w.file != nil {
			w.file(p, err, nil)
		}
		return nil
	}
	es, perr := ParseConfig(b)
	if w.file != nil {
		w.file(p, nil, perr)
	}
	out := slices.Clone(es)
	for _, inc := range includePaths(es) {
		v, ok := expandHome(inc)
		if !ok || v == "" {
			continue
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(filepath.Dir(p), v)
		}
		v = filepath.Clean(v)
		if depth >= maxIncludes {
			if w.deep != nil {
				w.deep(p)
			}
			continue
		}
		if w.include != nil {
			w.include(v)
		}
		out = append(out, w.walk(v, depth+1)...)
	}
	return out
}

// configEntries returns the entries of the git configuration file p and of every file it
// includes (configWalk): beneath ws read with the bounded, no-follow reader, elsewhere (the
// user's own files) as git reads them.
func configEntries(ws, p string) []ConfigEntry {
	return configWalk{read: func(p string) ([]byte, error) {
		if within(p, ws) {
			return readBeneath(ws, p, maxCheckedFile)
		}
		return readFollow(p, maxCheckedFile)
	}}.walk(p, 0)
}

// ownCommonDir reports whether common is the common dir git itself gives the git directory
// gd: the repository a linked worktree's git directory (REPO/worktrees/<id>) lies in.
func ownCommonDir(gd, common string) bool {
	return filepath.Base(filepath.Dir(gd)) == "worktrees" && common == filepath.Dir(filepath.Dir(gd))
}

// expandHome expands a path value's leading "~" or "~/" to the home folder, as git does; a
// "~user/…" is not expanded (ok is false).
func expandHome(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "~")
	if !ok {
		return v, true
	}
	if rest != "" && rest[0] != '/' {
		return v, false
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return v, false
	}
	return home + rest, true
}

// maxGitNesting bounds how deep scanGitDir follows modules/ and worktrees/ within gitdirs.
const maxGitNesting = 8

// scanGitDir records the executable configuration of one git directory: its config files
// (and its common dir's, when commondir points elsewhere beneath ws), its hooks, and those of
// the submodule gitdirs (modules/**) and linked worktrees' gitdirs (worktrees/*) beneath it.
func scanGitDir(ws, gd string, skip passOver, out map[string]string, depth int) {
	if depth > maxGitNesting {
		return
	}
	for _, f := range GitDirConfigFiles {
		checkConfig(ws, gd, filepath.Join(gd, f), skip, out)
	}
	checkHooks(ws, filepath.Join(gd, "hooks"), skip, out)
	for _, d := range hooksPathDirs(ws, gd, "") {
		checkHooks(ws, d, skip, out)
	}
	checkPackedRefs(ws, filepath.Join(gd, "packed-refs"), skip, out)
	checkReplaceRefs(ws, gd, skip, out)
	checkAlternates(ws, gd, skip, out)
	checkSequencer(ws, gd, skip, out)
	checkRerere(gd, skip, out)
	common, ok, err := commonDir(ws, gd)
	cf := filepath.Join(gd, "commondir")
	switch {
	case err != nil && !skip.roots[cf]:
		// git reads it whole: where it leads is not known.
		out[cf] = "git commondir " + err.Error()
	case ok && common != gd:
		if !skip.roots[cf] && !ownCommonDir(gd, common) {
			// Where the common dir is, itself, when it is not the repository the worktree
			// belongs to: a box that pointed a nested repository's linked worktree at a
			// repository of its own (a bare clone beside, with a core.fsmonitor) had the host's
			// git status in that worktree run it, and once the scan moved that config aside at
			// exit, the worktree went on using the box's repository. New or changed, it is
			// moved aside. (The workspace's own worktrees' commondir is pinned; a worktree the
			// box adds, git worktree add, points at its own repository and is left alone.)
			hashed(ws, cf, "git commondir leading to another repository than the worktree's own ("+common+"): git takes this git directory's configuration, hooks and objects there", out)
		}
		checkConfig(ws, gd, filepath.Join(common, "config"), skip, out)
		checkHooks(ws, filepath.Join(common, "hooks"), skip, out)
		checkPackedRefs(ws, filepath.Join(common, "packed-refs"), skip, out)
		checkAlternates(ws, common, skip, out)
		checkRerere(common, skip, out)
	case !ok && common != "" && !skip.roots[cf]:
		// git takes config and hooks from a common dir out of the workspace: as a .git
		// pointer leading out (dotGitOutside), the commondir file is the finding.
		out[cf] = "git commondir leading out of the workspace to " + common
	}
	subs, links := moduleGitDirs(gd)
	for _, sub := range subs {
		scanGitDir(ws, sub, skip, out, depth+1)
	}
	for _, l := range links {
		if !skip.roots[l] && !skip.moved(l) {
			// git follows it: git submodule update takes the gitdir there, its config, hooks
			// and objects, from wherever it leads (the box cache, which has the same path on
			// the host). New or changed, it is moved aside.
			t, _ := os.Readlink(l)
			out[l] = "submodule git directory (modules/) as a symlink to " + t
		}
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
// whatever kind its HEAD is; and the symlinks on the way to them (modules itself, or any entry
// the walk meets), which git follows and the walk does not (but for those moved aside).
func moduleGitDirs(gd string) (dirs, links []string) {
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		names, err := readDirNames(dir)
		if err != nil || depth > 4 {
			return
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			fi, err := os.Lstat(p)
			switch {
			case err != nil:
				continue
			case fi.Mode()&os.ModeSymlink != 0:
				links = append(links, p)
				continue
			case !fi.IsDir():
				continue
			}
			if looksLikeGitDir(p) {
				dirs = append(dirs, p)
				continue
			}
			walk(p, depth+1)
		}
	}
	modules := filepath.Join(gd, "modules")
	if fi, err := os.Lstat(modules); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, []string{modules}
	}
	walk(modules, 0)
	return dirs, links
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

// maxCheckedFile bounds what the scan reads of a file it judges by its content (git
// configuration, a .gitignore, a hook or an agent's configuration it hashes). git and the
// tools read the whole file, so one longer than this counts as what the scan looks for: a
// config as executable, a .gitignore as hiding itself, a hook by its size and ctime (review
// 13, F7).
const maxCheckedFile = 1 << 20

// checkConfig records path, a config file git reads for the git directory gd, when it holds
// executable git configuration (ExecKeys) or a path key that leads git out of ws (GitPathKeys:
// a core.worktree in the box cache, review 14, F16). A symlink is followed beneath ws, as git
// follows it; one leading elsewhere is recorded as such. A config the scan cannot read as git
// does, one git would refuse or one over maxCheckedFile, counts as executable (review 13, F6
// and F7): its detail names why, and its size and ctime when it was not read, so that any
// change to it is a change.
func checkConfig(ws, gd, path string, skip passOver, out map[string]string) {
	if skip.roots[path] {
		return
	}
	b, err := readBeneath(ws, path, maxCheckedFile)
	switch {
	case errors.Is(err, errOutside):
		out[path] = "git config that is a symlink leading out of the workspace"
		return
	case tooLarge(err) != nil:
		out[path] = "git config " + err.Error() + ": taken for executable"
		return
	case err != nil:
		return
	}
	entries, perr := ParseConfig(b)
	keys := execKeys(entries)
	far := pathKeysOutside(ws, gd, entries)
	switch {
	case perr != nil:
		sum := sha256.Sum256(b)
		d := fmt.Sprintf("git config that git would not read (%v): taken for executable (sha256 %s)", perr, hex.EncodeToString(sum[:6]))
		if k := append(keys, far...); len(k) > 0 {
			d += "; before that line: " + strings.Join(k, ", ")
		}
		out[path] = d
	case len(keys) > 0 && len(far) > 0:
		out[path] = "executable git configuration: " + strings.Join(keys, ", ") + "; " + strings.Join(far, ", ")
	case len(keys) > 0:
		out[path] = "executable git configuration: " + strings.Join(keys, ", ")
	case len(far) > 0:
		out[path] = "git configuration leading out of the workspace: " + strings.Join(far, ", ")
	}
}

// pathKeysOutside returns the GitPathKeys of entries (a config file of the git directory gd)
// whose value leads out of ws, each as "key = where": git would read a work tree, ignore or
// attributes file there that the scan never reads (the box cache, which boxes write and which
// has the same path on the host). A relative core.worktree is relative to gd, a relative file
// to the folder above gd (the work tree's top, where git opens it); "~" is the home folder;
// symlinks beneath ws are followed as git follows them.
func pathKeysOutside(ws, gd string, entries []ConfigEntry) []string {
	var out []string
	for _, e := range entries {
		// A remote that is a path: fetch, pull and push run upload-pack and receive-pack in that
		// repository, with its hooks (pre-receive, update, post-receive) and its configuration.
		// One the box made in the box cache (which boxes write, unscanned, at the same path on
		// the host) had the host's git push run its pre-receive hook (review 22,
		// TestAttackPushToBoxCacheRemote). The URL a remote's url or pushurl names, and the one
		// an url.BASE.insteadOf or pushInsteadOf rewrites others to (BASE), count as the path
		// keys do; a path in the workspace is the scan's (a bare repository there is read).
		var remote string
		switch {
		case e.HasSub && e.Section == "remote" && (e.Key == "url" || e.Key == "pushurl"):
			remote = e.Value
		case e.HasSub && e.Section == "url" && (e.Key == "insteadof" || e.Key == "pushinsteadof"):
			remote = e.Sub
		}
		if p, local := localRemote(remote); local {
			if p, far := leadsOut(ws, filepath.Dir(gd), p); far {
				out = append(out, e.Name()+" = "+p)
			}
		}
		for _, k := range GitPathKeys {
			if e.HasSub || e.Section+"."+e.Key != k.Name || e.Value == "" {
				continue
			}
			base := filepath.Dir(gd)
			if k.FromGitDir {
				base = gd
			}
			if p, far := leadsOut(ws, base, e.Value); far {
				out = append(out, e.Name()+" = "+p)
			}
		}
	}
	return out
}

// localRemote reports whether the remote URL u is a path git opens on this machine (git's
// url_is_local_not_ssh: no "scheme://", and no ':' before the first '/'; or file://), and
// returns the path.
func localRemote(u string) (string, bool) {
	if u == "" {
		return "", false
	}
	if rest, ok := strings.CutPrefix(u, "file://"); ok {
		if h, p, ok := strings.Cut(rest, "/"); ok && (h == "" || h == "localhost") {
			return "/" + p, true
		}
		return rest, true
	}
	if strings.Contains(u, "://") {
		return "", false
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	return u, colon < 0 || (slash >= 0 && slash < colon)
}

// leadsOut resolves a path value of git configuration (relative to base; "~" and "~/…" the
// home folder) and reports whether it leads out of ws, following the symlinks of the part of
// it that exists (a link beneath ws that leads out counts). "~user" counts as out.
func leadsOut(ws, base, v string) (string, bool) {
	p, ok := expandHome(v)
	if !ok {
		return v, true
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	if !within(p, ws) {
		return p, true
	}
	// The longest part of p that exists, with its symlinks resolved, and the rest after it.
	head, tail := p, ""
	for within(head, ws) && head != ws {
		if r, err := filepath.EvalSymlinks(head); err == nil {
			r = filepath.Join(r, tail)
			return r, !within(r, ws)
		}
		head, tail = filepath.Dir(head), filepath.Join(filepath.Base(head), tail)
	}
	return p, false
}

// alternatesFiles are the files of a git directory that name other object stores, from which
// git reads the objects it lacks (checkout, show, archive, a local clone).
var alternatesFiles = []string{"objects/info/alternates", "objects/info/http-alternates"}

// checkAlternates records the alternates files of the git directory gd, with a hash of their
// content: one a box wrote or changed can name a folder of its own (the box cache, which has
// the same path on the host) holding an object under a name of the repository's, whose local
// copy it removed, and the host's git then gives the box's content for a committed file (review
// 13, F10). A new or changed one is moved aside: git then reports the object missing.
func checkAlternates(ws, gd string, skip passOver, out map[string]string) {
	for _, f := range alternatesFiles {
		if p := filepath.Join(gd, f); !skip.roots[p] {
			hashed(ws, p, "git alternates ("+path.Base(f)+"): other object stores git reads objects from", out)
		}
	}
}

// sequencerTodos are the todo lists of a stopped `git rebase -i` and of a cherry-pick or revert
// sequence, in a git directory (each worktree's own).
var sequencerTodos = []string{"rebase-merge/git-rebase-todo", "sequencer/todo"}

// checkSequencer records a todo list of gd that holds an exec line, with a hash of its content.
// `git rebase --continue` runs each exec line with the user's shell, and `git status` shows at
// most the next two commands of a stopped rebase, so an exec line a box put after them would
// run at the host's next `git rebase --continue` unseen (review 14, F10). A new or changed one
// is moved aside: git then cannot continue that rebase (`git rebase --abort` ends it).
func checkSequencer(ws, gd string, skip passOver, out map[string]string) {
	for _, f := range sequencerTodos {
		p := filepath.Join(gd, f)
		if skip.roots[p] {
			continue
		}
		b, err := readBeneath(ws, p, maxCheckedFile)
		switch {
		case errors.Is(err, errOutside):
			out[p] = "a sequencer todo list that is a symlink leading out of the workspace"
		case tooLarge(err) != nil:
			out[p] = "a sequencer todo list " + err.Error() + ": taken for one with exec lines"
		case err == nil && todoExecs(b):
			sum := sha256.Sum256(b)
			out[p] = todoExecFinding + " (sha256 " + hex.EncodeToString(sum[:6]) + ")"
		}
	}
}

// todoExecFinding begins the finding of a todo list with exec lines that git reads as a
// regular file beneath the workspace (not one that leads out, nor one too large to read).
const todoExecFinding = "exec lines in a sequencer todo list, which git rebase --continue runs"

// ownRebase reports whether the finding d at p is a todo list with exec lines as git's own
// rebase writes it (a regular file of a git directory's sequencerTodos).
func ownRebase(p, d string) bool {
	return strings.HasPrefix(d, todoExecFinding) &&
		slices.ContainsFunc(sequencerTodos, func(f string) bool { return strings.HasSuffix(p, "/"+f) })
}

// sequencerLists returns the sequencer todo lists (sequencerTodos) that exist, with or without
// exec lines, in the git directories of repos (found by a scan: the .git of each of its tops,
// and its bare repositories), their submodules' and their linked worktrees' (each worktree
// stops a rebase in its own gitdir), as the scan reads them (scanGitDir).
func sequencerLists(ws string, repos gitRepos) map[string]bool {
	out := map[string]bool{}
	var visit func(gd string, depth int)
	visit = func(gd string, depth int) {
		if depth > maxGitNesting {
			return
		}
		for _, f := range sequencerTodos {
			if _, err := os.Lstat(filepath.Join(gd, f)); err == nil {
				out[filepath.Join(gd, f)] = true
			}
		}
		subs, _ := moduleGitDirs(gd)
		if names, err := readDirNames(filepath.Join(gd, "worktrees")); err == nil {
			for _, n := range names {
				subs = append(subs, filepath.Join(gd, "worktrees", n))
			}
		}
		for _, sub := range subs {
			visit(sub, depth+1)
		}
	}
	for _, top := range repos.tops {
		if p := repoIndex(ws, top); p != "" {
			visit(filepath.Dir(p), 0)
		}
	}
	for _, gd := range repos.gitdirs {
		visit(gd, 0)
	}
	return out
}

// checkRerere records the conflict resolutions git rerere keeps in gd (rr-cache/ID, in the
// common dir), each by the names, sizes and ctimes of its files (any write, rename or link
// moves a ctime; none is read). With the user's rerere.enabled, the host's next merge or rebase
// meeting a conflict whose preimage is recorded writes the recorded postimage as its
// resolution, says only "Resolved 'F' using previous resolution." and, with rerere.autoUpdate,
// stages it: a box that foresees a conflict could record a resolution of its own (review 14,
// F15). An entry that is new or changed is moved aside (git skips a folder whose name is not an
// id, and then only lost a remembered resolution); so is rr-cache itself, or an entry, as a
// symlink (git follows it where the scan does not).
func checkRerere(gd string, skip passOver, out map[string]string) {
	dir := filepath.Join(gd, "rr-cache")
	if skip.roots[dir] {
		return
	}
	const what = "a conflict resolution recorded by git rerere, which the host's next merge or rebase with rerere.enabled applies as its own"
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		if err == nil {
			t, _ := os.Readlink(dir)
			out[dir] = "git's recorded conflict resolutions (rr-cache) as a symlink to " + t
		}
		return
	}
	ents, err := readDirOwned(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		p := filepath.Join(dir, de.Name())
		switch {
		case skip.roots[p] || skip.moved(p):
		case de.Type()&os.ModeSymlink != 0:
			t, _ := os.Readlink(p)
			out[p] = what + " (rr-cache), as a symlink to " + t
		case de.IsDir():
			files, err := readDirOwned(p)
			if err != nil {
				continue
			}
			h := sha256.New()
			for _, f := range files {
				if fi, err := f.Info(); err == nil {
					_, _, ctime := identity(fi)
					fmt.Fprintf(h, "%s\x00%d\x00%d\x00", f.Name(), fi.Size(), ctime)
				}
			}
			out[p] = fmt.Sprintf("%s (rr-cache: %d files, identity %s)", what, len(files), hex.EncodeToString(h.Sum(nil)[:6]))
		}
	}
}

// todoExecs reports whether a todo list holds a line git's sequencer reads as an exec command:
// after leading blanks, "exec" or "x" ending the line or followed by a blank.
func todoExecs(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		l := strings.TrimLeft(line, " \t")
		for _, c := range []string{"exec", "x"} {
			if rest, ok := strings.CutPrefix(l, c); ok && (rest == "" || strings.ContainsRune(" \t\r\v\f", rune(rest[0]))) {
				return true
			}
		}
	}
	return false
}

// checkHooks records every hook in dir (a gitdir's hooks folder): each file git would run by
// its name, whatever its mode (a box can chmod), with a hash of its content so that a
// rewritten hook is a change. Samples and quarantined files are not hooks.
func checkHooks(ws, dir string, skip passOver, out map[string]string) {
	if skip.roots[dir] || skip.moved(dir) {
		return
	}
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		// git follows it and runs the hooks where it leads. The hooks there were recorded
		// before, and moving one aside through the link failed ("too many levels of symbolic
		// links"): a box-made submodule git directory whose hooks/ led to a folder of the
		// box's kept its post-checkout, which the host's git submodule update --init ran
		// (review 31b). The link itself is the finding: new or changed, it is moved aside.
		t, _ := os.Readlink(dir)
		out[dir] = "git hooks folder as a symlink to " + t
		return
	}
	ents, err := readDirOwned(dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		if de.IsDir() || strings.HasSuffix(name, ".sample") || skip.roots[p] || skip.moved(p) {
			continue
		}
		hashed(ws, p, "git hook "+name, out)
	}
}

// checkReplaceRefs records the loose replace refs of the git directory gd (refs/replace/<id>):
// git hands out the object each names wherever it reads <id> (a checkout, git submodule
// update), while git status and diff stay empty. An existing git directory's refs/replace is
// pinned while a box runs (plan.GitDirProtected); one the box makes (a submodule's, cloned
// into modules/ by git submodule update --init) is not, and a replace ref the box wrote there
// made the host's git submodule update --init check out the box's files under the pinned
// commit (review 31b). The finding is the folder, with a hash of its refs' names and contents:
// new or changed, the folder is moved aside whole (into refs/.agentbox-quarantined-N/, which no
// valid ref name enters). A ref file moved aside on its own keeps its place: renamed
// <id>.agentbox-quarantined-1, git still read it as a replace of <id> (it reads the name's
// first 40 hex digits). The packed ones are checkPackedRefs'.
func checkReplaceRefs(ws, gd string, skip passOver, out map[string]string) {
	dir := filepath.Join(gd, "refs", "replace")
	if skip.roots[dir] || skip.moved(dir) {
		return
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		t, _ := os.Readlink(dir)
		out[dir] = "git replace refs folder as a symlink to " + t
		return
	}
	names, err := readDirNames(dir)
	if err != nil || len(names) == 0 {
		return
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		b, _ := readBeneath(ws, filepath.Join(dir, n), maxCheckedFile)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	out[dir] = fmt.Sprintf("git replace refs (%d): git hands out the objects they name for others (sha256 %x)", len(names), h.Sum(nil)[:6])
}

// commonDir returns the common dir a gitdir's commondir file names (relative to the gitdir,
// or absolute), and whether it lies beneath ws ("" when the file is absent or empty). It reads
// the file as git's get_common_dir_noenv does: the whole of it, line ends at its end dropped,
// up to a NUL byte; blanks are part of the path (review 13: TrimSpace made " ../x" the scan's
// ../x, while git's common dir was the folder " ..", a box's). A file over 4 KiB, longer than
// any path git could open, is not read: err (a *tooLargeError) says so.
func commonDir(ws, gd string) (common string, ok bool, err error) {
	b, err := readBeneath(ws, filepath.Join(gd, "commondir"), 4096)
	if tooLarge(err) != nil {
		return "", false, err
	}
	if err != nil {
		return "", false, nil
	}
	c := cString(strings.TrimRight(string(b), "\r\n"))
	if c == "" {
		return "", false, nil
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gd, c)
	}
	c = filepath.Clean(c)
	return c, within(c, ws), nil
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
	gd, ok := ReadGitdir(dotGit)
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
	gd, ok := ReadGitdir(dotGit)
	if !ok || !within(gd, ws) {
		return "", false
	}
	return gd, true
}

// maxGitFile is the largest .git file git reads (setup.c, read_gitfile_gently: a longer
// one is "too large to be a .git file", and git uses none).
const maxGitFile = 1 << 20

// ReadGitdir reads a .git file ("gitdir: PATH") and returns the absolute, cleaned gitdir; ok
// is false when dotGit is not a regular file that git takes for one. It reads it as git's
// read_gitfile_gently does: "gitdir: " with its one space, then the rest of the file with the
// line ends at its end dropped, up to a NUL byte; blanks and inner line ends are part of the
// path (review 13: TrimSpace and the first line made "gitdir: g  " the gitdir g, while git's
// was the folder "g  ", a box's, whose config the scan never read). It opens dotGit without
// following a symlink and without blocking on a FIFO, and reads no file over 1 MiB, which git
// refuses as well: a box can leave any .git file in the workspace (a sparse one of many
// gigabytes, a FIFO swapped in after a Lstat), and the daemon reads them (review 12, F3).
func ReadGitdir(dotGit string) (string, bool) {
	f, err := openNoFollow(dotGit)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := readWhole(f, maxGitFile)
	if err != nil {
		return "", false
	}
	gd, ok := strings.CutPrefix(strings.TrimRight(string(b), "\r\n"), "gitdir: ")
	gd = cString(gd)
	if !ok || gd == "" {
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
