package daemon

import (
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// startupFiles are the host's start-up files that no workspace may hold
// (plan.CheckStartupFiles): the home's (plan.HomeStartup), and those of them beneath
// ~/.config where the caller's environment env moves that folder ($XDG_CONFIG_HOME: git's
// configuration, fish's, neovim's, tmux's). home is the home as $HOME says it.
//
// The files git's configuration includes, and its core.hooksPath and init.templateDir
// folders, are not refused: the integrity resolver pins them where they lie in the workspace,
// through a symlink too (integrity's userConfig), as review 14 chose for a folder of
// repositories whose own .gitconfig the user's includeIf names.
func startupFiles(home string, env []string) []plan.StartupFile {
	out := plan.HomeStartup(home)
	xdg := envValue(env, "XDG_CONFIG_HOME")
	if !filepath.IsAbs(xdg) || home == "" || filepath.Clean(xdg) == filepath.Join(home, ".config") {
		return out
	}
	for _, f := range plan.HomeStartupFiles {
		if rest, ok := strings.CutPrefix(f.Path, ".config/"); ok {
			out = append(out, plan.StartupFile{Path: filepath.Join(xdg, rest), Why: f.Why})
		}
	}
	return out
}
