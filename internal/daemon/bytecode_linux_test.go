package daemon

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// TestBytecodeMirrorNotHeld: a launch whose bytecode mirror is missing is not held while the
// mirror is made (it took 16-17 s with a pyenv Python on a loaded machine): with every build
// of a mirror blocked until the test releases it, a launch runs to its end, without the
// mirror; once released, the mirror is made in the background. Before, the mirror was made on
// the launch's path and the launch waited for the build.
func TestBytecodeMirrorNotHeld(t *testing.T) {
	t.Parallel()
	if len(systemPythonLibs()) == 0 {
		t.Skip("no system python library")
	}
	release, started := make(chan struct{}), make(chan struct{}, 16)
	td := startDaemonOpts(t, Options{beforeBytecode: func([]string) {
		started <- struct{}{}
		<-release
	}})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	select {
	case <-started: // the system's mirror, at the daemon's start
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not start making the system's bytecode mirror")
	}
	path, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "true", Path: path, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatalf("the launch, while its mirror's build is blocked: %v", err)
	}
	var l *api.Launch
	waitFor(t, "the box to exit", func() bool {
		l, err = td.c.Get(ctx, resp.ID)
		return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
	})
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 0 {
		t.Fatalf("the launch: state %s, exit %v", l.State, l.ExitCode)
	}
	mirrors := filepath.Join(td.runtime, bytecodeDir, "*-*")
	if ms, _ := filepath.Glob(mirrors); len(ms) != 0 {
		t.Fatalf("a mirror was made while its build was blocked: %v", ms)
	}
	close(release)
	released = true
	waitFor(t, "the mirror to be made once released", func() bool {
		ms, _ := filepath.Glob(mirrors)
		return len(ms) != 0
	})
}
