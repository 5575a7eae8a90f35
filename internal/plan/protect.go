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
// folder; VS Code's launch.json and mcp.json start programs too. The pre-commit and lefthook
// files tell a hook the host has already installed what to run at the next `git commit`
// (pre-commit's `repo: local` runs any command); the other editors' and tools' files start
// programs or language servers when the folder is opened or entered (Cursor's and Zed's MCP
// servers and tasks, Helix's language servers, Neovim's and Vim's exrc, JetBrains' run
// configurations, mise's tasks and env, Emacs' directory-local eval). The package managers'
// and build tools' project files run what they name at the host's next ordinary command:
// npm's script-shell (.npmrc) at `npm test`, yarn's yarnPath, pnpm's .pnpmfile.cjs at install,
// cargo's build.rustc-wrapper (.cargo/config.toml) at `cargo metadata` (what rust-analyzer runs
// when an editor opens the folder), a rust-toolchain file's toolchain path at any cargo, and a
// go.work (most often git-ignored) whose use or replace directives make the host's `go build`
// and `go run` compile the box's code in place of a module's.
var WorkspaceProtected = []string{
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
	".pre-commit-config.yaml",
	".lefthook.yml",
	".lefthook.yaml",
	"lefthook.yml",
	"lefthook.yaml",
	"lefthook-local.yml",
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
}

// WorkspaceProtectedGlobs are workspace-relative patterns (filepath.Match) whose existing
// matches are protected as well (".claude/settings.json" and ".claude/settings.local.json" are
// in WorkspaceProtected, so they are protected even when absent).
// A VS Code workspace file (*.code-workspace) holds settings, tasks and launch
// configurations of its own.
var WorkspaceProtectedGlobs = []string{".claude/settings*.json", "*.code-workspace"}

// GitDirProtected are the paths, relative to a git directory, that are bound read-only.
var GitDirProtected = []string{"config", "config.worktree", "hooks", "commondir", "info/attributes"}

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
var ProtectedDirs = []string{"hooks", "workflows", ".git", ".devcontainer"}

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
		for d := filepath.Dir(path); d != base && Within(d, base); d = filepath.Dir(d) {
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
	// Parents first: a shorter path sorts before the paths beneath it when compared by
	// components ("/w/.git" < "/w/.git/config" < "/w/.git-x").
	sort.Slice(targets, func(i, j int) bool {
		return strings.ReplaceAll(targets[i], "/", "\x00") < strings.ReplaceAll(targets[j], "/", "\x00")
	})
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
