package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatchHoldsOnlyTheSlowFolder: the watch holds back the rescan of a folder whose last rescan
// was slow (gatherRatio times its duration) and of no other: a box that fills one folder with
// tens of thousands of files cannot delay the check of .git or of any other folder with it. A
// folder whose hold would not outlast the debounce is never held.
func TestWatchHoldsOnlyTheSlowFolder(t *testing.T) {
	const debounce = 50 * time.Millisecond
	var f slowFolders
	// A repository's top is never held, however slow: the watch takes its .git's events
	// (config, hooks) for the folder's, and its scan reads the .git (review 28). Nor is one
	// that becomes a repository while held.
	ws := t.TempDir()
	repo, later := filepath.Join(ws, "repo"), filepath.Join(ws, "later")
	for _, d := range []string{filepath.Join(repo, ".git"), later} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.took(repo, time.Second, debounce)
	f.took(later, time.Second, debounce)
	if err := os.WriteFile(filepath.Join(later, ".git"), []byte("gitdir: elsewhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if due := f.split([]string{repo, later}, time.Now()); !slices.Equal(due, []string{repo, later}) || len(f.held) != 0 {
		t.Fatalf("due %v, held %v; want both repositories due", due, f.held)
	}
	f.took("/w/bin", 100*time.Millisecond, debounce) // slow: held for 400 ms
	f.took("/w/.git", 5*time.Millisecond, debounce)  // fast: never held
	f.took("/w/src", 12*time.Millisecond, debounce)  // 48 ms: within the debounce, never held
	now := time.Now()
	due := f.split([]string{"/w/bin", "/w/.git", "/w/src", "/w/.git"}, now)
	if !slices.Equal(due, []string{"/w/.git", "/w/src"}) || !slices.Equal(f.held, []string{"/w/bin"}) {
		t.Fatalf("due %v, held %v; want the fast folders due (once each) and /w/bin held", due, f.held)
	}
	when, ok := f.wake()
	if !ok || when.Before(now.Add(300*time.Millisecond)) || when.After(now.Add(time.Second)) {
		t.Fatalf("wake %v (%v), want about 400 ms after the scan", when.Sub(now), ok)
	}
	// Events in other folders meanwhile: checked at once, the held one stays held.
	if due := f.split([]string{"/w/.git"}, now.Add(100*time.Millisecond)); !slices.Equal(due, []string{"/w/.git"}) || !slices.Equal(f.held, []string{"/w/bin"}) {
		t.Fatalf("due %v, held %v; want /w/.git due and /w/bin still held", due, f.held)
	}
	// Its time come, the held folder is due with no new event, and no longer held.
	if due := f.split(nil, when); !slices.Equal(due, []string{"/w/bin"}) || len(f.held) != 0 {
		t.Fatalf("due %v, held %v; want /w/bin due", due, f.held)
	}
	if _, ok := f.wake(); ok {
		t.Fatal("wake: a folder is still held")
	}
	// A fast rescan of it afterwards lifts the hold.
	f.took("/w/bin", time.Millisecond, debounce)
	if due := f.split([]string{"/w/bin"}, now); !slices.Equal(due, []string{"/w/bin"}) {
		t.Fatalf("due %v, want /w/bin after a fast rescan", due)
	}
}
