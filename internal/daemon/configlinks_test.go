package daemon

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/profile"
)

// TestConfigLinkFolders (review 19, F3): the folders whose symlinked entries refuse a
// workspace are the harness homes (~/.ssh, ~/.claude, ~/.codex, ~/.config, the profiles'
// ~/.config/opencode), the folders holding a profile's home entry beneath one, the other
// configuration folders (~/.cargo, ~/.config/systemd/user) and a moved $XDG_CONFIG_HOME; not
// a shared folder (~/.cache) that merely holds a harness home.
func TestConfigLinkFolders(t *testing.T) {
	set, err := profile.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := configLinkFolders(set, "/home/u", []string{"XDG_CONFIG_HOME=/home/u/cfg"})
	for _, want := range []string{"/home/u/.ssh", "/home/u/.claude", "/home/u/.codex", "/home/u/.gemini", "/home/u/.copilot",
		"/home/u/.config", "/home/u/.config/opencode", "/home/u/.cache/opencode", "/home/u/.gemini/agentbox-trust",
		"/home/u/.cargo", "/home/u/.config/systemd/user", "/home/u/.docker", "/home/u/cfg"} {
		if !slices.Contains(got, want) {
			t.Errorf("configLinkFolders lacks %s: %v", want, got)
		}
	}
	if slices.Contains(got, "/home/u/.cache") {
		t.Errorf("configLinkFolders holds ~/.cache, which only holds harness homes: %v", got)
	}
	if got := configLinkFolders(set, "", nil); got != nil {
		t.Errorf("configLinkFolders without a home = %v", got)
	}
}
