package plan

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// WorkspaceProtected are the workspace-relative paths of executable configuration that every
// launch protects: the next unboxed session (git, an editor, a shell hook, an agent) runs what
// they say. ".git" is special: a directory is bound onto itself read-write (so it cannot be
// renamed away) and the paths of GitDirProtected beneath it are bound read-only; a ".git" file
// (worktree, submodule) is bound read-only and the gitdir it points to is protected too when it
// lies beneath the workspace. A dev container's initializeCommand (.devcontainer/,
// .devcontainer.json) runs on the host when an editor or the devcontainer CLI opens the
// folder; VS Code's launch.json and mcp.json start programs too. The hook managers' files
// (HookManagerFiles) tell a hook the host has already installed what to run
// at the next `git commit` (pre-commit's `repo: local` runs any command); the other editors' and tools' files start
// programs or language servers when the folder is opened or entered (Cursor's and Zed's MCP
// servers and tasks, Helix's language servers, Neovim's and Vim's exrc, JetBrains' run
// configurations, mise's tasks and env, asdf's and mise's .tool-versions, whose path: versions
// put a folder of the workspace first on PATH, Emacs' directory-local eval). The package managers'
// and build tools' project files run what they name at the host's next ordinary command:
// npm's script-shell (.npmrc) at `npm test`, yarn's yarnPath, pnpm's .pnpmfile.cjs at install,
// cargo's build.rustc-wrapper (.cargo/config.toml) at `cargo metadata` (what rust-analyzer runs
// when an editor opens the folder), a rust-toolchain file's toolchain path at any cargo, and a
// go.work (most often git-ignored) whose use or replace directives make the host's `go build`
// and `go run` compile the box's code in place of a module's; and vendor/modules.txt, with which
// (consistent with go.mod) the go command builds from vendor/ by default (-mod=vendor) and never
// checks the vendored sources against go.sum: a box's `go mod vendor` and an edited dependency
// there were compiled into the host's next `go build` (review 12, F6). Maven's launcher reads
// .mvn/ from the project's top at every mvn (mvn -v too): jvm.config's -javaagent runs a jar in
// the host's JVM, extensions.xml loads core extensions, maven.config adds options (-s);
// gradle.properties' org.gradle.jvmargs starts the host's Gradle daemon with them, and the
// wrappers' properties (distributionUrl) name the Maven or Gradle that ./mvnw and ./gradlew
// download and run (review 14, F5). Cursor's .cursor/hooks.json and Windsurf's
// .windsurf/hooks.json are hooks the editors' agents run at their events without asking
// (review 14, F12).
var WorkspaceProtected = append([]string{
	".git",
	".gitmodules",
	".mcp.json",
	".claude/settings.json",
	".claude/settings.local.json",
	".vscode/settings.json",
	".vscode/tasks.json",
	".vscode/launch.json",
	".vscode/mcp.json",
	".envrc",
	".github/workflows",
	".devcontainer",
	".devcontainer.json",
	".cursor/mcp.json",
	".zed/settings.json",
	".zed/tasks.json",
	".helix/languages.toml",
	".helix/config.toml",
	".nvim.lua",
	".nvimrc",
	".exrc",
	".idea/workspace.xml",
	".mise.toml",
	"mise.toml",
	".tool-versions",
	".dir-locals.el",
	".npmrc",
	".yarnrc",
	".yarnrc.yml",
	".pnpmfile.cjs",
	".cargo/config",
	".cargo/config.toml",
	"rust-toolchain",
	"rust-toolchain.toml",
	"go.work",
	"vendor/modules.txt",
	".mvn/jvm.config",
	".mvn/maven.config",
	".mvn/extensions.xml",
	".mvn/wrapper/maven-wrapper.properties",
	"gradle.properties",
	"gradle/wrapper/gradle-wrapper.properties",
	".cursor/hooks.json",
	".windsurf/hooks.json",
}, HookManagerFiles()...)

// HookManagerFiles returns the files and folders that a git hook manager the host has already
// installed reads at each hook run, to decide what to run (review 12, F4: lefthook merged a
// box's .lefthook-local.yml into the host's next `git commit`): pinned at the workspace's top,
// and looked for in every subfolder by the workspace scan (integrity.NestedConfigFiles; a
// nested repository's top, or husky 4's package.json folder: review 13, F8). The folders among
// them are those of ProtectedDirs. They follow each tool's own rule rather than a list of the
// common spellings:
//   - pre-commit: .pre-commit-config.yaml (`repo: local` runs any command);
//   - lefthook (internal/config/loader.go): a main config MainConfigNames × Extensions and a
//     local one LocalConfigNames × Extensions, at the repository's top; the scripts of its
//     `scripts:` in source_dir and source_dir_local (.lefthook/, .lefthook-local/; others the
//     config names, the files of its extends and the folder of its remotes, integrity's
//     resolver protects as well) and in .config/lefthook/ and .config/lefthook-local/
//     (internal/command/run.go, getSourceDirs);
//   - overcommit (lib/overcommit/constants.rb, config/default.yml): .overcommit.yml,
//     .local-overcommit.yml and the plugin_directory .git-hooks/;
//   - husky 4 (cosmiconfig 7's search places for "husky", beside package.json): .huskyrc and
//     its .json, .yaml, .yml, .js, .cjs spellings, husky.config.js and .cjs. Husky 5 and later
//     run the core.hooksPath folder (.husky), which the git surface pins;
//   - lint-staged, which such a hook most often runs (npx lint-staged; lib/configFiles.js, in
//     every folder of the repository): .lintstagedrc and its .json, .yaml, .yml, .mjs, .js,
//     .cjs spellings, lint-staged.config.mjs, .js and .cjs, and the TypeScript spellings of
//     both (.ts, .mts, .cts) that newer versions read;
//   - commitlint, which a commit-msg hook runs (npx commitlint --edit; cosmiconfig's search
//     places for "commitlint"): .commitlintrc and its .json, .yaml, .yml, .js, .cjs, .mjs, .ts,
//     .cts spellings, commitlint.config.js, .cjs, .mjs, .ts and .cts.
//
// A package.json is not pinned (a box edits it as ordinary work); the part of it that husky 4,
// yorkie, pre-commit, lint-staged and simple-git-hooks read is watched by the workspace scan
// (integrity.PackageHookKeys).
func HookManagerFiles() []string {
	out := []string{".pre-commit-config.yaml"}
	for _, name := range []string{"lefthook", ".lefthook", ".config/lefthook"} {
		for _, local := range []string{"", "-local"} {
			for _, ext := range []string{".yml", ".yaml", ".json", ".jsonc", ".toml"} {
				out = append(out, name+local+ext)
			}
		}
	}
	out = append(out, ".lefthook", ".lefthook-local", ".config/lefthook", ".config/lefthook-local", ".overcommit.yml", ".local-overcommit.yml", ".git-hooks")
	for _, ext := range []string{"", ".json", ".yaml", ".yml", ".js", ".cjs"} {
		out = append(out, ".huskyrc"+ext)
	}
	out = append(out, "husky.config.js", "husky.config.cjs")
	for _, ext := range []string{"", ".json", ".yaml", ".yml", ".mjs", ".js", ".cjs", ".ts", ".mts", ".cts"} {
		out = append(out, ".lintstagedrc"+ext)
	}
	for _, ext := range []string{".mjs", ".js", ".cjs", ".ts", ".mts", ".cts"} {
		out = append(out, "lint-staged.config"+ext)
	}
	for _, ext := range []string{"", ".json", ".yaml", ".yml", ".js", ".cjs", ".mjs", ".ts", ".cts"} {
		out = append(out, ".commitlintrc"+ext)
	}
	for _, ext := range []string{".js", ".cjs", ".mjs", ".ts", ".cts"} {
		out = append(out, "commitlint.config"+ext)
	}
	return out
}

// WorkspaceProtectedGlobs are workspace-relative patterns (filepath.Match) whose existing
// matches are protected as well (".claude/settings.json" and ".claude/settings.local.json" are
// in WorkspaceProtected, so they are protected even when absent).
// A VS Code workspace file (*.code-workspace) holds settings, tasks and launch
// configurations of its own.
var WorkspaceProtectedGlobs = []string{".claude/settings*.json", "*.code-workspace"}

// GitDirProtected are the paths, relative to a git directory, that are bound read-only (or,
// when absent, guarded). Besides what makes git run a program: refs/replace/ and info/grafts
// make the host's git hand out objects and history a box chose (checkout, show, worktree add
// of a box's content while diff stays empty), and so do objects/info/alternates and
// http-alternates, which name other object stores git reads objects from (a folder of the box
// cache holding an object under a name of the repository's: review 13, F10); info/exclude
// hides files from status and clean.
var GitDirProtected = []string{"config", "config.worktree", "hooks", "commondir", "info/attributes",
	"info/exclude", "info/grafts", "refs/replace", "objects/info/alternates", "objects/info/http-alternates"}

// WorktreeGitDirProtected are the paths, relative to a linked worktree's git directory
// (GITDIR/worktrees/<name>), that are bound read-only: commondir says where the common dir
// (its config and hooks) is, gitdir points back to the worktree, config.worktree is its own
// configuration.
var WorktreeGitDirProtected = []string{"commondir", "gitdir", "config.worktree"}

// GitDirWatched are the paths, relative to a git directory, that the integrity watch
// snapshots but that stay writable: git must be able to move HEAD (switch, rebase).
var GitDirWatched = []string{"HEAD"}

// ProtectedDirs are the base names of protected paths that are directories when absent (a
// placeholder for them is an empty directory); every other absent protected path is a file,
// except the extra paths written with a trailing slash (see ProtectedDirPaths).
var ProtectedDirs = []string{"hooks", "workflows", ".git", ".devcontainer", "replace", ".lefthook", ".lefthook-local", "lefthook", "lefthook-local", ".git-hooks"}

// Protected is one resolved path of executable configuration that the box must not change.
type Protected struct {
	// Path is the absolute host path; beneath the workspace it is also the in-box path.
	Path string `json:"path"`
	// Beneath is the directory Path resolves beneath (the workspace): every directory between
	// it and Path is bound onto itself, so that no parent can be renamed away.
	Beneath string `json:"beneath"`
	// Staged, when set, is the host path of a staged copy of the file at Path (made by
	// changes.Stage, outside the workspace): it is bound writable at Path instead of Path
	// itself read-only, so that what the box writes there stays in the copy and becomes a
	// proposed change. "" binds Path read-only.
	Staged string `json:"staged,omitempty"`
}

// ProtectedPaths returns the workspace-relative protected paths of one launch: the defaults
// (WorkspaceProtected) followed by extra (the profile's executable configuration; relative to
// the workspace, or absolute beneath it — others are dropped), cleaned, de-duplicated, sorted.
func ProtectedPaths(ws string, extra []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(rel string) {
		rel = filepath.Clean(rel)
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) || seen[rel] {
			return
		}
		seen[rel] = true
		out = append(out, rel)
	}
	for _, p := range WorkspaceProtected {
		add(p)
	}
	for _, p := range extra {
		if r, ok := extraRel(ws, p); ok {
			add(r)
		}
	}
	sort.Strings(out)
	return out
}

// extraRel returns an extra protected path relative to ws (see ProtectedPaths), uncleaned.
func extraRel(ws, p string) (string, bool) {
	if !filepath.IsAbs(p) {
		return p, true
	}
	r, err := filepath.Rel(filepath.Clean(ws), filepath.Clean(p))
	if err != nil {
		return "", false
	}
	if strings.HasSuffix(p, "/") {
		r += "/"
	}
	return r, true
}

// ProtectedDirPaths returns the workspace-relative protected paths (as ProtectedPaths returns
// them) that are directories when absent: those whose base name is in ProtectedDirs, and the
// entries of extra written with a trailing slash (".opencode/", ".claude/commands/": a
// profile's workspaceConfig directories).
func ProtectedDirPaths(ws string, extra []string) map[string]bool {
	dirs := map[string]bool{}
	for _, rel := range ProtectedPaths(ws, extra) {
		if slices.Contains(ProtectedDirs, filepath.Base(rel)) {
			dirs[rel] = true
		}
	}
	for _, p := range extra {
		if r, ok := extraRel(ws, p); ok && strings.HasSuffix(r, "/") {
			dirs[filepath.Clean(r)] = true
		}
	}
	return dirs
}

// ProtectMounts returns the mounts that pin ps inside the box: every directory strictly
// between a path's Beneath and the path bound onto itself read-write (a mount point cannot be
// renamed or removed, so "mv .git x" and "mv .claude x" fail while git and editors keep
// working inside), then each protected path bound onto itself read-only (it cannot be written,
// truncated, chmod'ed, renamed over or unlinked), or its staged copy bound writable over it (it
// can be written in place, but not renamed over or unlinked). Sources resolve beneath Beneath,
// so a symlink planted by an earlier box cannot redirect a bind outside it. The result is
// sorted, parents first, and depends only on ps.
func ProtectMounts(ps []Protected) []Mount {
	ro := map[string]Protected{}
	rw := map[string]string{} // dir → beneath
	for _, p := range ps {
		path, base := filepath.Clean(p.Path), filepath.Clean(p.Beneath)
		if !filepath.IsAbs(path) || !filepath.IsAbs(base) || !Within(path, base) {
			continue
		}
		ro[path] = Protected{Path: path, Beneath: base, Staged: p.Staged}
		for _, d := range parentsBetween(path, base) {
			rw[d] = base
		}
	}
	var targets []string
	for d := range rw {
		if _, isRO := ro[d]; !isRO {
			targets = append(targets, d)
		}
	}
	for p := range ro {
		targets = append(targets, p)
	}
	sortParentsFirst(targets)
	out := make([]Mount, 0, len(targets))
	for _, t := range targets {
		if p, isRO := ro[t]; isRO && p.Staged != "" {
			out = append(out, Mount{Kind: MountBind, Source: p.Staged, Target: t, Staged: true})
			continue
		} else if isRO {
			out = append(out, Mount{Kind: MountBind, Source: t, Target: t, ReadOnly: true, Beneath: p.Beneath})
			continue
		}
		out = append(out, Mount{Kind: MountBind, Source: t, Target: t, Beneath: rw[t]})
	}
	return out
}

// parentsBetween returns the folders strictly between path and base (base excluded), deepest
// first: those a box could rename to carry path away.
func parentsBetween(path, base string) []string {
	var out []string
	for d := filepath.Dir(path); d != base && Within(d, base); d = filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}

// sortParentsFirst sorts paths so that a shorter path sorts before the paths beneath it,
// compared by components ("/w/.git" < "/w/.git/config" < "/w/.git-x").
func sortParentsFirst(paths []string) {
	sort.Slice(paths, func(i, j int) bool {
		return strings.ReplaceAll(paths[i], "/", "\x00") < strings.ReplaceAll(paths[j], "/", "\x00")
	})
}

// PinParents returns the mounts that keep each of paths where it is inside the box: every
// folder strictly between a path and beneath bound onto itself read-write (a mount point
// cannot be renamed or removed, so that a box cannot move a dependency folder's project away
// and make a new one at its path, which the host would then use), parents first, leaving out
// the folders a mount of have already targets.
func PinParents(paths []string, beneath string, have []Mount) []Mount {
	base := filepath.Clean(beneath)
	taken := map[string]bool{}
	for _, m := range have {
		taken[filepath.Clean(m.Target)] = true
	}
	var targets []string
	for _, p := range paths {
		for _, d := range parentsBetween(filepath.Clean(p), base) {
			if !taken[d] {
				taken[d] = true
				targets = append(targets, d)
			}
		}
	}
	sortParentsFirst(targets)
	out := make([]Mount, 0, len(targets))
	for _, t := range targets {
		out = append(out, Mount{Kind: MountBind, Source: t, Target: t, Beneath: base})
	}
	return out
}
