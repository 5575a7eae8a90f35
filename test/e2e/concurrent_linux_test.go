//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// TestConcurrentLaunchesOneWorkspace: several boxes of one workspace at once, as a user runs
// several agents in one repository. Every box's overlays of the host's caches (~/.npm, pip's,
// cargo's home, the Go module cache) and of a project's node_modules work: a box that copies
// up, renames and removes host files after another box of the workspace started and ended
// beside it succeeds, and launches started four at a time all set up their box. The host's
// folders are never written.
//
// Before, the boxes of a workspace shared each overlay's work folder, which the kernel empties
// when it mounts an overlay: a box starting beside another broke the other's overlays (its
// append to a host file failed with "Operation not permitted", its rename and removal with
// "No such file or directory": every run), and 6 of 120 launches started four at a time
// failed to set up (`create overlay of … upper: no such file or directory` or `invalid
// argument`, box_setup_failed).
func TestConcurrentLaunchesOneWorkspace(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	e := NewEnv(t)
	dirs := []string{
		filepath.Join(e.Home, ".npm"), filepath.Join(e.Home, ".cache", "pip"), filepath.Join(e.Home, ".cargo"),
		filepath.Join(e.Home, "go", "pkg", "mod"), filepath.Join(e.Work, "app", "node_modules", "dep"),
	}
	const loops, runs = 4, 6
	for _, d := range dirs {
		files := []string{"append.txt", "rename.txt", "remove.txt"}
		for l := range loops {
			for i := range runs {
				files = append(files, fmt.Sprintf("c-%d-%d", l, i))
			}
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte("host\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(e.Work, "app", "package.json"), []byte(`{"name":"app","version":"1.0.0"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, d := range dirs {
		before[d] = treeHash(t, d)
	}

	// Box A waits, running, until box B has started and ended beside it, then changes every
	// overlay's host files.
	script := `i=0; : > started
while [ ! -e go ]; do sleep 0.1; i=$((i+1)); [ $i -lt 1800 ] || { echo "never told to go"; exit 3; }; done
for d in ` + strings.Join(dirs, " ") + `; do
  echo box >> "$d/append.txt" && mv "$d/rename.txt" "$d/renamed.txt" && rm "$d/remove.txt" && mkdir "$d/newdir" && echo "changed $d"
done`
	if err := os.WriteFile(filepath.Join(e.Work, "a.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := e.Command(ctx, "run", "sh", "--", "a.sh")
	var aout, aerr bytes.Buffer
	a.Stdout, a.Stderr = &aout, &aerr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Wait() }()
	eventually(t, "box A to start", func() bool {
		_, err := os.Stat(filepath.Join(e.Work, "started"))
		return err == nil
	})
	if r := e.Box(`ls ` + strings.Join(dirs, " ") + ` >/dev/null && echo B`); r.Code != 0 || !strings.Contains(r.Stdout, "B") {
		t.Fatalf("box B beside box A: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := <-aDone
	for _, d := range dirs {
		if !strings.Contains(aout.String(), "changed "+d+"\n") {
			t.Errorf("box A could not change %s once box B had run beside it (exit %v)", d, err)
		}
	}
	if t.Failed() || err != nil {
		t.Errorf("box A: %v\nstdout:\n%s\nstderr:\n%s", err, aout.String(), aerr.String())
	}

	// Four loops of launches at once, each copying up a host file of its own in every overlay.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range runs {
				f := fmt.Sprintf("c-%d-%d", l, i)
				script := ""
				for _, d := range dirs {
					script += `echo box >> "` + filepath.Join(d, f) + `" && `
				}
				c := e.Command(ctx, "run", "sh", "--", "-c", script+"echo copied")
				var out, errb bytes.Buffer
				c.Stdout, c.Stderr = &out, &errb
				err := c.Run()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					err = fmt.Errorf("run agentbox: %w", err)
				}
				if err != nil || !strings.Contains(out.String(), "copied") {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("loop %d run %d: %v\nstdout:\n%s\nstderr:\n%s", l, i, err, out.String(), errb.String()))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d launches started four at a time failed:\n%s", len(failed), loops*runs, strings.Join(failed, "\n"))
	}

	for d, h := range before {
		if treeHash(t, d) != h {
			t.Errorf("the host's %s changed", d)
		}
	}
	// Every launch's work folders go with it.
	eventually(t, "the launches' overlay work folders to be removed", func() bool {
		works, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "work", "*"))
		return len(works) == 0
	})
}

// TestLaunchWorkFoldersAcrossRestart: a launch's overlay work folders stay while its box runs,
// across a restart of the daemon (which re-adopts the box), and go when it ends; the work
// folders of a launch the restarted daemon does not know (a daemon stopped between a launch's
// plan and its end leaves them) are removed when it starts.
func TestLaunchWorkFoldersAcrossRestart(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	e := NewEnv(t)
	npm := filepath.Join(e.Home, ".npm")
	if err := os.MkdirAll(npm, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(npm, "f"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.Detach("sh", "--", "-c", `while [ ! -e go ]; do sleep 0.1; done; echo box >> ~/.npm/f && echo changed > done`)
	var works string
	eventually(t, "the launch's work folders", func() bool {
		m, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "work", id))
		if len(m) == 1 {
			works = m[0]
		}
		return works != ""
	})
	// What a daemon stopped before a launch's end left: its folders, the kernel's mode-0 work/.
	stale := filepath.Join(filepath.Dir(works), strings.Repeat("0", 32))
	if err := os.MkdirAll(filepath.Join(stale, "npm", "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(stale, "npm", "work"), 0); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: %+v", r)
	}
	if r := e.Run("", "daemon", "--detach"); r.Code != 0 {
		t.Fatalf("daemon --detach: %+v", r)
	}
	if r := e.Run("", "launches"); r.Code != 0 || !strings.Contains(r.Stdout, id[:8]) {
		t.Fatalf("the restarted daemon does not list the running launch: %+v", r)
	}
	eventually(t, "the unknown launch's work folders to be removed", func() bool {
		_, err := os.Lstat(stale)
		return os.IsNotExist(err)
	})
	if _, err := os.Lstat(works); err != nil {
		t.Fatalf("the running launch's work folders went at the restart: %v", err)
	}
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := e.WaitLaunch(id, "to end", func(l api.Launch) bool { return l.State != "running" && l.State != "starting" })
	if b, _ := os.ReadFile(filepath.Join(e.Work, "done")); string(b) != "changed\n" || l.ExitCode == nil || *l.ExitCode != 0 {
		t.Errorf("the re-adopted box could not change a host file of ~/.npm: %s (exit %v, %s)", b, l.ExitCode, l.State)
	}
	eventually(t, "the ended launch's work folders to be removed", func() bool {
		_, err := os.Lstat(works)
		return os.IsNotExist(err)
	})
}
