package plan

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// linkTo returns the ConfigLink of link among links (the zero value when it is not there).
func linkTo(links []ConfigLink, link string) ConfigLink {
	for _, l := range links {
		if l.Link == link {
			return l
		}
	}
	return ConfigLink{}
}

// TestLinkCacheSeesChanges: what FindLinks keeps of a folder between calls (linkCache) is never
// used once the folder changed. A PATH folder's link repointed into the workspace, a folder on
// a link's way replaced by a link into the workspace, and a new link each show in the next
// call, although every folder was kept (the clock moved an hour on, so that the racy rule keeps
// even the folders made now). Not parallel: it moves linkNow.
func TestLinkCacheSeesChanges(t *testing.T) {
	defer func(now func() time.Time) { linkNow = now }(linkNow)
	linkNow = func() time.Time { return time.Now().Add(time.Hour) }
	root, _ := filepath.EvalSymlinks(t.TempDir())
	bin, ws, out, d := filepath.Join(root, "bin"), filepath.Join(root, "ws"), filepath.Join(root, "out"), filepath.Join(root, "d")
	for _, dir := range []string{bin, ws, out, d} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(out, "x"), filepath.Join(ws, "x"), filepath.Join(d, "x")} {
		os.WriteFile(f, nil, 0o755)
	}
	tool, t2 := filepath.Join(bin, "tool"), filepath.Join(bin, "t2")
	os.Symlink(filepath.Join(out, "x"), tool)
	os.Symlink("../d/x", t2)
	find := func() []ConfigLink { return FindLinks("", nil, []string{bin}) }
	links := find()
	if l := linkTo(links, tool); l.Target != filepath.Join(out, "x") {
		t.Fatalf("first call: tool leads to %q", l.Target)
	}
	if l := linkTo(links, t2); l.Target != filepath.Join(d, "x") {
		t.Fatalf("first call: t2 leads to %q", l.Target)
	}
	linkCache.Lock()
	e := linkCache.folders[bin]
	kept := e != nil && e.listed && e.places["tool"].link
	linkCache.Unlock()
	if !kept {
		t.Fatalf("the PATH folder was not kept (entry %+v): the test would prove nothing", e)
	}
	// The times of a change are the clock's: let it move past the first look.
	time.Sleep(30 * time.Millisecond)
	os.Remove(tool)
	if err := os.Symlink(filepath.Join(ws, "x"), tool); err != nil {
		t.Fatal(err)
	}
	if l := linkTo(find(), tool); l.Target != filepath.Join(ws, "x") {
		t.Errorf("after tool was repointed into the workspace: it leads to %q", l.Target)
	}
	time.Sleep(30 * time.Millisecond)
	if err := os.Rename(d, d+"-old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, d); err != nil {
		t.Fatal(err)
	}
	if l := linkTo(find(), t2); l.Target != filepath.Join(ws, "x") || !slices.Contains(l.Via, d) {
		t.Errorf("after the folder on t2's way became a link into the workspace: it leads to %q via %q", l.Target, l.Via)
	}
	time.Sleep(30 * time.Millisecond)
	if err := os.Symlink(filepath.Join(ws, "y"), filepath.Join(bin, "new")); err != nil {
		t.Fatal(err)
	}
	if l := linkTo(find(), filepath.Join(bin, "new")); l.Target != filepath.Join(ws, "y") {
		t.Errorf("a new link into the workspace was not found: %+v", l)
	}
}

// TestLinkCacheRacy: a folder changed within racyAge of the look is not kept (a change in the
// same tick of the file system's clock would leave its times as they were), and is kept once
// it has not changed for that long.
func TestLinkCacheRacy(t *testing.T) {
	defer func(now func() time.Time) { linkNow = now }(linkNow)
	linkNow = time.Now
	bin, _ := filepath.EvalSymlinks(t.TempDir())
	os.Symlink("/nowhere", filepath.Join(bin, "tool"))
	FindLinks("", nil, []string{bin})
	linkCache.Lock()
	_, kept := linkCache.folders[bin]
	linkCache.Unlock()
	if kept {
		t.Errorf("a folder changed just now was kept")
	}
	linkNow = func() time.Time { return time.Now().Add(racyAge + time.Second) }
	FindLinks("", nil, []string{bin})
	linkCache.Lock()
	_, kept = linkCache.folders[bin]
	linkCache.Unlock()
	if !kept {
		t.Errorf("a folder unchanged for longer than racyAge was not kept")
	}
}

// TestLinkCacheConcurrent: launches call FindLinks at once (the daemon's goroutines), sharing
// the kept folders; each call sees every link (run with -race by scripts/test.sh). Not
// parallel: it moves linkNow.
func TestLinkCacheConcurrent(t *testing.T) {
	defer func(now func() time.Time) { linkNow = now }(linkNow)
	linkNow = func() time.Time { return time.Now().Add(time.Hour) }
	bin, _ := filepath.EvalSymlinks(t.TempDir())
	for i := range 50 {
		os.Symlink("../t"+string(rune('a'+i%26)), filepath.Join(bin, "l"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	done := make(chan int)
	for range 8 {
		go func() {
			n := 0
			for range 20 {
				n = len(FindLinks("", nil, []string{bin}))
			}
			done <- n
		}()
	}
	for range 8 {
		if n := <-done; n != 50 {
			t.Errorf("a call found %d links, want 50", n)
		}
	}
}
