package integrity

import (
	"context"
	"os"
	"os/exec"
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

// TestWatchFolderMadeAgain: a folder of the workspace that is removed (or moved away) and made
// again at the same path is watched again, so that configuration written into the new folder
// is moved aside at its event; and so is a new hook of a bare repository. Before, the watcher kept the old folder's path as watched: a
// box that removed sub/.claude/hooks and made it again wrote hooks there that stayed, where
// the host's Claude Code started in sub runs them, until the full scan at the box's exit.
func TestWatchFolderMadeAgain(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	hooks := filepath.Join(ws, "sub", ".claude", "hooks")
	mustWrite(t, filepath.Join(hooks, "deep", "keep.txt"), "x")
	for _, f := range []string{"HEAD", "config", "objects/info/packs", "hooks/README.sample"} {
		mustWrite(t, filepath.Join(ws, "bare.git", f), "")
	}
	found := make(chan Transition, 64)
	w := &Watcher{State: &State{Workspace: ws, Exec: map[string]string{}}, Interval: time.Hour, Debounce: 5 * time.Millisecond,
		OnTransition: func(_ Source, tr Transition) { found <- tr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// movedAside writes path until a transition says it was moved aside; the writes are
	// repeated only while the watches may not be in place yet (the first one).
	movedAside := func(path string, rewrite bool) {
		t.Helper()
		mustWrite(t, path, "#!/bin/sh\necho box\n")
		deadline := time.After(10 * time.Second)
		for i := 0; ; i++ {
			select {
			case tr := <-found:
				if tr.Path == path && strings.Contains(tr.Detail, "moved aside to") {
					return
				}
			case <-time.After(100 * time.Millisecond):
				if rewrite {
					mustWrite(t, path, "#!/bin/sh\necho box "+itoa(i)+"\n")
				}
			case <-deadline:
				t.Fatalf("%s was not moved aside at its event", path)
			}
		}
	}
	movedAside(filepath.Join(hooks, "deep", "a.sh"), true) // the folders are watched
	for _, remake := range []func() error{
		func() error { return os.RemoveAll(hooks) },
		func() error { return os.Rename(hooks, hooks+".old") },
	} {
		if err := remake(); err != nil {
			t.Fatal(err)
		}
		movedAside(filepath.Join(hooks, "deep", "b.sh"), false)
		movedAside(filepath.Join(hooks, "c.sh"), false)
	}
	// A bare repository's new hook, at the event of its hooks folder (its owner is the
	// repository, whose scan finds it): before, at the full scan only.
	movedAside(filepath.Join(ws, "bare.git", "hooks", "pre-commit"), false)
}

// TestWatchFoldersAtLaunch guards review 13's finding F9 at the watcher: a folder that exists
// at launch (an uninitialised submodule's empty folder, lib) gets a .git pointer leading out of
// the workspace, which is moved aside at its event. Before, the walk of the workspace stopped
// at its top, which the roots' folders had put among the watched ones already, so that no
// other folder of the workspace that existed at launch was watched: the pointer stayed until
// the check at exit, and the host's git status at the top ran what its gitdir's config named.
func TestWatchFoldersAtLaunch(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	mustWrite(t, filepath.Join(ws, "deep", "er", "f"), "x")
	if err := os.Mkdir(filepath.Join(ws, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	lay, err := Resolve(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := make(chan Transition, 64)
	w := &Watcher{State: Snapshot(lay, Limits{}), Interval: time.Hour, Debounce: 5 * time.Millisecond,
		OnTransition: func(_ Source, tr Transition) { found <- tr }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	outside := t.TempDir()
	for _, dir := range []string{"lib", "deep/er"} {
		p := filepath.Join(ws, dir, ".git")
		// Written again while the watches may not be in place yet.
		mustWrite(t, p, "gitdir: "+outside+"/evil.git\n")
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case tr := <-found:
				if tr.Path == p && strings.Contains(tr.Detail, "leading out of the workspace") && strings.Contains(tr.Detail, "moved aside to") {
					break wait
				}
			case <-time.After(100 * time.Millisecond):
				mustWrite(t, p, "gitdir: "+outside+"/evil.git\n")
			case <-deadline:
				t.Fatalf("%s, a pointer leading out of the workspace in a folder that existed at launch, was not moved aside at its event", p)
			}
		}
	}
}
