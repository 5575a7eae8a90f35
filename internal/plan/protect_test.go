package plan

import (
	"reflect"
	"testing"
)

func TestProtectedPaths(t *testing.T) {
	got := ProtectedPaths("/w", []string{"/w/.claude/agents", "tools/hook.sh", "/elsewhere/x", "../up", ".envrc"})
	want := []string{".cargo/config", ".cargo/config.toml", ".claude/agents", ".claude/settings.json", ".claude/settings.local.json", ".cursor/mcp.json", ".devcontainer", ".devcontainer.json",
		".dir-locals.el", ".envrc", ".exrc", ".git", ".github/workflows", ".gitmodules", ".helix/config.toml", ".helix/languages.toml",
		".idea/workspace.xml", ".lefthook.yaml", ".lefthook.yml", ".mcp.json", ".mise.toml", ".npmrc", ".nvim.lua", ".nvimrc", ".pnpmfile.cjs", ".pre-commit-config.yaml",
		".vscode/launch.json", ".vscode/mcp.json", ".vscode/settings.json", ".vscode/tasks.json", ".yarnrc", ".yarnrc.yml", ".zed/settings.json", ".zed/tasks.json",
		"go.work", "lefthook-local.yml", "lefthook.yaml", "lefthook.yml", "mise.toml", "rust-toolchain", "rust-toolchain.toml", "tools/hook.sh"}
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
