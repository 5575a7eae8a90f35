package idmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Remap reports whether a box started by the calling process runs as a box uid (BoxUID)
// instead of the caller's own: when the caller is host root. uid 0 of another user namespace
// (a rootless container) is no host root and needs no remap, as for an ordinary user.
func Remap() (bool, error) {
	if os.Geteuid() != 0 {
		return false, nil
	}
	initial, err := InitialUserNS()
	if err != nil {
		return false, fmt.Errorf("box uid: %w", err)
	}
	return initial, nil
}

// Maps returns the uid (or gid) mappings of the user namespace of a box that runs as host id
// box: its own id inside → box, and nothing else. Host root is not mapped there, so that no
// capability in that namespace (box-init's, or one the program would gain) reaches host
// root's files or processes; what box-init binds reaches it through StartCovered's folders.
func Maps(inside, box int) []syscall.SysProcIDMap {
	return []syscall.SysProcIDMap{{ContainerID: inside, HostID: box, Size: 1}}
}

// StartCovered calls start on the calling thread in a mount namespace of the thread's own, a
// slave of its current one, in which each of paths that exists — or the topmost folder above
// it that others may not search (closedAncestor); those beneath another are covered with it,
// and a symbolic link is left alone — is replaced by an idmapped clone
// of itself, submounts included, that shows host root's files (uid and gid 0) as box's and
// makes what box writes there host root's. A box's init that start clones with a new mount
// namespace keeps the clones; the thread then returns to its mount namespace. It must be host
// root. An error names the path and the reason, and start is not called.
func StartCovered(paths []string, box int, start func() error) error {
	userns, err := boxNamespace(box)
	if err != nil {
		return err
	}
	defer unix.Close(userns)
	return aside(false, func(int) error {
		if err := coverAll(paths, userns); err != nil {
			return err
		}
		return start()
	})
}

// boxNamespace returns a descriptor of the user namespace of the idmapping of a box uid's
// folders: 0 → box.
func boxNamespace(box int) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	userns, err := namespace([]syscall.SysProcIDMap{{ContainerID: 0, HostID: box, Size: 1}})
	if err != nil {
		return -1, fmt.Errorf("box uid %d: %w", box, err)
	}
	return userns, nil
}

// aside calls f on the calling thread in a new mount namespace, a slave of the thread's (and,
// with shared, the peer of the copies made from it, so that what is mounted there later
// reaches them), with a descriptor of that namespace; the thread then returns to its own.
func aside(shared bool, f func(ns int) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	back, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("box uid: %w", err)
	}
	defer unix.Close(back)
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("box uid: new mount namespace: %w", err)
	}
	ferr := func() error {
		// A slave first: nothing mounted here may reach the namespace the thread came from.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return fmt.Errorf("box uid: make / a slave: %w", err)
		}
		if shared {
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
				return fmt.Errorf("box uid: make / shared: %w", err)
			}
		}
		ns, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("box uid: %w", err)
		}
		defer unix.Close(ns)
		return f(ns)
	}()
	if err := unix.Setns(back, unix.CLONE_NEWNS); err != nil {
		// The thread stays locked (and ends with its goroutine): it is in the covered view.
		runtime.LockOSThread()
		return errors.Join(ferr, fmt.Errorf("box uid: return to the mount namespace: %w", err))
	}
	return ferr
}

// coverAll covers, in the calling thread's mount namespace, what StartCovered covers, with
// the idmapping of userns (boxNamespace).
func coverAll(paths []string, userns int) error {
	var reach []string
	seen := map[string]folderMode{} // the folders on the way, each read once for all paths
	for _, p := range paths {
		reach = append(reach, closedAncestor(p, seen))
	}
	for _, p := range Topmost(reach) {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) || err == nil && fi.Mode()&os.ModeSymlink != 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("box uid: %w", err)
		}
		if err := cover(p, userns); err != nil {
			return fmt.Errorf("idmapped folder %s of a root-run box: %w", p, err)
		}
	}
	return nil
}

// Staging is the mount namespace a box started by host root ahead of its launch (a spare
// shim's) is started from, so that its folders, known only when the launch arrives, can be
// covered then (Cover) and reach the box's own mount namespace, a copy of Staging's whose
// mounts receive what is mounted there.
type Staging struct {
	ns     int
	userns int // the idmapping's (boxNamespace), made ahead too
}

// Stage calls start on the calling thread in a new Staging for a box of box uid box (as
// StartCovered, with nothing covered yet) and returns it.
func Stage(box int, start func() error) (*Staging, error) {
	st := &Staging{ns: -1, userns: -1}
	var err error
	if st.userns, err = boxNamespace(box); err != nil {
		return nil, err
	}
	err = aside(true, func(ns int) error {
		var err error
		if st.ns, err = unix.Dup(ns); err != nil {
			return fmt.Errorf("box uid: %w", err)
		}
		unix.CloseOnExec(st.ns)
		return start()
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Cover covers paths in the staging namespace as StartCovered does, before the box started
// from it builds its root (it must not have made its mounts private yet). It runs on a thread
// of its own, which ends with it.
func (st *Staging) Cover(paths []string) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread leaves its shared file system attributes to enter the
		// namespace, and ends when this goroutine does.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("box uid: %w", err)
			return
		}
		if err := unix.Setns(st.ns, unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("box uid: enter the staging mount namespace: %w", err)
			return
		}
		done <- coverAll(paths, st.userns)
	}()
	return <-done
}

// Close releases the staging namespace (the box keeps its own copy).
func (st *Staging) Close() {
	if st == nil {
		return
	}
	for _, fd := range []*int{&st.ns, &st.userns} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// folderMode is what closedAncestor reads of a folder on the way: a folder (not a link, not
// missing) and, if so, whether others may search it.
type folderMode struct{ dir, closed bool }

// closedAncestor returns the topmost folder above p that others may not search (0700
// /root, a runtime directory), or p when there is none: the box's uid reaches p only when that
// folder is covered too, since it walks the path from /, not from p (bwrap resolves its bind
// sources by their real path, even one given as a descriptor). seen holds what an earlier
// call of the same cover read of a folder: a launch's paths share most of their folders (a
// Claude Code launch's 100 or so paths made 650 lstat calls, most of a root-run launch's
// shim's time before its box was built: docs/benchmarks.md).
func closedAncestor(p string, seen map[string]folderMode) string {
	p = filepath.Clean(p)
	for dir := "/"; ; {
		rest, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
		if !ok || rest == "" {
			return p
		}
		next, _, _ := strings.Cut(rest, "/")
		dir = filepath.Join(dir, next)
		if dir == p {
			return p
		}
		m, ok := seen[dir]
		if !ok {
			fi, err := os.Lstat(dir)
			m = folderMode{dir: err == nil && fi.IsDir()}
			m.closed = m.dir && fi.Mode().Perm()&0o001 == 0
			seen[dir] = m
		}
		if !m.dir {
			return p
		}
		if m.closed {
			return dir
		}
	}
}

// Topmost returns the clean absolute paths of paths, sorted, without those beneath another.
func Topmost(paths []string) []string {
	var clean []string
	for _, p := range paths {
		if filepath.IsAbs(p) {
			clean = append(clean, filepath.Clean(p))
		}
	}
	slices.Sort(clean)
	clean = slices.Compact(clean)
	var out []string
	for _, p := range clean {
		if n := len(out); n > 0 && (out[n-1] == "/" || strings.HasPrefix(p, out[n-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}
