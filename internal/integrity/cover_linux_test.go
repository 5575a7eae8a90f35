package integrity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchBeyondCover is review 10's finding F6 at the watcher, without a box: with room for
// four folders' watches, a workspace of six folders has a nested repository whose config sets
// core.fsmonitor written in a folder beyond the cover, and then a file event in a covered
// folder. Before, that event rescanned the covered folder only and the config stayed; now the
// cover is lost, the event makes a full scan and the config is moved aside.
func TestWatchBeyondCover(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	for i := 0; i < 6; i++ {
		mustWrite(t, filepath.Join(ws, "d"+itoa(i), "f"), "x")
	}
	found := make(chan Transition, 16)
	lost := make(chan int, 1)
	w := &Watcher{State: &State{Workspace: ws, Exec: map[string]string{}}, Interval: time.Hour, Debounce: 5 * time.Millisecond,
		MaxWatches: 4, OnCoverLost: func(n int) { lost <- n },
		OnTransition: func(_ Source, tr Transition) { found <- tr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case n := <-lost:
		if n != 4 {
			t.Errorf("cover lost with %d folders watched, want 4", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher never reported its cover lost")
	}
	// Beyond the cover: the watcher cannot see which of d0..d5 it watches, so every one gets a
	// repository; the config of one it does not watch raises no event of its own.
	for i := 0; i < 6; i++ {
		mustWrite(t, filepath.Join(ws, "d"+itoa(i), "m", ".git", "config"), "[core]\n\tfsmonitor = \"evil\"\n")
	}
	mustWrite(t, filepath.Join(ws, "top"), "x") // an event in a covered folder
	moved := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(moved) < 6 {
		select {
		case tr := <-found:
			if strings.HasSuffix(tr.Path, "/m/.git/config") && strings.Contains(tr.Detail, "moved aside to") {
				moved[tr.Path] = true
			}
		case <-deadline:
			t.Fatalf("configs moved aside: %v; want all six (those beyond the cover stayed)", moved)
		}
	}
}
