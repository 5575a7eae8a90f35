package integrity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// Registry reference-counts placeholders across the boxes of one user: a placeholder is
// created by the first launch that needs it, shared by later launches on the same workspace,
// and removed when the last one ends — and only if it is still the inode that was created
// (a file the user put there meanwhile is never removed). The state is a JSON file guarded by
// a lock file beside it, so that it survives a daemon restart (the re-adopting daemon
// releases the placeholders of the launches it settles).
type Registry struct {
	// Path is the registry file (in the daemon's state directory).
	Path string

	mu sync.Mutex
	// boxRepos are the workspaces of running launches that were in no repository when the
	// first of them started (Layout.NoRepository), each with the launches there that take its
	// repository for a box's: while one of them runs, the repository at that workspace's top
	// is one a box may be making. Kept in memory only: a daemon that restarts finds it again
	// in the states of the launches it resumes (HoldBoxRepo), and none is needed once the
	// boxes are gone.
	boxRepos map[string][]string
}

// HoldBoxRepo records that launch, resumed by a restarted daemon, runs in workspace ws, which
// was in no repository when it started (State.NoRepository): see Prepare.
func (r *Registry) HoldBoxRepo(launch, ws string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdBoxRepo(launch, ws)
}

func (r *Registry) holdBoxRepo(launch, ws string) {
	if r.boxRepos == nil {
		r.boxRepos = map[string][]string{}
	}
	if !slices.Contains(r.boxRepos[ws], launch) {
		r.boxRepos[ws] = append(r.boxRepos[ws], launch)
	}
}

type phEntry struct {
	Placeholder
	Dev     uint64   `json:"dev"`
	Ino     uint64   `json:"ino"`
	Holders []string `json:"holders"`
}

type phFile struct {
	Entries []*phEntry `json:"entries"`
}

func (r *Registry) locked(fn func(f *phFile) error) error {
	lock, err := os.OpenFile(r.Path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("placeholder registry: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("placeholder registry: lock: %w", err)
	}
	var st phFile
	b, err := os.ReadFile(r.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("placeholder registry: %w", err)
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return fmt.Errorf("placeholder registry %s: %w", r.Path, err)
		}
	}
	ferr := fn(&st)
	out, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return err
	}
	// Most launches hold no placeholder: writing the same state again would cost each of them
	// an fsync of the file and one of its folder, three times (prepare, hold, release).
	if bytes.Equal(out, b) || (b == nil && len(st.Entries) == 0) {
		return ferr
	}
	if err := atomicfile.WriteFile(r.Path, out, 0o600); err != nil {
		return fmt.Errorf("placeholder registry: %w", err)
	}
	return ferr
}

// Prepare resolves workspace ws (as Resolve does, with extra) for launch under the registry's
// lock, so that no other launch creates or removes a placeholder meanwhile. A workspace gets no
// placeholder (its absent protected paths are guarded: Layout.Guards); a placeholder an
// earlier version of agentbox left in the workspace and still holds is resolved as absent.
//
// A workspace in no repository (Layout.NoRepository: its box may git init) is recorded with
// launch until Release; while it is, the repository at its top is a box's for every launch
// there too (resolveExcept's boxRepo), and a launch in a folder beneath it that has no .git of
// its own is refused: the daemon's git would find that repository above the workspace, whose
// configuration the box writes, and take it for the user's. (A workspace beneath it with a
// .git of its own, a repository of the user's in a folder an agent explores, is git's there.)
func (r *Registry) Prepare(launch, ws string, extra []string) (*Layout, error) {
	var lay *Layout
	err := r.locked(func(f *phFile) error {
		held := map[string]bool{}
		for _, e := range f.Entries {
			if within(e.Path, ws) && e.Path != ws && e.untouched() {
				held[e.Path] = true
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		boxMade := false
		_, ownErr := os.Lstat(filepath.Join(ws, ".git"))
		for w, holders := range r.boxRepos {
			switch {
			case w == ws:
				boxMade = true
			case within(ws, w) && ownErr != nil:
				return fmt.Errorf("integrity: the workspace %s lies in %s, which was in no git repository when launch %s started there: the repository its box may have made (git init) is the box's, and its configuration is not checked for this workspace; start this launch in %s, or once every launch there has ended",
					ws, w, holders[0][:min(12, len(holders[0]))], w)
			}
		}
		var err error
		if lay, err = resolveExcept(ws, extra, held, boxMade); err != nil {
			return err
		}
		if lay.NoRepository {
			r.holdBoxRepo(launch, ws)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lay, nil
}

// Hold makes launch a holder of placeholders outside any workspace layout (the profile's home
// entries a box could otherwise create: profile.HomePlaceholders), creating those that are
// missing, under the registry's lock; Release removes them as it removes a layout's. Each is
// created only beneath its Beneath, never through a symlink; phs lists folders before what
// they hold. A path that exists and is not a placeholder is left alone (the box binds or masks
// it as it is), and one whose folder is missing is skipped (the box cannot reach it either).
// It returns the paths launch holds. On error the placeholders acquired so far stay held:
// call Release.
func (r *Registry) Hold(launch string, phs []Placeholder) ([]string, error) {
	var held []string
	err := r.locked(func(f *phFile) error {
		for _, p := range phs {
			if e := f.find(p.Path); e != nil {
				if e.same() {
					e.hold(launch)
					held = append(held, p.Path)
					continue
				}
				f.drop(e) // gone or replaced by the user: no longer ours
			}
			dev, ino, err := create(p)
			if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return fmt.Errorf("placeholder %s: %w", p.Path, err)
			}
			f.Entries = append(f.Entries, &phEntry{Placeholder: p, Dev: dev, Ino: ino, Holders: []string{launch}})
			held = append(held, p.Path)
		}
		return nil
	})
	return held, err
}

func (e *phEntry) hold(launch string) {
	if !slices.Contains(e.Holders, launch) {
		e.Holders = append(e.Holders, launch)
	}
}

// same reports whether the placeholder is still the inode created.
func (e *phEntry) same() bool {
	dev, ino, err := lstatBeneath(e.Beneath, e.Path)
	return err == nil && dev == e.Dev && ino == e.Ino
}

// untouched reports whether the placeholder is still the inode created and, for a file, still
// holds what was written: a placeholder someone wrote to is theirs (Release keeps it too).
func (e *phEntry) untouched() bool {
	if !e.same() {
		return false
	}
	if e.Dir {
		return true
	}
	dir, name, err := openParent(e.Beneath, e.Path)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	return sameContent(dir, name, e.Content)
}

// Release drops launch's hold on its placeholders and removes those no launch holds any
// more, if each is still the inode created (a folder only when empty). It returns the paths
// removed; a placeholder that cannot be removed is reported in the error and forgotten.
func (r *Registry) Release(launch string) ([]string, error) {
	var removed []string
	var errs []error
	err := r.locked(func(f *phFile) error {
		// Deepest first, so that a folder placeholder is empty when its turn comes.
		slices.SortFunc(f.Entries, func(a, b *phEntry) int { return strings.Compare(b.Path, a.Path) })
		keep := f.Entries[:0]
		for _, e := range f.Entries {
			if i := slices.Index(e.Holders, launch); i >= 0 {
				e.Holders = slices.Delete(e.Holders, i, i+1)
			}
			if len(e.Holders) > 0 {
				keep = append(keep, e)
				continue
			}
			ok, err := removeIfSame(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("placeholder %s: %w", e.Path, err))
			}
			if ok {
				removed = append(removed, e.Path)
			}
		}
		f.Entries = keep
		r.mu.Lock()
		defer r.mu.Unlock()
		for w, holders := range r.boxRepos {
			if holders = slices.DeleteFunc(holders, func(h string) bool { return h == launch }); len(holders) == 0 {
				delete(r.boxRepos, w)
			} else {
				r.boxRepos[w] = holders
			}
		}
		return nil
	})
	if err != nil {
		return removed, err
	}
	return removed, errors.Join(errs...)
}

// Holders returns the launches that hold a placeholder.
func (r *Registry) Holders() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	err := r.locked(func(f *phFile) error {
		for _, e := range f.Entries {
			for _, h := range e.Holders {
				if !seen[h] {
					seen[h] = true
					out = append(out, h)
				}
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, holders := range r.boxRepos {
			for _, h := range holders {
				if !seen[h] {
					seen[h] = true
					out = append(out, h)
				}
			}
		}
		return nil
	})
	return out, err
}

// Held returns the placeholders launch holds.
func (r *Registry) Held(launch string) ([]string, error) {
	var out []string
	err := r.locked(func(f *phFile) error {
		for _, e := range f.Entries {
			if slices.Contains(e.Holders, launch) {
				out = append(out, e.Path)
			}
		}
		return nil
	})
	return out, err
}

func (f *phFile) find(path string) *phEntry {
	for _, e := range f.Entries {
		if e.Path == path {
			return e
		}
	}
	return nil
}

func (f *phFile) drop(e *phEntry) {
	f.Entries = slices.DeleteFunc(f.Entries, func(x *phEntry) bool { return x == e })
}

// openParent opens path's parent directory beneath base without following symlinks.
func openParent(base, path string) (int, string, error) {
	rel, err := filepath.Rel(base, filepath.Dir(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, "", fmt.Errorf("%s is not beneath %s", path, base)
	}
	b, err := unix.Openat2(unix.AT_FDCWD, base, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return -1, "", err
	}
	defer unix.Close(b)
	fd, err := unix.Openat2(b, rel, &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_RDONLY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return -1, "", err
	}
	return fd, filepath.Base(path), nil
}

func lstatBeneath(base, path string) (dev, ino uint64, err error) {
	dir, name, err := openParent(base, path)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, 0, err
	}
	return st.Dev, st.Ino, nil
}

func create(p Placeholder) (dev, ino uint64, err error) {
	dir, name, err := openParent(p.Beneath, p.Path)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(dir)
	dirMode, fileMode := uint32(0o755), uint32(0o644)
	if p.Private {
		dirMode, fileMode = 0o700, 0o600
	}
	if p.Dir {
		if err := unix.Mkdirat(dir, name, dirMode); err != nil {
			return 0, 0, err
		}
	} else {
		fd, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, fileMode)
		if err != nil {
			return 0, 0, err
		}
		_, werr := unix.Write(fd, []byte(p.Content))
		unix.Close(fd)
		if werr != nil {
			unix.Unlinkat(dir, name, 0)
			return 0, 0, werr
		}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, 0, err
	}
	return st.Dev, st.Ino, nil
}

// removeIfSame removes a placeholder that is still the inode created; it reports whether it
// did. A folder placeholder someone put files into stays (ENOTEMPTY is reported).
func removeIfSame(e *phEntry) (bool, error) {
	dir, name, err := openParent(e.Beneath, e.Path)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if st.Dev != e.Dev || st.Ino != e.Ino {
		return false, nil // replaced by someone else: not ours any more
	}
	if !e.Dir && !sameContent(dir, name, e.Content) {
		return false, nil // written to (or replaced on a reused inode number): the user's now
	}
	flags := 0
	if e.Dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(dir, name, flags); err != nil {
		return false, err
	}
	return true, nil
}

// sameContent reports whether dir/name holds exactly content.
func sameContent(dir int, name, content string) bool {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	buf := make([]byte, len(content)+1)
	n, _ := unix.Read(fd, buf)
	return n == len(content) && string(buf[:n]) == content
}
