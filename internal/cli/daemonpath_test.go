package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDaemonPath (review 18, F1): a daemon agentbox run starts outlives the shell it starts
// from, and refuses every workspace holding a folder of its PATH; it starts with the shell's
// PATH less the relative entries and those in the project it starts for (the workspace, and
// the git repository holding it), the home's and the system's kept.
func TestDaemonPath(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	repo := filepath.Join(home, "src", "p")
	sub := filepath.Join(repo, "web")
	for _, d := range []string{filepath.Join(repo, ".git"), sub, filepath.Join(home, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(home, "p-link")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	path := strings.Join([]string{
		filepath.Join(sub, "node_modules", ".bin"), // in the workspace
		filepath.Join(repo, "bin"),                 // in its repository
		filepath.Join(link, "tools"),               // in it through a symlink
		"bin", "",                                  // relative
		filepath.Join(home, "bin"), "/usr/bin", filepath.Join(home, "src", "q", "bin"),
	}, ":")
	got, dropped := daemonPath(path, []string{sub, home, "/"})
	if want := strings.Join([]string{filepath.Join(home, "bin"), "/usr/bin", filepath.Join(home, "src", "q", "bin")}, ":"); got != want {
		t.Errorf("daemonPath = %q, want %q", got, want)
	}
	if len(dropped) != 5 {
		t.Errorf("dropped %v, want the 5 entries named", dropped)
	}
	if got, dropped := daemonPath("/usr/bin:/bin", nil); got != "/usr/bin:/bin" || !reflect.DeepEqual(dropped, []string(nil)) {
		t.Errorf("daemonPath with no project = %q, %v", got, dropped)
	}
}
