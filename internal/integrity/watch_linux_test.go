package integrity

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// endless is an inotify descriptor that always has another event: the reader never stops on a
// read error.
type endless struct{}

func (endless) Read(b []byte) (int, error) { return copy(b, "e"), nil }

// failing is one whose read fails.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// TestReadEventsCancelled: however the inotify reader ends — its read fails, or the watch is
// cancelled while it waits to hand the loop events the loop does not take — it sends the reason
// on errc before it closes events, because the loop, finding events closed, waits for errc. On
// the cancellation path it used to close events alone, and the watch's loop (whose select may
// take the closed channel over ctx.Done) waited forever, and with it the daemon's end of the
// launch. Here nothing takes events, so the reader ends on that path every time.
func TestReadEventsCancelled(t *testing.T) {
	readErr := errors.New("read failed")
	for _, tc := range []struct {
		name   string
		r      io.Reader
		cancel bool
		want   error
	}{
		{"cancelled-with-events-pending", endless{}, true, context.Canceled},
		{"read-fails", failing{readErr}, false, readErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			events := make(chan []string, 1)
			errc := make(chan error, 1)
			readEvents(ctx, tc.r, func([]byte) []string { return []string{"dir"} }, events, errc)
			for range events { // at most one batch was taken before the end; then closed
			}
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) {
					t.Fatalf("errc holds %v, want %v", err, tc.want)
				}
			default:
				t.Fatal("events closed with nothing on errc: the watch's loop would wait for it forever")
			}
		})
	}
}

// TestOwnDepsWhileWatching: the daemon records the box's own dependency folders (OwnDeps,
// saving the state) while the watch runs its checks (run it with -race); the saved state holds
// them, and the check at exit leaves what the host wrote in them.
func TestOwnDepsWhileWatching(t *testing.T) {
	ws := newWS(t)
	own := filepath.Join(ws, "web", "node_modules")
	mustWrite(t, filepath.Join(own, "x", "index.js"), "host\n")
	tick()
	w := &Watcher{State: Snapshot(resolveWS(t, ws), Limits{}), Interval: time.Millisecond, Debounce: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	saved := filepath.Join(t.TempDir(), "state.json")
	checks := make(chan struct{})
	go func() {
		defer close(checks)
		for range 20 {
			w.Verify(SourcePeriodic, true)
		}
	}()
	for range 20 {
		if err := w.OwnDeps([]string{own}, func(st *State) error { return st.Save(saved) }); err != nil {
			t.Fatal(err)
		}
	}
	<-checks
	cancel()
	<-done
	tick()
	mustWrite(t, filepath.Join(own, "y", "index.js"), "the host's, later\n")
	for _, tr := range w.Verify(SourceExit, true) {
		t.Errorf("the host's write in the box's own folder: %+v", tr)
	}
	st, err := Load(saved)
	if err != nil || !slices.Equal(st.Own, []string{own}) {
		t.Errorf("the saved state's Own: %v (%v), want [%s]", st, err, own)
	}
}

// TestWatchOverflowLosesCover: an overflow of the kernel's event queue (IN_Q_OVERFLOW, watch
// descriptor -1) means events were lost, among them those of folders made meanwhile, which
// stay unwatched. It counts as the cover lost, so every check from then on rescans the whole
// workspace. Before, the event was dropped as having no owner, and what the lost events named
// waited for the periodic check or the check at exit.
func TestWatchOverflowLosesCover(t *testing.T) {
	var lost []int
	n := &inotifier{owner: map[int]string{1: "/ws"}, path: map[int]string{1: "/ws"}, dirs: map[string]bool{"/ws": true}, max: 10,
		lost: func(watched int) { lost = append(lost, watched) }}
	ev := make([]byte, 16)
	binary.NativeEndian.PutUint32(ev[0:4], ^uint32(0)) // wd -1
	binary.NativeEndian.PutUint32(ev[4:8], unix.IN_Q_OVERFLOW)
	if dirty := n.parse(ev); len(dirty) != 0 {
		t.Errorf("an overflow named folders to scan: %v", dirty)
	}
	if !slices.Equal(lost, []int{1}) {
		t.Errorf("after an overflow the cover was lost with %v folders watched, want [1]", lost)
	}
}

// TestWatchHomeFolderNotWorkspace: a protected home entry outside the workspace (the host's
// ~/.codex/AGENTS.md, which the codex profile binds read-only and watches) has its folder
// watched, and the host's own Codex writes there while a box runs (its background app server's
// logs, its history). None of that is the workspace's: before, the watch rescanned ~/.codex
// with the workspace's rules, took every file in it for Codex's project configuration
// (workspaceConfig .codex/, "a symlink leading out of the workspace"), reported each created
// and modified, tried to move the host's files aside, and the check at exit reported them all
// removed (84 alerts for one `agentbox run codex`, seen by hand).
func TestWatchHomeFolderNotWorkspace(t *testing.T) {
	ws := newWS(t)
	home, _ := filepath.EvalSymlinks(t.TempDir())
	codex := filepath.Join(home, ".codex")
	mustWrite(t, filepath.Join(codex, "AGENTS.md"), "host instructions\n")
	mustWrite(t, filepath.Join(codex, "config.toml"), "model = \"m\"\n")
	lay := resolveWS(t, ws)
	lay.Config = profileConfigFiles()
	lay.Watch(filepath.Join(codex, "AGENTS.md"))
	var mu sync.Mutex
	var seen []Transition
	w := &Watcher{State: Snapshot(lay, Limits{}), Interval: time.Hour, Debounce: time.Millisecond,
		OnTransition: func(_ Source, tr Transition) { mu.Lock(); seen = append(seen, tr); mu.Unlock() }}
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	tick()
	// The host's Codex, while the box runs.
	mustWrite(t, filepath.Join(codex, "history.jsonl"), "{}\n")
	mustWrite(t, filepath.Join(codex, "logs_2.sqlite-wal"), "wal\n")
	mustWrite(t, filepath.Join(codex, "config.toml"), "model = \"other\"\n")
	// The check of an event in ws, to know the events before it were taken.
	mustWrite(t, filepath.Join(ws, ".envrc"), "echo\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 && slices.ContainsFunc(seen, func(tr Transition) bool { return tr.Path == filepath.Join(ws, ".envrc") }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-done
	w.Verify(SourceExit, true)
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range seen {
		if strings.HasPrefix(tr.Path, codex+"/") {
			t.Errorf("the host's own file in its harness home reported: %+v", tr)
		}
	}
	for _, f := range []string{"history.jsonl", "logs_2.sqlite-wal", "config.toml", "AGENTS.md"} {
		if _, err := os.Lstat(filepath.Join(codex, f)); err != nil {
			t.Errorf("the host's %s: %v", f, err)
		}
	}
	if !slices.ContainsFunc(seen, func(tr Transition) bool { return tr.Path == filepath.Join(ws, ".envrc") }) {
		t.Errorf("the workspace's new .envrc was not reported (the watch did not run): %+v", seen)
	}
}

// TestWatchPassesOverOrdinaryFiles: the watch rescans no folder for the events of ordinary
// files in ordinary folders (eventRules): 300 files written in three new folders call for the
// checks of the folders' creation only, where before every 1 ms batch of their events made
// one. A file of nested configuration written in such a folder meanwhile (a VS Code
// workspace file, an .envrc), and ordinary files in a hidden folder, still call for the
// folder's rescan, and the configuration is reported (the workspace file moved aside) while
// the watch runs.
func TestWatchPassesOverOrdinaryFiles(t *testing.T) {
	ws := newWS(t)
	count := runCountingWatch(t, ws)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				_, trs := count()
				t.Fatalf("the watch never %s; transitions: %+v", what, trs)
			}
		}
	}
	for _, d := range []string{"a", "b", "c"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The folders' creation is checked (and the folders watched) before their files come.
	waitFor("checked the new folders", func() bool { n, _ := count(); return n > 0 })
	time.Sleep(100 * time.Millisecond)
	before, _ := count()
	for i := range 300 {
		mustWrite(t, filepath.Join(ws, []string{"a", "b", "c"}[i%3], fmt.Sprintf("f%d.txt", i)), "x\n")
		if i%30 == 0 {
			time.Sleep(5 * time.Millisecond) // batches of their own
		}
	}
	time.Sleep(300 * time.Millisecond)
	if after, _ := count(); after != before {
		t.Errorf("ordinary files' events made %d checks", after-before)
	}
	// Hidden folders' ordinary files and configuration in ordinary folders are checked.
	mustWrite(t, filepath.Join(ws, "b", "proj.code-workspace"), "{}\n")
	mustWrite(t, filepath.Join(ws, "c", ".envrc"), "echo\n")
	for _, p := range []string{filepath.Join(ws, "b", "proj.code-workspace"), filepath.Join(ws, "c", ".envrc")} {
		waitFor("reported "+p, func() bool {
			_, trs := count()
			return slices.ContainsFunc(trs, func(tr Transition) bool { return tr.Path == p && tr.Alert })
		})
	}
	if exists(filepath.Join(ws, "b", "proj.code-workspace")) {
		t.Error("the VS Code workspace file was not moved aside while the watch ran")
	}
	n0, _ := count()
	if err := os.Mkdir(filepath.Join(ws, ".tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor("checked the hidden folder's creation", func() bool { n, _ := count(); return n > n0 })
	time.Sleep(100 * time.Millisecond)
	n1, _ := count()
	mustWrite(t, filepath.Join(ws, ".tool", "notes.txt"), "x\n")
	waitFor("checked an ordinary file in a hidden folder", func() bool { n, _ := count(); return n > n1 })
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// runCountingWatch runs a watcher over the workspace ws (a snapshot of it now) until the test
// ends, and returns what it has done so far: the checks events made (SourceInotify) and the
// transitions it reported.
func runCountingWatch(t *testing.T, ws string) func() (checks int, seen []Transition) {
	t.Helper()
	var mu sync.Mutex
	var seen []Transition
	checks := 0
	w := &Watcher{State: Snapshot(resolveWS(t, ws), Limits{}), Interval: time.Hour, Debounce: time.Millisecond,
		OnTransition: func(_ Source, tr Transition) { mu.Lock(); seen = append(seen, tr); mu.Unlock() },
		OnCheck: func(c Check) {
			if c.Source == SourceInotify {
				mu.Lock()
				checks++
				mu.Unlock()
			}
		}}
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tick()
	return func() (int, []Transition) {
		mu.Lock()
		defer mu.Unlock()
		return checks, slices.Clone(seen)
	}
}

// TestWatchRulesReadAgain (review 29b): what the watch's rules read of a folder at its first
// file event (eventRules: no repository's top) is read again after a folder's event there:
// a .git made in it (git init), another repository moved to its path, and a bare
// repository's objects/ and refs/ made beside a HEAD and a config, whose config.worktree is
// then found while the watch runs. Before, the first reading stayed, and the events of a
// repository the box made there called for no rescan.
func TestWatchRulesReadAgain(t *testing.T) {
	ws := newWS(t)
	counts := runCountingWatch(t, ws)
	count := func() int { n, _ := counts(); return n }
	// settle waits until the watch has checked what came so far and is idle.
	settle := func() int {
		n := count()
		for {
			time.Sleep(150 * time.Millisecond)
			if m := count(); m == n {
				return n
			} else {
				n = m
			}
		}
	}
	checkedAfter := func(what string, write func()) {
		t.Helper()
		n := settle()
		write()
		for deadline := time.Now().Add(5 * time.Second); count() == n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: no check", what)
				return
			}
		}
	}
	for _, d := range []string{"x", "y/.git", "z"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	// x and z are read as ordinary folders at a file event.
	mustWrite(t, filepath.Join(ws, "x", "a.txt"), "x\n")
	mustWrite(t, filepath.Join(ws, "z", "a.txt"), "x\n")
	if n := settle(); true {
		mustWrite(t, filepath.Join(ws, "x", "b.txt"), "x\n")
		if settle() != n {
			t.Fatal("an ordinary file's event was checked (the rules did not apply: the test proves nothing)")
		}
	}
	// git init in x.
	if err := os.Mkdir(filepath.Join(ws, "x", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	checkedAfter("a file in a folder that became a repository's top (git init)", func() {
		mustWrite(t, filepath.Join(ws, "x", "README"), "x\n")
	})
	// A repository moved to z's path.
	if err := os.RemoveAll(filepath.Join(ws, "z")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(ws, "y"), filepath.Join(ws, "z")); err != nil {
		t.Fatal(err)
	}
	checkedAfter("a file in a repository moved to an ordinary folder's path", func() {
		mustWrite(t, filepath.Join(ws, "z", "README"), "x\n")
	})
	// A bare repository formed in gd, read first as ordinary.
	gd := filepath.Join(ws, "gd")
	if err := os.Mkdir(gd, 0o755); err != nil {
		t.Fatal(err)
	}
	settle()
	mustWrite(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(gd, "config"), "[core]\n\trepositoryformatversion = 0\n\tbare = true\n[extensions]\n\tworktreeConfig = true\n")
	settle()
	mustWrite(t, filepath.Join(gd, "description"), "x\n") // read as ordinary: no objects/ yet
	settle()
	for _, d := range []string{"objects", "refs"} {
		if err := os.Mkdir(filepath.Join(gd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	mustWrite(t, filepath.Join(gd, "config.worktree"), "[core]\n\tfsmonitor = /tmp/evil\n")
	p := filepath.Join(gd, "config.worktree")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, seen := counts()
		if slices.ContainsFunc(seen, func(tr Transition) bool { return tr.Path == p && tr.Alert }) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the bare repository's config.worktree (core.fsmonitor) was not reported while the watch ran: %+v", seen)
			break
		}
	}
}
