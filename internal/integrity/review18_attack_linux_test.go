package integrity_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// runSettled runs agentbox run with args in e's workspace and, unless the launch was refused,
// waits until the daemon has ended it (its check at exit done). It returns the output, the
// exit code and whether the workspace was refused.
func (e *daemonEnv) runSettled(args ...string) (out string, code int, refused bool) {
	e.t.Helper()
	before := map[string]bool{}
	if b, err := e.cmd("launches", "--json").Output(); err == nil { // no daemon yet: none
		var ls []api.Launch
		json.Unmarshal(b, &ls)
		for _, l := range ls {
			before[l.ID] = true
		}
	}
	stdout, stderr, code := e.runAll(append([]string{"run"}, args...)...)
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return stdout + stderr, code, true
	}
	id := ""
	for _, l := range e.launches() {
		if !before[l.ID] {
			id = l.ID
		}
	}
	if id == "" {
		e.t.Fatalf("no launch recorded; agentbox run exit %d said:\n%s%s", code, stdout, stderr)
	}
	e.waitLaunch(id, "settled", func(l api.Launch) bool { return l.State == api.StateExited && l.Settled })
	e.waitEnded(id)
	return stdout + stderr, code, false
}

// whoRan is a shell command that appends to marker.who who ran it: its uid, its parent's
// command line and its arguments (for a planted script written by printf: its \\ become \).
func whoRan(marker string) string {
	return `(id -u; tr "\\000" " " < /proc/$PPID/cmdline; echo; echo "$@") >> ` + marker + ".who"
}

// TestAttackPathDepFolderExemption (review 18): since 6b12a56 a PATH entry beneath a folder
// named node_modules or .venv, or beneath any folder holding a pyvenv.cfg, is exempt from the
// PATH rule (outsideDepFolders in internal/daemon/launch.go), on the ground that the box writes
// those folders only in its own overlay. But the exemption goes by the entry's path, by name,
// while the overlays are only the dependency folders found before the box ran (a node_modules
// beside a package.json, a real .venv folder, within the search's bounds). direnv's `layout
// node` and `PATH_add node_modules/.bin`, or `export PATH=$PWD/.venv/bin:$PATH`, put such an
// absolute entry on PATH whether or not the folder exists. Where it does not, the box makes
// node_modules (or .venv) a symlink to a folder of its own and writes git there. The check at
// exit moves the symlink aside, so the host's shell is safe afterwards, but before that the
// daemon's own git calls (exec.Command("git", …), through the daemon's PATH, which is this
// shell's when agentbox run started the daemon) run the box's git on the host, unboxed
// (TestAttackDaemonPathRunsBoxGit has the same cause without the exemption). Where the box
// makes a real folder instead, the check at exit moved it aside before any git ran: checked,
// not kept. The launch must be refused (naming the PATH entry), or what the box planted must
// not run.
func TestAttackPathDepFolderExemption(t *testing.T) {
	for _, c := range []struct {
		name   string
		ignore string // .gitignore's content ("" for none)
		entry  string // the PATH entry, workspace-relative
		setup  string // the box's script making entry's folder (then git is written in it)
	}{
		// The box makes node_modules (or .venv) a symlink to a folder of its own: the
		// exemption goes by the entry's name, and the launch's dependency folders (made before
		// the box ran) do not hold it.
		{name: "node_modules_symlink", ignore: "node_modules\n", entry: "node_modules/.bin", setup: "mkdir -p tools/.bin && ln -s tools node_modules"},
		{name: "dotvenv_symlink", ignore: ".venv\n", entry: ".venv/bin", setup: "mkdir -p env/bin && ln -s env .venv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			if c.ignore != "" {
				write(t, filepath.Join(e.work, ".gitignore"), c.ignore)
				git(t, e.work, "add", "-A")
				git(t, e.work, "commit", "-q", "-m", "ignore")
			}
			path := filepath.Join(e.work, c.entry) + ":" + os.Getenv("PATH")
			e.setPath(path)
			mark, touch := e.marker("path-dep-" + c.name)
			planted := filepath.Join(c.entry, "git")
			out, code, refused := e.runSettled("sh", "--", "-c",
				fmt.Sprintf(`%s && printf '#!/bin/sh\n%s\nexec /usr/bin/git "$@"\n' > %s && chmod +x %s && echo planted`,
					c.setup, touch+"; "+whoRan(mark), planted, planted))
			if refused {
				if !strings.Contains(out, filepath.Join(e.work, c.entry)) {
					t.Errorf("the refusal does not name the PATH entry %s:\n%s", c.entry, out)
				}
				return
			}
			if !strings.Contains(out, "planted") {
				t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s", code, out)
			}
			// The marker's folder is the host's alone: a marker now is a host process that ran
			// the box's git already (the daemon's check at exit runs git through its PATH).
			if _, err := os.Lstat(mark); err == nil {
				who, _ := os.ReadFile(mark + ".who")
				t.Fatalf("a host process ran the box's %s before the user did (uid, parent's command line, arguments):\n%s\nthe box said:\n%s", planted, who, out)
			}
			// The host's shell with the same PATH, in the workspace, where the user reviews.
			sh := exec.Command("sh", "-c", "git status --short")
			sh.Dir = e.work
			sh.Env = append(os.Environ(), "HOME="+e.home, "PATH="+path)
			got, _ := sh.CombinedOutput()
			notRun(t, mark, fmt.Sprintf("the host's shell running git status with %s first on PATH (%s)", c.entry, strings.TrimSpace(string(got))), out)
		})
	}
}

// TestAttackDaemonPathRunsBoxGit (review 18): the daemon's checks at exit run git, and the
// integrity package's other git calls, by name (exec.Command("git", …)), through the PATH the
// daemon itself was started with, not the launch's, and no rule compares that PATH with a
// workspace (go env GOPROXY, internal/daemon/toolchain.go, is looked up so too). The daemon is started by the first agentbox run, with that shell's PATH: here a
// launch from a shell whose PATH holds the workspace's bin/ (direnv's `PATH_add bin`), which
// the PATH rule refuses. The user does what the refusal says (the entry out of PATH; here a
// shell without it) and launches again: the daemon, still running with the first PATH,
// accepts; the box writes bin/git, and the daemon's check at exit runs it on the host,
// unboxed, as the user. Nothing a box writes may be run by the host. (A bin/bwrap planted so
// was not run by the next launch: checked, not kept.)
func TestAttackDaemonPathRunsBoxGit(t *testing.T) {
	for _, prog := range []string{"git"} {
		t.Run(prog, func(t *testing.T) {
			t.Parallel()
			real, err := exec.LookPath(prog)
			if err != nil {
				t.Fatalf("%s: %v", prog, err)
			}
			e := newDaemonEnv(t)
			repo(t, e.work)
			clean := os.Getenv("PATH")
			e.setPath(filepath.Join(e.work, "bin") + ":" + clean)
			if out, code, refused := e.runSettled("true"); !refused {
				t.Fatalf("a launch with the workspace's bin/ on PATH: exit %d, not refused (the PATH rule; the test would prove nothing)\n%s", code, out)
			}
			e.setPath(clean)
			mark, touch := e.marker("daemon-path-" + prog)
			out, code, refused := e.runSettled("sh", "--", "-c",
				fmt.Sprintf(`mkdir -p bin && printf '#!/bin/sh\n%s\nexec %s "$@"\n' > bin/%s && chmod +x bin/%s && echo planted`, touch+"; "+whoRan(mark), real, prog, prog))
			if refused || !strings.Contains(out, "planted") {
				t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s", code, out)
			}
			if _, err := os.Lstat(mark); err == nil {
				who, _ := os.ReadFile(mark + ".who")
				t.Errorf("a host process ran the box's bin/%s (uid, parent's command line, arguments):\n%s\nthe box said:\n%s", prog, who, out)
			}
		})
	}
}

// TestAttackIgnoredCheckFIFOGitignore (review 18; review 17's F4 for the index, here for the
// ignore files): the checks at exit run git ls-files --others --exclude-standard in the
// workspace, and git opens every .gitignore of the work tree as it walks it (and
// .git/info/exclude, core.excludesFile) without looking at its type. A box that makes
// x/.gitignore a FIFO holds each such git call until its 2-minute bound, and agentbox run
// with it; git is then killed, and the checks it served are skipped (alerted as "not
// checked"): what the box left in git-ignored places stays in the workspace, unreviewed, where
// docs/integrity.md says it is moved into the proposed changes. The check must not wait on a
// FIFO the box made, nor be turned off by one.
func TestAttackIgnoredCheckFIFOGitignore(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), "*.log\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "ignore")
	start := time.Now()
	out := e.boxPlant(`echo box > run.log && mkdir -p x && echo 1 > x/a && mkfifo x/.gitignore && echo planted`)
	took := time.Since(start)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	t.Logf("took %v:\n%s", took, out)
	if strings.Contains(out, "signal: killed") {
		t.Errorf("the check at exit ran git on a box's FIFO .gitignore until git was killed at its time bound:\n%s", out)
	}
	if took > 60*time.Second {
		t.Errorf("agentbox run of a box that made x/.gitignore a FIFO took %v to end (each git call of the check at exit waits on the FIFO for its 2-minute bound)\n%s", took.Round(time.Second), out)
	}
	if _, err := os.Lstat(filepath.Join(e.work, "run.log")); err == nil {
		t.Errorf("the box's run.log, in a git-ignored place, is still in the workspace (the check at exit moves such files into the proposed changes)\n%s", out)
	}
}
