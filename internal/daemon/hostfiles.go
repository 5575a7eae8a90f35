package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/plan"
)

// credentialPrograms returns the programs the credential commands of cfg name (the gateway's
// and git.credentials'), which the relays run on the host, unboxed: each first word named by
// an absolute path as written (found or not: a box could make it), and each found
// (hostprog.Find: through the daemon's PATH for a bare name, once) with its symlinks
// resolved. err is the first one not found, as a launch's refusal naming the key, the
// program and what to do: the relay runs what was found at its start and never looks again
// (relay.NewCredentialSource), so a helper absent at the launch would fail every request, and
// one looked up again at its use could be a file a box wrote meanwhile (review 19, F1).
func credentialPrograms(cfg config.Config) (progs []string, err error) {
	for _, cr := range cfg.Credentials() {
		if len(cr.Command) == 0 {
			continue
		}
		if cerr := config.CheckCommand(cr.Command); cerr != nil {
			if err == nil {
				err = &api.Error{Code: api.CodeConfigInvalid,
					Message: fmt.Sprintf("%s.command: %v; nothing is launched, since the relay would run it on the host for the box's requests", cr.Key, cerr),
					Hint:    fmt.Sprintf("name the credential helper's script by its absolute path in %s.command, then launch again", cr.Key)}
			}
			continue
		}
		name := cr.Command[0]
		if filepath.IsAbs(name) {
			progs = append(progs, filepath.Clean(name))
		}
		p, ferr := hostprog.Find(name)
		if ferr != nil {
			if err == nil {
				err = &api.Error{Code: api.CodeConfigInvalid,
					Message: fmt.Sprintf("%s.command: the credential helper %q cannot be run: %v; nothing is launched, since the relay would run it on the host for the box's requests and finds it only once, at the launch", cr.Key, name, ferr),
					Hint:    fmt.Sprintf("install it (executable, outside any workspace), or name an installed helper by its absolute path in %s.command, then launch again", cr.Key)}
			}
			continue
		}
		progs = append(progs, p.Path, p.Real)
	}
	return progs, err
}

// configHostFiles are the files of the configuration eff that the daemon reads or runs on the
// host, outside any box, for plan.CheckHostFiles: agentbox's own configuration files (the user
// config, $AGENTBOX_CONFIG, the system policy: a box that rewrote one would set the next
// launch's credential commands, egress and mounts, review 19, F2), the credential files the
// relays read (F4), and every path the credential helpers' arguments name (a script run by an
// interpreter, [/bin/sh, WS/token]: F1). home is the user's home ($HOME), for ~/ in an
// argument.
func (d *Daemon) configHostFiles(eff *config.Effective, home string) []plan.HostFile {
	var out []plan.HostFile
	for _, f := range d.opts.Config.Files() {
		out = append(out, plan.HostFile{
			StartupFile: plan.StartupFile{Path: f, Why: "the agentbox daemon reads this configuration at every launch"},
			Risk:        "so what a box writes there the next launch runs with: a credential command the relay runs on the host, unboxed, a looser egress or mounts",
			Fix:         fmt.Sprintf("keep agentbox's configuration out of the workspace: make %s a regular file of its own (cp --remove-destination \"$(readlink -f %s)\" %s), or work on a copy of the workspace", f, f, f),
		})
	}
	where := func(key string) string {
		if src := eff.Sources[key]; src.File != "" {
			return " in " + src.File
		}
		return ""
	}
	for _, cr := range eff.Config.Credentials() {
		in := where(cr.Source)
		if cr.File != "" {
			key := cr.Key + ".file"
			out = append(out, plan.HostFile{
				StartupFile: plan.StartupFile{Path: cr.File, Why: "the relay reads the credential there, host-side, for the box's requests"},
				Field:       key + in,
				Risk:        "so the box could read the secret it is never to see, or replace it",
				Fix:         fmt.Sprintf("move the credential file out of the workspace (mode 0600) and name its new place in %s%s, or work on a project directory that does not hold it", key, in),
			})
		}
		// A command CommandPaths cannot read is refused at load (config.CheckCommand), and
		// again by credentialPrograms at the launch: none of its paths is trusted here.
		paths, index, _ := config.CommandPaths(cr.Command, home)
		for i, p := range paths {
			key := cr.Key + ".command"
			out = append(out, plan.HostFile{
				StartupFile: plan.StartupFile{Path: p, Why: fmt.Sprintf("the relay runs the credential helper %q on the host, unboxed, with it (argument %d)", cr.Command[0], index[i])},
				Field:       key + in,
				Risk:        "so a script the box writes there runs on the host before any review",
				Fix:         fmt.Sprintf("keep the credential helper and what it runs outside the workspace and name them there in %s%s, or work on a project directory that does not hold them", key, in),
			})
		}
	}
	return out
}
