package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// setPath sets the PATH of e's agentbox (and of the daemon it starts) to path.
func (e *daemonEnv) setPath(path string) {
	for i, v := range e.vars {
		if strings.HasPrefix(v, "PATH=") {
			e.vars[i] = "PATH=" + path
		}
	}
}

// TestAttackWorkspaceHoldsPathFolder (review 16, F6's gap): the daemon refused a workspace that
// is a folder on the launch's PATH, but not one that holds one: a project ~/tools whose
// ~/tools/bin the user put on PATH. The box writes bin/git (making bin/ when it is absent),
// and the host's shell, with that PATH, runs it at its next git. A relative or empty PATH
// entry (a stray ':') is the shell's current folder, the workspace when the user works there:
// the box writes ./git. (A ~/tools/bin that exists is a toolchain, bound read-only: the box
// cannot write it, refused or not.) The launch must be refused (exit 125, naming the PATH entry) or the
// host must not run it.
func TestAttackWorkspaceHoldsPathFolder(t *testing.T) {
	for _, c := range []struct {
		name    string
		bin     bool   // ~/tools/bin exists before the launch
		entry   string // the PATH entry put first ("" for ~/tools/bin)
		planted string // where the box writes git, workspace-relative
	}{
		{name: "bin_absent", planted: "bin/git"},
		{name: "bin_present", bin: true, planted: "bin/git"},
		{name: "empty_entry", entry: "empty", planted: "git"},
		{name: "dot_entry", entry: ".", planted: "git"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			ws := filepath.Join(e.home, "tools")
			write(t, filepath.Join(ws, "README"), "my tools\n")
			if c.bin {
				write(t, filepath.Join(ws, "bin", "backup"), "#!/bin/sh\necho backup\n")
			}
			git(t, ws, "init", "-q")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-q", "-m", "my tools")
			first := filepath.Join(ws, "bin")
			switch c.entry {
			case "empty":
				first = ""
			case ".":
				first = "."
			}
			path := first + ":" + os.Getenv("PATH")
			e.setPath(path)
			mark, _ := e.marker("path-" + c.name)
			out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
				fmt.Sprintf(`mkdir -p %s && printf '#!/bin/sh\ntouch %s\nexec /usr/bin/git "$@"\n' > %s && chmod +x %s && echo planted`,
					filepath.Dir(c.planted), mark, c.planted, c.planted))
			if code == 125 && strings.Contains(stderr, "workspace_refused") {
				want := filepath.Join(ws, "bin")
				if c.entry != "" {
					want = "relative entry"
				}
				if !strings.Contains(stderr, want) {
					t.Errorf("the refusal does not name the PATH entry (%s):\n%s", want, stderr)
				}
				return
			}
			if c.bin && strings.Contains(out+stderr, "Read-only file system") {
				return // a PATH folder that exists is a toolchain, bound read-only (held before the fix too)
			}
			if !strings.Contains(out, "planted") {
				t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
			}
			// The host's shell with the same PATH, in the workspace, where the user reviews.
			sh := exec.Command("sh", "-c", "git --version")
			sh.Dir = ws
			sh.Env = append(os.Environ(), "HOME="+e.home, "PATH="+path)
			sh.Run()
			notRun(t, mark, fmt.Sprintf("the host's shell running git with PATH %q (a workspace the daemon accepted)", first), out+stderr)
		})
	}
}
