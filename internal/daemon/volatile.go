package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// The box caches' package, program and bytecode layers are mounted volatile (the kernel's
// overlay option): nothing a box writes there is synced, neither on its fsync nor at the
// overlay's unmount, which otherwise syncs the host's whole filesystem of the upper layer when
// each box ends (docs/toolchains.md, "The box caches' durability"). A host that goes down
// before the kernel has written them back may leave those layers with lost or torn files. The
// kernel's own guard, a marker work/incompat/volatile in the work folder that makes the next
// mount on that work folder refuse, never fires here: every launch has a work folder of its
// own (launchWorkDir), removed at its end. So the daemon keeps its own: before a launch
// mounts a cache's layers volatile, a record of the current boot for that cache is on disk
// (synced); at the daemon's next start, a record of another boot says the host went down
// while those layers may have held unsynced writes, and the cache's volatile layers are
// emptied (said in the log), never used as they are. A clean stop of the daemon syncs the
// caches no box uses any more and drops their records. Dependency folders' layers, whose
// content the user keeps, are never volatile.

// volatileDir is the folder of the daemon's state holding the volatile records: one file per
// box cache, named as the cache, holding the boot id (/proc/sys/kernel/random/boot_id) in
// which its layers were mounted volatile. It lies outside every box cache: no box can write
// or remove a record.
const volatileDir = "cache-volatile"

// bootIDFile holds the kernel's id of the current boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// volatileCaches keeps the volatile records of the box caches under stateDir.
type volatileCaches struct {
	stateDir string
	log      *slog.Logger

	mu    sync.Mutex
	boot  string          // the current boot's id; "" until read
	noted map[string]bool // caches whose record holds boot
}

// bootID returns the current boot's id.
func (v *volatileCaches) bootID() (string, error) {
	if v.boot != "" {
		return v.boot, nil
	}
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("read the boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read the boot id: %s is empty", bootIDFile)
	}
	v.boot = id
	return id, nil
}

// record returns the path of box cache cache's volatile record.
func (v *volatileCaches) record(cache string) string {
	return filepath.Join(v.stateDir, volatileDir, filepath.Base(cache))
}

// note makes sure box cache cache's volatile record names the current boot, on disk (synced),
// before a box mounts its layers volatile, and reports whether they may be: once per cache and
// boot, later calls cost nothing. Where the record cannot be written the layers are mounted as
// before, synced (said in the log). A record of another boot is one recover could not reset:
// the cache may be torn, and the launch fails with an error saying how to reset it. A nil v
// notes nothing: no layer is volatile.
func (v *volatileCaches) note(cache string) (bool, error) {
	if v == nil {
		return false, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.noted[cache] {
		return true, nil
	}
	boot, err := v.bootID()
	if err != nil {
		v.log.Warn("box caches: mounted synced (not volatile)", "cache", cache, "err", err)
		return false, nil
	}
	p := v.record(cache)
	switch b, err := os.ReadFile(p); {
	case err == nil && strings.TrimSpace(string(b)) == boot:
	case err == nil:
		return false, fmt.Errorf("its layers were mounted without sync (volatile) in boot %s, which went down, and could not be reset: they may hold torn files; remove the folder (chmod -R u+rwx %s && rm -rf %s) and run the launch again",
			strings.TrimSpace(string(b)), cache, cache)
	case !errors.Is(err, fs.ErrNotExist):
		v.log.Warn("box caches: read the volatile record; mounted synced (not volatile)", "cache", cache, "err", err)
		return false, nil
	default:
		werr := os.MkdirAll(filepath.Dir(p), 0o700)
		if werr == nil {
			werr = atomicfile.WriteFile(p, []byte(boot+"\n"), 0o600)
		}
		if werr != nil {
			v.log.Warn("box caches: write the volatile record; mounted synced (not volatile)", "cache", cache, "err", werr)
			return false, nil
		}
	}
	if v.noted == nil {
		v.noted = map[string]bool{}
	}
	v.noted[cache] = true
	return true, nil
}

// recover empties, in every box cache whose volatile record names another boot than the
// current one, the layers a box may have mounted volatile (resetVolatileLayers), says so in
// the log, and drops the record. Call it at the daemon's start, before any launch.
func (v *volatileCaches) recover() {
	if v == nil {
		return
	}
	dir := filepath.Join(v.stateDir, volatileDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		v.log.Error("box caches: read the volatile records; a cache the host's crash may have torn is not reset", "dir", dir, "err", err)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	boot, err := v.bootID()
	if err != nil {
		v.log.Error("box caches: a cache the host's crash may have torn is not reset", "err", err)
		return
	}
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			v.log.Error("box caches: read a volatile record", "record", p, "err", err)
			continue
		}
		was := strings.TrimSpace(string(b))
		if was == boot {
			continue // this boot's: a daemon's restart, the page cache holds every write
		}
		cache := filepath.Join(v.stateDir, boxCacheDir, e.Name())
		reset, err := resetVolatileLayers(cache)
		if err != nil {
			// The record stays: the next start tries again, and no launch uses the layers as
			// they are meanwhile (note refuses a record of another boot).
			v.log.Error("box caches: the host went down while this cache's layers were mounted without sync (volatile); resetting them failed, remove the folder to reset it",
				"cache", cache, "boot", was, "err", err)
			continue
		}
		v.log.Warn("box caches: the host went down while this cache's layers were mounted without sync (volatile), so they may hold lost or torn files: emptied, the next builds in boxes of its workspace start cold",
			"cache", cache, "boot", was, "now", boot, "layers", reset)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.log.Error("box caches: remove a volatile record", "record", p, "err", err)
		}
	}
}

// flush syncs the file system of every box cache with a volatile record of this boot whose
// work folder is empty (no launch's overlays are mounted, nor about to be) and drops its
// record. Call it at the daemon's clean stop, once no launch starts; a cache a box still uses
// or a launch is still settling keeps its record (boxes outlive the daemon), which the next
// daemon's stop drops, or the next boot's start resets.
func (v *volatileCaches) flush() {
	if v == nil {
		return
	}
	dir := filepath.Join(v.stateDir, volatileDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // none
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	boot, err := v.bootID()
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if b, err := os.ReadFile(p); err != nil || strings.TrimSpace(string(b)) != boot {
			continue // another boot's: recover's
		}
		cache := filepath.Join(v.stateDir, boxCacheDir, e.Name())
		if ws, err := os.ReadDir(filepath.Join(cache, boxWorkDir)); err == nil && len(ws) > 0 {
			continue
		}
		if err := syncFS(cache); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.log.Warn("box caches: sync at the daemon's stop; the record stays (the next boot resets the cache)", "cache", cache, "err", err)
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.log.Warn("box caches: remove a volatile record", "cache", cache, "err", err)
			continue
		}
		delete(v.noted, cache)
	}
}

// resetVolatileLayers empties the upper layer of every layer of box cache cache that a box may
// have mounted volatile (each folder's upper/, the dependency folders' layers, dep-*, and the
// work folders excepted), without following a symlink out of the cache, and returns the
// layers emptied. cacheOverlays makes each upper layer again at the next launch.
func resetVolatileLayers(cache string) ([]string, error) {
	root, err := os.OpenRoot(cache)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var reset []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || name == boxWorkDir || strings.HasPrefix(name, "dep-") {
			continue
		}
		upper := filepath.Join(name, "upper")
		if _, err := root.Lstat(upper); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := root.RemoveAll(upper); err != nil {
			openTree(root, upper)
			if err := root.RemoveAll(upper); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
		}
		reset = append(reset, name)
	}
	slices.Sort(reset) // the folder's order is the file system's
	return reset, errors.Join(errs...)
}
