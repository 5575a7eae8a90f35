package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/plan"
)

// prestartSettle is how long a prestarted box is left to reach its wait for the request
// before it is timed, as a spare shim's box has long before its launch
// (enginetest.PrestartSettle).
const prestartSettle = 150 * time.Millisecond

// prestartedFloor returns a floor's run and its preparation: a box of the native engine,
// prestarted in the preparation (as the daemon's spare shim prestarts it), is handed the
// request of a plan running /bin/true in an empty workspace, and the run ends when the box's
// top process (box-init) has exited: the box's start, the program and the box's end, with no
// daemon, shim, client or brokers. This binary serves box-init and box-exec itself
// (boxmain.Entries, dispatched in main). The preparation and the run are called on one
// goroutine, locked to its thread, which stays the box's parent.
func prestartedFloor(root string) (prep, run func() error, err error) {
	ws, rd := filepath.Join(root, "floor-ws"), filepath.Join(root, "floor-run")
	for _, d := range []string{ws, rd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, err
		}
	}
	p, err := plan.Build(plan.Input{
		ID: "0123456789abcdef0123456789abcdef", Program: "/bin/true", Workspace: ws,
		Home: "/home/agentbox-bench-floor", UID: os.Getuid(), GID: os.Getgid(),
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, RunDir: rd,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the prestarted box's plan: %w", err)
	}
	e := &native.Engine{}
	req, err := e.Request(p)
	if err != nil {
		return nil, nil, fmt.Errorf("the prestarted box's request: %w", err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	var pre engine.Prestarted
	prep = func() error {
		runtime.LockOSThread() // the box's parent thread (Pdeathsig); never unlocked: it ends with the bench
		var err error
		if pre, err = e.Prestart(); err != nil {
			return fmt.Errorf("prestart a box: %w", err)
		}
		time.Sleep(prestartSettle)
		return nil
	}
	run = func() error {
		box, err := pre.Start(req, engine.IO{Stdin: devnull, Stdout: devnull, Stderr: devnull})
		if err != nil {
			pre.Discard()
			return fmt.Errorf("start a prestarted box: %w", err)
		}
		ctl := pre.Control()
		defer ctl.Close()
		// The box's events are read as the shim reads them (box-init's end waits on none).
		go func() {
			for {
				_, fds, err := engine.RecvEvent(ctl)
				for _, fd := range fds {
					os.NewFile(uintptr(fd), "fd").Close()
				}
				if err != nil {
					return
				}
			}
		}()
		st, err := box.Process.Wait()
		if err == nil && !st.Success() {
			err = fmt.Errorf("the prestarted box: %v", st)
		}
		return err
	}
	return prep, run, nil
}
