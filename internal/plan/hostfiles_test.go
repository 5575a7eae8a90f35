package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPathTrail: the places the kernel passes through to reach a path: each symlink's own
// location and where the path ends, a dangling link's target included (review 19, F2: a
// config.yaml linked to a dotfiles file that is not there yet is made there).
func TestPathTrail(t *testing.T) {
	root := mkHome(t, "cfg", "dot", "real")
	symlink(t, filepath.Join(root, "dot", "agentbox.yaml"), filepath.Join(root, "cfg", "config.yaml")) // dangling
	symlink(t, "../real", filepath.Join(root, "dot", "rel"))
	symlink(t, "loop", filepath.Join(root, "loop"))
	for _, c := range []struct {
		name, p string
		want    []string
	}{
		{"plain", filepath.Join(root, "real", "x"), []string{filepath.Join(root, "real", "x")}},
		{"dangling link", filepath.Join(root, "cfg", "config.yaml"), []string{filepath.Join(root, "cfg", "config.yaml"), filepath.Join(root, "dot", "agentbox.yaml")}},
		{"relative link on the way", filepath.Join(root, "dot", "rel", "y"), []string{filepath.Join(root, "dot", "rel"), filepath.Join(root, "real", "y")}},
		{"dotdot", filepath.Join(root, "real") + "/../dot/z", []string{filepath.Join(root, "dot", "z")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := PathTrail(c.p); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("PathTrail(%s) = %q, want %q", c.p, got, c.want)
			}
		})
	}
	t.Run("loop", func(t *testing.T) {
		got := PathTrail(filepath.Join(root, "loop", "x"))
		if len(got) == 0 || len(got) > maxLinks+2 {
			t.Fatalf("PathTrail through a loop = %d places, want at most %d", len(got), maxLinks+2)
		}
	})
}

// TestCheckHostFiles: a workspace that holds a file the configuration names, or that a link
// to one leads into (a dangling one too), is refused, naming the key, the file and the fix;
// one that holds neither the file nor a link on its way is not.
func TestCheckHostFiles(t *testing.T) {
	root := mkHome(t, "ws/.secrets", "cfg", "other")
	ws := filepath.Join(root, "ws")
	key := HostFile{StartupFile: StartupFile{Path: filepath.Join(ws, ".secrets", "key"), Why: "the relay reads it"},
		Field: "gateway.anthropic.credential.file in /c.yaml", Risk: "so the box could read it", Fix: "move it out"}
	symlink(t, filepath.Join(ws, "agentbox.yaml"), filepath.Join(root, "cfg", "config.yaml")) // dangling, into ws
	cfg := HostFile{StartupFile: StartupFile{Path: filepath.Join(root, "cfg", "config.yaml"), Why: "the daemon reads it"}}
	symlink(t, filepath.Join(root, "other"), filepath.Join(ws, "out")) // a link in ws to a folder outside
	via := HostFile{StartupFile: StartupFile{Path: filepath.Join(ws, "out", "token"), Why: "the relay runs it"}}
	outside := HostFile{StartupFile: StartupFile{Path: filepath.Join(root, "other", "token"), Why: "the relay runs it"}}

	for _, c := range []struct {
		name string
		f    HostFile
		want []string // "" when accepted
	}{
		{"credential file", key, []string{key.Path, key.Field, "so the box could read it", "move it out"}},
		{"dangling config link", cfg, []string{filepath.Join(ws, "agentbox.yaml") + ", which " + cfg.Path + " leads to", "the daemon reads it", "git clone"}},
		{"link in the workspace", via, []string{filepath.Join(ws, "out")}},
		{"outside", outside, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckHostFiles(ws, []HostFile{c.f})
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var we *WorkspaceError
			if !errors.As(err, &we) || !errors.Is(err, ErrWorkspaceRefused) {
				t.Fatalf("err = %v, want a *WorkspaceError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q: %v", w, err)
				}
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(ws, "agentbox.yaml")); err == nil {
		t.Fatal("the check made the file")
	}
}
