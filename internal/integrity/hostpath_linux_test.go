package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonPathRefusesWorkspace (review 18, F1, F2): a daemon started with a workspace
// folder on its own PATH (here started by `agentbox daemon --detach` from another folder, as
// from a direnv project's shell or an npm script) finds the host programs it runs through it;
// every launch on that workspace is refused, from a shell whose PATH is clean too, naming the
// entry, the daemon's PATH and how to restart the daemon without it. A dependency folder the
// launch would overlay (node_modules beside a package.json) is no exemption for the daemon's
// PATH: the daemon's git is not the box's.
func TestDaemonPathRefusesWorkspace(t *testing.T) {
	for _, c := range []struct{ name, entry, marker, helper, gitHelper string }{
		{name: "bin", entry: "bin"},
		{name: "node_modules", entry: "node_modules/.bin", marker: "package.json"},
		// No PATH entry: the gateway's credential helper, which the relay runs on the host,
		// is a script of the workspace.
		{name: "credential_helper", helper: "scripts/token"},
		// The git relay's credential helper: run at the relay's first request for its prefix,
		// after the launch's rule, so never found before it (docs18's reading).
		{name: "git_credential_helper", helper: "scripts/git-token", gitHelper: "yes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			if c.marker != "" {
				write(t, filepath.Join(e.work, c.marker), "{}\n")
				write(t, filepath.Join(e.work, c.entry, "tool"), "#!/bin/sh\necho tool\n")
			}
			clean := os.Getenv("PATH")
			entry := filepath.Join(e.work, c.entry)
			if c.helper != "" {
				entry = filepath.Join(e.work, c.helper)
				write(t, entry, "#!/bin/sh\necho key\n")
				os.Chmod(entry, 0o755)
				cfg := filepath.Join(e.root, "c", "agentbox", "config.yaml")
				b, err := os.ReadFile(cfg)
				if err != nil {
					t.Fatal(err)
				}
				extra := "gateway:\n  anthropic:\n    credential:\n      command: [" + entry + "]\n"
				if c.gitHelper != "" {
					extra = "git:\n  allow: [git.example.org/team]\n  credentials:\n    - prefix: git.example.org/team\n      username: oauth2\n      command: [" + entry + "]\n"
				}
				write(t, cfg, string(b)+extra)
			} else {
				e.setPath(entry + ":" + clean)
			}
			start := e.cmd("daemon", "--detach")
			start.Dir = e.root // not the workspace: the daemon keeps the entry
			if out, err := start.CombinedOutput(); err != nil {
				t.Fatalf("agentbox daemon --detach: %v\n%s", err, out)
			}
			e.setPath(clean)
			out, stderr, code := e.runAll("run", "true")
			all := out + stderr
			if code != 125 || !strings.Contains(all, "workspace_refused") {
				t.Fatalf("a launch on a workspace holding %s (on the daemon's own PATH, or the credential helper): exit %d, want 125 (refused)\n%s", c.entry+c.helper, code, all)
			}
			t.Logf("refused:\n%s", all)
			for _, want := range []string{entry, "the agentbox daemon's own PATH", "agentbox daemon stop"} {
				if !strings.Contains(all, want) {
					t.Errorf("the refusal does not say %q:\n%s", want, all)
				}
			}
		})
	}
}
