package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	find := func() []ConfigLink { return findLinks(t, "", nil, []string{bin}) }
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
		var fs unix.Statfs_t
		var st unix.Stat_t
		if unix.Statfs(bin, &fs) == nil && unix.Stat(bin, &st) == nil && !timesTrusted(&fs, &st) {
			t.Skipf("the temporary folder's file system (type %#x) is not one whose folders are kept", fs.Type)
		}
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
	findLinks(t, "", nil, []string{bin})
	linkCache.Lock()
	_, kept := linkCache.folders[bin]
	linkCache.Unlock()
	if kept {
		t.Errorf("a folder changed just now was kept")
	}
	linkNow = func() time.Time { return time.Now().Add(racyAge + time.Second) }
	findLinks(t, "", nil, []string{bin})
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
				l, _ := FindLinks("", nil, []string{bin})
				n = len(l)
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

// TestLinkTimesTrusted: folders are kept only on file systems whose folders' times show every
// change of their entries at a finer grain than the second (review of the cache: overlayfs,
// FUSE and network file systems, and one-second times, let a change go unseen).
func TestLinkTimesTrusted(t *testing.T) {
	fine := unix.Stat_t{Ctim: unix.Timespec{Sec: 1, Nsec: 5}}
	whole := unix.Stat_t{Ctim: unix.Timespec{Sec: 1}}
	for _, c := range []struct {
		fs   int64
		st   unix.Stat_t
		want bool
	}{
		{unix.EXT4_SUPER_MAGIC, fine, true}, {unix.TMPFS_MAGIC, fine, true}, {unix.BTRFS_SUPER_MAGIC, fine, true},
		{unix.EXT4_SUPER_MAGIC, whole, false}, {unix.OVERLAYFS_SUPER_MAGIC, fine, false},
		{unix.FUSE_SUPER_MAGIC, fine, false}, {unix.NFS_SUPER_MAGIC, fine, false},
	} {
		fs := unix.Statfs_t{Type: c.fs}
		if got := timesTrusted(&fs, &c.st); got != c.want {
			t.Errorf("file system %#x, ctime %+v: trusted %v, want %v", c.fs, c.st.Ctim, got, c.want)
		}
	}
}

// TestFindLinksNoDescriptors: a folder FindLinks cannot open for want of a descriptor is an
// error, not a folder without links (review of the cache: with RLIMIT_NOFILE at 12 it found no
// link, and CheckConfigLinks let the workspace through). The child process lowers its limit.
func TestFindLinksNoDescriptors(t *testing.T) {
	if os.Getenv("AGENTBOX_TEST_NOFILE_CHILD") == "1" {
		root := os.Getenv("AGENTBOX_TEST_NOFILE_ROOT")
		var folders []string
		for i := range 40 {
			folders = append(folders, filepath.Join(root, "f", string(rune('a'+i%26))+string(rune('a'+i/26))))
		}
		unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 12, Max: 12})
		links, err := FindLinks("", folders, nil)
		if err == nil {
			os.Stdout.WriteString("NOERROR " + strings.Repeat("x", len(links)))
			return
		}
		os.Stdout.WriteString("ERROR " + err.Error())
		return
	}
	root, _ := filepath.EvalSymlinks(t.TempDir())
	for i := range 40 {
		dir := filepath.Join(root, "f", string(rune('a'+i%26))+string(rune('a'+i/26)))
		os.MkdirAll(dir, 0o755)
		os.Symlink(filepath.Join(root, "ws", "x"), filepath.Join(dir, "l"))
	}
	c := exec.Command(os.Args[0], "-test.run", "^TestFindLinksNoDescriptors$")
	c.Env = append(os.Environ(), "AGENTBOX_TEST_NOFILE_CHILD=1", "AGENTBOX_TEST_NOFILE_ROOT="+root)
	out, err := c.Output()
	if err != nil || !strings.Contains(string(out), "ERROR ") || strings.Contains(string(out), "NOERROR") {
		t.Errorf("FindLinks with too few descriptors: %v\n%s", err, out)
	}
}

// TestFindLinksUnsearchableFolder: a PATH folder that can be read but not entered (mode 0644)
// is listed, as before the cache, and refuses nothing: no program runs from it anyway (the
// second review of the cache found it refused every launch, listed by opening "." again).
// Needs an ordinary user (root enters any folder).
func TestFindLinksUnsearchableFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root enters any folder")
	}
	bin, _ := filepath.EvalSymlinks(t.TempDir())
	os.Symlink("/nowhere", filepath.Join(bin, "tool"))
	os.Chmod(bin, 0o644)
	defer os.Chmod(bin, 0o755)
	links, err := FindLinks("", nil, []string{bin})
	if err != nil {
		t.Fatalf("a readable, unsearchable PATH folder: %v", err)
	}
	if len(links) != 1 {
		t.Errorf("links %+v, want the one link listed", links)
	}
}

// TestFindLinksLongName: a PATH entry whose name is too long for the kernel is a folder that is
// not there, as before the cache: it refuses nothing.
func TestFindLinksLongName(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("a", 300))
	if _, err := FindLinks("", nil, []string{long}); err != nil {
		t.Errorf("a PATH entry with a name too long: %v", err)
	}
}
