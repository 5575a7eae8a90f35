package plan

import (
	"reflect"
	"testing"
)

func TestProtectedPaths(t *testing.T) {
	got := ProtectedPaths("/w", []string{"/w/.claude/agents", "tools/hook.sh", "/elsewhere/x", "../up", ".envrc"})
	want := []string{".cargo/config", ".cargo/config.toml", ".claude/agents", ".claude/settings.json", ".claude/settings.local.json", ".commitlintrc",
		".commitlintrc.cjs", ".commitlintrc.cts", ".commitlintrc.js", ".commitlintrc.json", ".commitlintrc.mjs", ".commitlintrc.ts",
		".commitlintrc.yaml", ".commitlintrc.yml", ".config/lefthook", ".config/lefthook-local", ".config/lefthook-local.json", ".config/lefthook-local.jsonc", ".config/lefthook-local.toml", ".config/lefthook-local.yaml",
		".config/lefthook-local.yml", ".config/lefthook.json", ".config/lefthook.jsonc", ".config/lefthook.toml", ".config/lefthook.yaml", ".config/lefthook.yml",
		".cursor/hooks.json", ".cursor/mcp.json", ".devcontainer", ".devcontainer.json", ".dir-locals.el", ".envrc",
		".exrc", ".git", ".git-hooks", ".github/workflows", ".gitmodules", ".helix/config.toml",
		".helix/languages.toml", ".huskyrc", ".huskyrc.cjs", ".huskyrc.js", ".huskyrc.json", ".huskyrc.yaml",
		".huskyrc.yml", ".idea/workspace.xml", ".lefthook", ".lefthook-local", ".lefthook-local.json", ".lefthook-local.jsonc",
		".lefthook-local.toml", ".lefthook-local.yaml", ".lefthook-local.yml", ".lefthook.json", ".lefthook.jsonc", ".lefthook.toml",
		".lefthook.yaml", ".lefthook.yml", ".lintstagedrc", ".lintstagedrc.cjs", ".lintstagedrc.cts", ".lintstagedrc.js",
		".lintstagedrc.json", ".lintstagedrc.mjs", ".lintstagedrc.mts", ".lintstagedrc.ts", ".lintstagedrc.yaml", ".lintstagedrc.yml",
		".local-overcommit.yml", ".mcp.json", ".mise.toml", ".mvn/extensions.xml", ".mvn/jvm.config", ".mvn/maven.config",
		".mvn/wrapper/maven-wrapper.properties", ".npmrc", ".nvim.lua", ".nvimrc", ".overcommit.yml", ".pnpmfile.cjs",
		".pre-commit-config.yaml", ".tool-versions", ".vscode/launch.json", ".vscode/mcp.json", ".vscode/settings.json", ".vscode/tasks.json",
		".windsurf/hooks.json", ".yarnrc", ".yarnrc.yml", ".zed/settings.json", ".zed/tasks.json", "commitlint.config.cjs",
		"commitlint.config.cts", "commitlint.config.js", "commitlint.config.mjs", "commitlint.config.ts", "go.work", "gradle.properties",
		"gradle/wrapper/gradle-wrapper.properties", "husky.config.cjs", "husky.config.js", "lefthook-local.json", "lefthook-local.jsonc", "lefthook-local.toml",
		"lefthook-local.yaml", "lefthook-local.yml", "lefthook.json", "lefthook.jsonc", "lefthook.toml", "lefthook.yaml",
		"lefthook.yml", "lint-staged.config.cjs", "lint-staged.config.cts", "lint-staged.config.js", "lint-staged.config.mjs", "lint-staged.config.mts",
		"lint-staged.config.ts", "mise.toml", "rust-toolchain", "rust-toolchain.toml", "tools/hook.sh", "vendor/modules.txt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProtectedPaths:\n got %q\nwant %q", got, want)
	}
}

func TestProtectMounts(t *testing.T) {
	ps := []Protected{
		{Path: "/w/.git/hooks", Beneath: "/w"},
		{Path: "/w/.git/config", Beneath: "/w"},
		{Path: "/w/.claude/settings.json", Beneath: "/w"},
		{Path: "/w/.envrc", Beneath: "/w", Staged: "/s/box/.envrc"},
		{Path: "/w/.git/modules/a/b/config", Beneath: "/w"},
		{Path: "/elsewhere/x", Beneath: "/w"}, // not beneath: dropped
	}
	got := ProtectMounts(ps)
	want := []Mount{
		{Kind: MountBind, Source: "/w/.claude", Target: "/w/.claude", Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.claude/settings.json", Target: "/w/.claude/settings.json", ReadOnly: true, Beneath: "/w"},
		{Kind: MountBind, Source: "/s/box/.envrc", Target: "/w/.envrc", Staged: true},
		{Kind: MountBind, Source: "/w/.git", Target: "/w/.git", Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/config", Target: "/w/.git/config", ReadOnly: true, Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/hooks", Target: "/w/.git/hooks", ReadOnly: true, Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/modules", Target: "/w/.git/modules", Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/modules/a", Target: "/w/.git/modules/a", Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/modules/a/b", Target: "/w/.git/modules/a/b", Beneath: "/w"},
		{Kind: MountBind, Source: "/w/.git/modules/a/b/config", Target: "/w/.git/modules/a/b/config", ReadOnly: true, Beneath: "/w"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProtectMounts:\n got %+v\nwant %+v", got, want)
	}
	// Deterministic whatever the input order.
	rev := append([]Protected(nil), ps...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if !reflect.DeepEqual(ProtectMounts(rev), got) {
		t.Error("ProtectMounts depends on input order")
	}
}

// TestPinParents: the folders strictly between each path and the top, parents first, once
// each, without those an earlier mount already targets.
func TestPinParents(t *testing.T) {
	have := []Mount{{Kind: MountBind, Source: "/w/web", Target: "/w/web", Beneath: "/w"}}
	got := PinParents([]string{"/w/web/app/node_modules", "/w/a/b/.venv", "/w/node_modules", "/w/a/target", "/elsewhere/x/y"}, "/w", have)
	var targets []string
	for _, m := range got {
		if m.Kind != MountBind || m.Source != m.Target || m.ReadOnly || m.Beneath != "/w" {
			t.Errorf("not a read-write bind onto itself beneath /w: %+v", m)
		}
		targets = append(targets, m.Target)
	}
	if want := []string{"/w/a", "/w/a/b", "/w/web/app"}; !reflect.DeepEqual(targets, want) {
		t.Errorf("PinParents targets %v, want %v", targets, want)
	}
}
