package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackCommandPathsMissed (review 19b): plan.CheckHostFiles refuses a workspace holding a
// path a credential helper's arguments name, and those paths are CommandPaths'. Its comment
// and docs/security.md say "The relays run a credential command in "/", so a relative path
// names nothing a box writes" and that ~/ and $HOME/ are read as the home. Both miss ordinary
// ways a shell names the same file, and the relay (relay.CredentialSource, cmd.Dir "/", the
// daemon's own environment, $HOME set) runs each of these commands' script from the
// workspace /home/u/proj, on the host, unboxed, at the box's first relay request:
//
//   - a relative path, resolved from "/": [/bin/sh, home/u/proj/token];
//   - "$HOME" quoted apart from the rest: [/bin/sh, -c, '"$HOME"/proj/token'] (tokens
//     "$HOME", which is the home, not within the workspace, and "/proj/token");
//   - "${HOME}" likewise (the token "${HOME}" alone is not read as the home at all);
//   - cd to the home, then a relative path: [/bin/sh, -c, 'cd && exec ./proj/token'];
//   - env's -C (chdir) and a relative program: [/usr/bin/env, -C, /home/u, ./proj/token]
//     (tokens "/home/u", the home, and "./proj/token").
//
// Each command here runs /home/u/proj/token; CommandPaths must return a path that is, or is
// beneath, /home/u/proj (or refuse the command) for the workspace rule to see it.
func TestAttackCommandPathsMissed(t *testing.T) {
	const home, ws = "/home/u", "/home/u/proj"
	for _, c := range []struct {
		name string
		cmd  []string
	}{
		{"relative_from_root", []string{"/bin/sh", "home/u/proj/token"}},
		{"quoted_home", []string{"/bin/sh", "-c", `"$HOME"/proj/token`}},
		{"braced_home_quoted", []string{"/bin/sh", "-c", `"${HOME}"/proj/token`}},
		{"cd_home", []string{"/bin/sh", "-c", "cd && exec ./proj/token"}},
		{"env_chdir", []string{"/usr/bin/env", "-C", "/home/u", "./proj/token"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths, _, err := CommandPaths(c.cmd, home)
			if err != nil && CheckCommand(c.cmd) != nil {
				return // refused (at load: validateGateway, validateBrokers)
			}
			for _, p := range paths {
				if p == ws || strings.HasPrefix(p, ws+string(filepath.Separator)) {
					return
				}
			}
			t.Errorf("CommandPaths(%q) = %q: no path in the workspace %s, though the relay (run in /, $HOME=%s) runs %s/token", c.cmd, paths, ws, home, ws)
		})
	}
}
