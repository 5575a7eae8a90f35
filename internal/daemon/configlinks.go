package daemon

import (
	"path/filepath"

	"github.com/agentbox/agentbox/internal/plan"
)

// configLinkFolders returns the folders (absolute) among whose entries a symlink into the
// workspace refuses it (plan.FindConfigLinks, plan.CheckConfigLinks): each harness home
// (plan.HarnessHomes and the profiles', ~/.ssh among them), each folder holding a profile's
// home entry, and plan.ConfigFolders, beneath home (as $HOME says it); and $XDG_CONFIG_HOME
// where the launch's environment env moves it. The home's own dot-entries are read by
// FindConfigLinks itself.
func (d *Daemon) configLinkFolders(home string, env []string) []string {
	if home == "" {
		return nil
	}
	rel := append(append([]string(nil), plan.HarnessHomes...), plan.ConfigFolders...)
	if set := d.profileSet(); set != nil {
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

// checkConfigLinks reports why ws must not be the workspace of a launch with environment
// env because a symlink among the host's configuration leads into it (plan.CheckConfigLinks:
// the home's dot-entries, the entries of configLinkFolders).
func (d *Daemon) checkConfigLinks(ws, home string, env []string) error {
	return plan.CheckConfigLinks(ws, home, plan.FindConfigLinks(home, d.configLinkFolders(home, env)))
}
