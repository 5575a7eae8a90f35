package daemon

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
)

// configLinkFolders returns the folders (absolute) among whose entries a symlink into the
// workspace refuses it (plan.FindConfigLinks, plan.CheckConfigLinks): each harness home
// (plan.HarnessHomes and those of the profiles in set, ~/.ssh among them), each folder holding a profile's
// home entry, and plan.ConfigFolders, beneath home (as $HOME says it); and $XDG_CONFIG_HOME
// where the launch's environment env moves it. The home's own dot-entries are read by
// FindConfigLinks itself.
func configLinkFolders(set *profile.Set, home string, env []string) []string {
	if home == "" {
		return nil
	}
	rel := append(append([]string(nil), plan.HarnessHomes...), plan.ConfigFolders...)
	if set != nil {
		rel = append(append(rel, set.HarnessHomes()...), set.HomeEntryFolders()...)
	}
	out := make([]string, 0, len(rel)+1)
	for _, r := range rel {
		out = append(out, filepath.Join(home, r))
	}
	if xdg := envValue(env, "XDG_CONFIG_HOME"); filepath.IsAbs(xdg) {
		out = append(out, filepath.Clean(xdg))
	}
	return out
}

// findConfigLinks begins finding the symlinks among the host's configuration for a launch
// with environment env and the profiles in set (plan.FindLinks: the home's dot-entries, the
// entries of configLinkFolders) and among the programs of the folders of the launch's PATH and
// of the daemon's own (a program linked from ~/.local/bin into a dotfiles repository), and
// returns the wait for them, once per launch. It runs beside the launch's other workspace
// rules: a readdir of some 40 folders and the links' resolution cost more than the 0.2 ms a
// launch may spend on it (docs/benchmarks.md); what it read of a folder is kept for the next
// launch while the folder is unchanged (plan's linkCache).
func (d *Daemon) findConfigLinks(set *profile.Set, env []string) func() ([]plan.ConfigLink, error) {
	home, _ := os.UserHomeDir()
	programs := append(filepath.SplitList(envValue(env, "PATH")), filepath.SplitList(d.hostPath)...)
	type found struct {
		links []plan.ConfigLink
		err   error
	}
	done := make(chan found, 1) // never waited for when the launch is refused before
	go func() {
		links, err := plan.FindLinks(home, configLinkFolders(set, home, env), programs)
		done <- found{links, err}
	}()
	return sync.OnceValues(func() ([]plan.ConfigLink, error) { f := <-done; return f.links, f.err })
}
