package integrity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/inotify"
	"golang.org/x/sys/unix"
)

const inotifyMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// Run verifies the state every Interval and on inotify events until ctx ends. Inotify
// watches the workspace's directories (bounded by MaxWatches; a nested .git directory itself,
// not below it), the parents of the roots and the folders of folder roots. Without inotify
// the periodic check and the check at exit still run; over the bound every check rescans the
// whole workspace (see MaxWatches).
func (w *Watcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.periodic(ctx) }()
	err := w.inotify(ctx)
	wg.Wait()
	return err
}

type inotifier struct {
	f     *inotify.Reader
	owner map[int]string // wd → the directory whose scan an event there calls for
	path  map[int]string // wd → the directory it watches, as last added
	dirs  map[string]bool
	max   int
	// lost is called when a folder goes unwatched (Watcher.lostCover).
	lost func(watched int)
	// rules, when set, say which file events call for no rescan of their folder
	// (eventRules); used by parse and forget only, on the goroutine that reads the events.
	rules *eventRules
}

func (n *inotifier) add(dir, owner string) bool {
	if n.dirs[dir] {
		return false
	}
	if len(n.dirs) >= n.max {
		n.lost(len(n.dirs))
		return false
	}
	wd, err := n.f.AddWatch(dir, inotifyMask)
	if errors.Is(err, unix.EACCES) && restoreOwnerAccess(dir) == nil {
		// A folder its owner cannot read (a box's chmod 0311) cannot be watched, while the
		// host's tools open what it holds by name: the owner's read bit is given back
		// (review 11, F3).
		wd, err = n.f.AddWatch(dir, inotifyMask)
	}
	if err != nil {
		// Unwatched: the user's inotify watches are used up (ENOSPC), or a folder that
		// stays unreadable. Every check rescans the whole workspace from now on; a folder
		// gone meanwhile (ENOENT, ENOTDIR) is no loss, nor is a watch that is ending (its
		// instance closed: os.ErrClosed).
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, os.ErrClosed) {
			n.lost(len(n.dirs))
		}
		return false
	}
	if old, ok := n.path[wd]; ok && old != dir {
		// The folder watched as old was moved here (the same inode, the same watch): old is
		// free for a folder made there later.
		delete(n.dirs, old)
	}
	n.dirs[dir] = true
	n.owner[wd] = owner
	n.path[wd] = dir
	return true
}

// forget drops the paths of watch wd's folder, and of every folder watched beneath it, when the
// folder was removed (gone: its watch ended) or moved away: a folder made at the same path later
// is watched anew (addTree skips a path it watches). Before, the path stayed taken, and a box
// that removed a folder such as sub/.claude/hooks and made it again wrote hooks there that no
// event showed: they were found by the next full scan only, at the box's exit. A folder moved
// within the workspace is watched at its new path again by the move's event in its new parent
// (add maps the watch there).
func (n *inotifier) forget(wd int, gone bool) {
	dir, ok := n.path[wd]
	if !ok {
		return
	}
	delete(n.dirs, dir)
	for d := range n.dirs {
		if strings.HasPrefix(d, dir+"/") {
			delete(n.dirs, d)
		}
	}
	if n.rules != nil {
		n.rules.forget(dir)
	}
	if gone {
		delete(n.path, wd)
		delete(n.owner, wd)
	}
}

// addGitDir watches the .git folder p of the work tree owner, its hooks folder, and its linked
// worktrees' git directories (worktrees/ and each folder in it): an event in any makes a scan of
// owner, which reads the git directory (scanGitDir). The hooks folder's own watch makes a hook a
// box writes in a repository it made (git init, then .git/hooks/pre-commit) seen as it is
// written, not at the check at exit only; a worktree's, a commondir a box redirects to a
// repository of its own (a nested repository's worktree, whose commondir no pin keeps). Nothing
// else beneath .git is watched: git writes there at every command.
func (n *inotifier) addGitDir(p, owner string) {
	n.add(p, owner)
	if fi, err := os.Lstat(filepath.Join(p, "hooks")); err == nil && fi.IsDir() {
		n.add(filepath.Join(p, "hooks"), owner)
	}
	wts := filepath.Join(p, "worktrees")
	if fi, err := os.Lstat(wts); err == nil && fi.IsDir() {
		n.add(wts, owner)
		if ents, err := readDirOwned(wts); err == nil {
			for _, e := range ents {
				if e.IsDir() {
					n.add(filepath.Join(wts, e.Name()), owner)
				}
			}
		}
	}
}

// addTree watches dir and the directories beneath it (bounded, not into .git directories
// beyond the .git directory itself and its hooks) and returns those it added. A folder watched already (the
// workspace's top and the other folders of the roots, added first) is walked into all the
// same: before, the walk stopped there, so that no folder of the workspace that existed at
// launch was watched beyond the roots' own, and a .git pointer a box wrote into one (an
// uninitialised submodule's folder, review 13 F9) stayed until the check at exit.
func (n *inotifier) addTree(dir string) []string {
	var added []string
	stack := []string{dir}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if len(n.dirs) >= n.max && !n.dirs[d] {
			n.lost(len(n.dirs))
			break
		}
		if n.add(d, d) {
			added = append(added, d)
		} else if !n.dirs[d] {
			continue
		}
		ents, err := readDirOwned(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			p := filepath.Join(d, e.Name())
			if e.Name() == ".git" {
				n.addGitDir(p, d)
				continue
			}
			stack = append(stack, p)
		}
	}
	return added
}

// ErrNoInotify is Open's refusal: no inotify instance could be made for the watch.
var ErrNoInotify = errors.New("no inotify instance for the integrity watch")

// Open makes the watcher's inotify instance and the watches of its roots' folders (the
// protected configuration and the folders above it) now, before the box's program runs, so
// that a box cannot take the instance from it (a box that creates instances until refused,
// issue 21 finding 9) and no event of the program's there is missed; Run then reads from
// them and adds the rest of the workspace's folders. It fails, with ErrNoInotify and what to
// do, when no instance can be had (the user's fs.inotify.max_user_instances used up): the
// launch is refused rather than watched by the periodic check alone. Watches the user has no
// room for make the watcher rescan the whole workspace at every check (MaxWatches), as
// before. Without Open, Run makes them itself and goes on with the periodic check when it
// cannot (a re-adopted launch, whose box runs already).
func (w *Watcher) Open() error {
	n, err := w.openInotify()
	if err != nil {
		return fmt.Errorf("%w: inotify_init1: %v: the user's inotify instances (fs.inotify.max_user_instances) are used up; end what holds them (find /proc/*/fd -lname anon_inode:inotify) or raise the limit", ErrNoInotify, err)
	}
	w.mu.Lock()
	w.opened = n
	w.mu.Unlock()
	return nil
}

// openInotify makes an inotify instance watching the folders of the roots.
func (w *Watcher) openInotify() (*inotifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f, err := inotify.NewReader(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	n := &inotifier{f: f, owner: map[int]string{}, path: map[int]string{}, dirs: map[string]bool{}, max: w.maxWatches(),
		lost: w.lostCover}
	w.mu.Lock()
	n.rules = w.State.eventRules()
	for _, r := range w.State.Roots {
		n.add(filepath.Dir(r.Path), filepath.Dir(r.Path))
		if r.Entry.Kind == KindDir {
			n.add(r.Path, r.Path)
			for _, e := range r.Tree {
				if e.Kind == KindDir {
					p := filepath.Join(r.Path, e.Rel)
					n.add(p, p)
				}
			}
		}
	}
	w.mu.Unlock()
	return n, nil
}

func (w *Watcher) inotify(ctx context.Context) error {
	w.mu.Lock()
	n := w.opened
	w.opened = nil
	w.mu.Unlock()
	if n == nil {
		var err error
		if n, err = w.openInotify(); err != nil {
			w.lostCover(0)
			<-ctx.Done()
			return err
		}
	}
	// The instance is closed in the background (here on the way out, and below at ctx's end):
	// a close returns only once the kernel has freed the instance's watches, after a grace
	// period of milliseconds (fsnotify waits for its SRCU readers), which the launch's check
	// at exit, waiting for Run to return, need not wait for.
	defer func() { go n.f.Close() }()
	// The rest of the workspace's folders, while the launch goes on: 10–20 ms for a thousand
	// folders (docs/benchmarks.md), which Open would add to every launch.
	w.mu.Lock()
	ws := w.State.Workspace
	w.mu.Unlock()
	n.addTree(ws)

	go func() { <-ctx.Done(); n.f.Close() }()
	events := make(chan []string, 1)
	errc := make(chan error, 1)
	go readEvents(ctx, n.f, n.parse, events, errc)

	// Once the cover is lost, an event makes a full scan (a folder beyond the cover raises none
	// of its own: a gitlink the box adds shows as an event in the watched .git), at most once per
	// ten times the last full scan's duration; an event sooner arms fullC for then.
	var fullC <-chan time.Time
	var nextFull time.Time
	var slow slowFolders
	var heldC <-chan time.Time // when the first folder slow holds is due
	fullScan := func() {
		start := time.Now()
		w.verify(SourceInotify, true, nil)
		nextFull, fullC = time.Now().Add(10*time.Since(start)), nil
	}
	// check rescans the folders of dirty (with those held before) that are due, and arms heldC
	// for the held ones; once the cover is lost, a full scan stands for them all.
	targeted := func(dirty []string) {
		if due := slow.split(dirty, time.Now()); len(due) > 0 {
			w.verifyTimed(SourceInotify, false, due, func(dir string, d time.Duration) { slow.took(dir, d, w.debounce()) })
		}
	}
	check := func(dirty []string) {
		switch {
		case !w.coverLost.Load():
			targeted(dirty)
		case !time.Now().Before(nextFull):
			slow.held = nil
			fullScan()
		default:
			targeted(dirty)
			if fullC == nil {
				fullC = time.After(time.Until(nextFull))
			}
		}
		heldC = nil
		if t, ok := slow.wake(); ok {
			heldC = time.After(time.Until(t))
		}
	}
	for {
		var dirty []string
		select {
		case <-ctx.Done():
			return nil
		case <-fullC:
			fullScan()
			continue
		case <-heldC:
			heldC = nil
			check(nil)
			continue
		case d, ok := <-events:
			if !ok {
				err := <-errc
				if ctx.Err() != nil || errors.Is(err, os.ErrClosed) {
					return nil
				}
				return err
			}
			dirty = d
		}
		// Gather what follows for a moment (git writes many files per command).
		timer := time.NewTimer(w.debounce())
	gather:
		for {
			select {
			case d, ok := <-events:
				if !ok {
					break gather
				}
				dirty = append(dirty, d...)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				timer.Stop()
				return nil
			}
		}
		timer.Stop()
		check(dirty)
	}
}

// slowFolders holds back the rescans of the folders whose last rescan was slow: a folder whose
// scan took d is scanned again at the earliest gatherRatio times d after that scan ended. A box
// writing tens of thousands of files into one folder (a PATH folder an allowed .envrc names, an
// npm install's node_modules/.bin) had the watch rescan the growing folder after every
// debounce, most of a CPU of the daemon's for the length of the writes; now those rescans take
// at most a fifth of a CPU per folder. Only that folder waits (the others' events are checked
// after the debounce as before, behind at most a rescan already running), and never a
// repository's top (repositoryTop), whose scan is its git directory's
// (TestWatchHoldsOnlyTheSlowFolder). The check at exit reads every folder whole.
type slowFolders struct {
	next map[string]time.Time // a held folder: when its next rescan may start
	held []string             // folders with events, waiting for their time
}

// split returns the folders of dirty (and of those held before) due for a rescan now; the
// others stay held.
func (f *slowFolders) split(dirty []string, now time.Time) (due []string) {
	all := dedupe(append(dirty, f.held...))
	f.held = nil
	for _, d := range all {
		if t, ok := f.next[d]; ok && now.Before(t) && !repositoryTop(d) {
			f.held = append(f.held, d)
			continue
		}
		delete(f.next, d)
		due = append(due, d)
	}
	return due
}

// took records a rescan's duration; only one whose hold would outlast the debounce is kept,
// and never a repository's (repositoryTop).
func (f *slowFolders) took(dir string, d, debounce time.Duration) {
	if gatherRatio*d <= debounce || repositoryTop(dir) {
		return
	}
	if f.next == nil {
		f.next = map[string]time.Time{}
	}
	f.next[dir] = time.Now().Add(gatherRatio * d)
}

// repositoryTop reports whether dir holds a .git (a folder, a file or a link) or is a bare
// repository: the watch takes the events of its git directory (config, hooks, worktrees) for
// the folder's own, and the folder's scan reads the git directory, so holding the folder would
// hold them (a box that filled a nested repository's top with files delayed the move of a
// config it then wrote in its .git from 0.5 s to 4.7 s, review 28).
func repositoryTop(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return true
	}
	return bareRepository(dir)
}

// wake returns when the first held folder is due, and false when none is held.
func (f *slowFolders) wake() (time.Time, bool) {
	var first time.Time
	for _, d := range f.held {
		if t := f.next[d]; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first, len(f.held) > 0
}

// parse reads one read's inotify events, b: it keeps the watches up to date (a folder made or
// moved in is watched, one removed or moved away forgotten) and returns the folders whose scan
// the events call for.
func (n *inotifier) parse(b []byte) []string {
	var dirty []string
	inotify.Parse(b, func(ev inotify.Event) {
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			// The kernel's queue overflowed: events were lost, among them those of folders
			// made meanwhile, which are now unwatched. The cover is lost: from now on each
			// check rescans the whole workspace (the loop's first is at once). Before, the
			// event was dropped (its watch descriptor, -1, has no owner), and what the lost
			// events named waited for the periodic check or the check at exit.
			n.lost(len(n.dirs))
			return
		}
		owner, ok := n.owner[int(ev.Wd)]
		if !ok {
			return
		}
		if ev.Mask&(unix.IN_IGNORED|unix.IN_MOVE_SELF) != 0 {
			n.forget(int(ev.Wd), ev.Mask&unix.IN_IGNORED != 0)
			return // the event in the folder above names it
		}
		if n.rules != nil {
			switch dir := n.path[int(ev.Wd)]; {
			case ev.Mask&unix.IN_ISDIR != 0:
				// A folder made, removed or moved here: what the rules read of this folder
				// and of that one (a repository's top?) is read again.
				delete(n.rules.folders, dir)
				switch sub := filepath.Join(dir, ev.Name); {
				case ev.Name == "":
				case ev.Mask&unix.IN_CREATE != 0:
					delete(n.rules.folders, sub) // new: nothing beneath it was read
				default:
					n.rules.forget(sub) // removed or moved: and what was read beneath it
				}
			case dir == owner && n.rules.inert(owner, ev.Name):
				return // an ordinary file in an ordinary folder: nothing the folder's rescan finds (eventRules)
			}
		}
		dirty = append(dirty, owner)
		if filepath.Base(owner) == "hooks" {
			// A bare repository's hooks: its scan (ownerDir) finds them.
			dirty = append(dirty, filepath.Dir(owner))
		}
		if filepath.Base(owner) == "info" && filepath.Base(filepath.Dir(owner)) == "objects" {
			// A bare repository's alternates, likewise.
			dirty = append(dirty, filepath.Dir(filepath.Dir(owner)))
		}
		if name := ev.Name; ev.Mask&unix.IN_ISDIR != 0 && ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && name != "" {
			// The folder the event is in: owner, but for a .git folder and its hooks, whose
			// owner is the work tree above (before, a folder git made in .git, such as
			// objects/, was taken for one of the work tree, owner/objects, and walked there).
			dir := n.path[int(ev.Wd)]
			sub := filepath.Join(dir, name)
			switch {
			case name == ".git":
				n.addGitDir(sub, dir)
			case filepath.Base(dir) == ".git":
				if name == "hooks" || name == "worktrees" {
					n.add(sub, owner)
				}
			case filepath.Base(dir) == "worktrees" && filepath.Base(filepath.Dir(dir)) == ".git":
				n.add(sub, owner) // a linked worktree's git directory, made meanwhile
			case dir != owner:
				// In the hooks folder of a .git: not watched further.
			default:
				dirty = append(dirty, n.addTree(sub)...)
			}
		}
	})
	return dirty
}

// readEvents reads r (the inotify descriptor, closed when ctx ends) and sends each read's dirty
// folders (parse) on events, until a read fails or ctx ends while a send waits for the loop.
// Either way it sends the reason on errc, then closes events: the loop, finding events closed,
// waits for errc. (On the cancellation path it once closed events alone, and the loop, whose
// select may take the closed channel over ctx.Done, waited forever: TestReadEventsCancelled.)
func readEvents(ctx context.Context, r io.Reader, parse func([]byte) []string, events chan<- []string, errc chan<- error) {
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		if err != nil {
			errc <- err
			close(events)
			return
		}
		dirty := parse(buf[:k])
		select {
		case events <- dirty:
		case <-ctx.Done():
			errc <- ctx.Err()
			close(events)
			return
		}
		// Events gather in the kernel's queue for a moment before the next read: a box writing
		// thousands of files raises events microseconds apart, and a read for each (a wake-up,
		// a parse, a send) cost the daemon more CPU than the rescans they led to
		// (docs/benchmarks.md, "Work in the box"). The loop gathers for its debounce anyway.
		select {
		case <-time.After(readPause):
		case <-ctx.Done():
			errc <- ctx.Err()
			close(events)
			return
		}
	}
}

// gatherRatio bounds the share of a CPU the rescans of one folder take while a box writes into
// it without pause (slowFolders): at most 1/(gatherRatio+1) of the time.
const gatherRatio = 4

// readPause is how long readEvents lets events gather between reads: far below the loop's
// debounce, and far below what fills the kernel's queue (fs.inotify.max_queued_events, 16,384
// by default).
const readPause = 5 * time.Millisecond

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
