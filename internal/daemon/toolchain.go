package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	pathpkg "path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/plan"
)

// hostGoProxy is the GOPROXY the host's go command uses when the user's environment sets none
// (`go env GOPROXY`, asked once per daemon: agentbox names no module proxy of its own), or
// "direct" when no go command answers. go runs in "/" with GOTOOLCHAIN=local: no go.mod or
// go.work a box wrote can make it switch toolchains; it is the go found through the daemon's
// PATH when the daemon started (hostprog), never looked up again.
var hostGoProxy = sync.OnceValue(goEnvGoProxy)

// goEnvGoProxy runs `go env GOPROXY` (hostGoProxy).
func goEnvGoProxy() string {
	cmd := hostprog.Command(context.Background(), "go", "env", "GOPROXY")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "direct"
}

// boxCacheDir is the folder of the box caches under the daemon's state directory: one per
// workspace (boxCache), bound read-write into every box of that workspace at its own path, and
// read by nothing outside a box (docs/toolchains.md).
const boxCacheDir = "cache"

// boxCache is the box cache of workspace ws under stateDir: <stateDir>/cache/<the first 16
// bytes of sha256(ws), in hex>. A box of one workspace never sees another's, so what it plants
// there (an extracted module, a build cache entry) runs in no other workspace's box.
func boxCache(stateDir, ws string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(ws)))
	return filepath.Join(stateDir, boxCacheDir, hex.EncodeToString(sum[:16]))
}

// makeBoxCache creates workspace ws's box cache (and the folder of box caches), 0700, when
// missing, and returns its path.
func makeBoxCache(stateDir, ws string) (string, error) {
	cache := boxCache(stateDir, ws)
	for _, p := range []string{filepath.Dir(cache), cache} {
		if err := os.Mkdir(p, 0o700); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	return cache, nil
}

// goProxyNoUserinfo returns GOPROXY value v with the userinfo (user:password@) removed from
// every entry's host: a proxy's credentials never enter the box. The separators (',' and '|')
// and every other entry ("direct", "off", file:// URLs, hosts without userinfo) stay as they are.
func goProxyNoUserinfo(v string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == ',' || v[i] == '|' {
			e := v[start:i]
			rest, prefix := e, ""
			if j := strings.Index(e, "://"); j >= 0 {
				prefix, rest = e[:j+3], e[j+3:]
			}
			host := rest
			if j := strings.IndexAny(rest, "/?#"); j >= 0 {
				host = rest[:j]
			}
			if j := strings.LastIndexByte(host, '@'); j >= 0 {
				e = prefix + rest[j+1:]
			}
			b.WriteString(e)
			if i < len(v) {
				b.WriteByte(v[i])
			}
			start = i + 1
		}
	}
	return b.String()
}

// toolchainCompanions are the home folders a toolchain root loads from beside it: rustup's
// proxies in ~/.cargo/bin run the toolchains in ~/.rustup.
var toolchainCompanions = map[string][]string{".cargo/bin": {".rustup"}}

// toolchains adds to c what launch id's box needs to build the user's project
// (docs/toolchains.md): the toolchains on the caller's PATH under home, and the install prefix
// of the program prog itself (programRoot), read-only at their own paths; the host's Go module cache, read-only, as the first GOPROXY; the bytecode of the
// system's Python and of the toolchain Pythons the launch selects from its start folder cwd;
// and the box cache for what the box's builds write (the workspace ws's own). env is the caller's environment; facts are the workspace
// rules, which also decide which parts of the home a toolchain may bring (never a harness
// home, never the home itself).
func (d *Daemon) toolchains(id, ws, cwd, home, prog string, env []string, facts plan.WorkspaceFacts, c *plan.Contributions) error {
	var roots []string
	rhome := plan.ResolveExisting(home) // toolchainRoots' are resolved
	for _, p := range toolchainRoots(home, envValue(env, "PATH"), facts) {
		if isPackageCache(rhome, p) {
			continue // the box sees it as that cache's overlay (cacheOverlays)
		}
		if !slices.ContainsFunc(roots, func(r string) bool { return p == r || plan.Within(p, r) }) {
			roots = append(roots, p)
		}
	}
	if p := programRoot(home, prog, roots, facts); p != "" {
		roots = append(roots, p)
	}
	for _, r := range roots {
		if rel, err := filepath.Rel(rhome, r); err == nil {
			for _, comp := range toolchainCompanions[rel] {
				if p := filepath.Join(rhome, comp); !slices.Contains(roots, p) && plan.CheckWorkspace(p, facts) == nil {
					if st, err := os.Stat(p); err == nil && st.IsDir() {
						roots = append(roots, p)
					}
				}
			}
		}
	}
	// A root beneath a package cache's folder (~/.cargo/bin) is bound over that cache's overlay
	// (the engine mounts a folder's children after it): the toolchain stays read-only.
	for _, r := range roots {
		c.Mounts = append(c.Mounts, plan.Mount{Kind: plan.MountBind, Source: r, Target: r, ReadOnly: true, Optional: true})
		c.ReadOnly = append(c.ReadOnly, r)
	}

	cache, err := makeBoxCache(d.stateDir, ws)
	if err != nil {
		return err
	}
	c.Mounts = append(c.Mounts, plan.Mount{Kind: plan.MountBind, Source: cache, Target: cache})
	c.ReadWrite = append(c.ReadWrite, cache)

	// Go: modules come from the host's module cache first (read-only), then from the user's
	// GOPROXY, through the egress proxy, which refuses at once (and says which key) what
	// egressAllow does not name. A proxy's userinfo stays out of the box.
	goproxy := envValue(env, "GOPROXY")
	if goproxy == "" {
		goproxy = hostGoProxy()
	}
	goproxy = goProxyNoUserinfo(goproxy)
	mc := hostModCache(home, env)
	_, dlErr := os.Stat(filepath.Join(mc, "cache", "download"))
	caches := homeCaches(home)
	gomodcache := filepath.Join(cache, "go", "mod")
	if isPlainDir(mc) && plan.CheckWorkspace(mc, facts) == nil && mc != ws && !plan.Within(mc, ws) && !plan.Within(ws, mc) {
		// The box's module cache is at the host's path, an overlay of the host's under the box
		// cache's gomod layer: a compilation's build cache key holds its package's folder, so
		// what the host compiled of its modules is a hit in the box (GOCACHE below). Where no
		// overlay can be built the layer alone is there, and the host's downloads are its
		// first proxy, read-only at hostGoProxyView: extracted there, each module is again at
		// the host's path.
		caches = append(caches, packageCache{name: "gomod", dir: mc})
		gomodcache = mc
		if dlErr == nil && goproxy != "off" {
			c.Mounts = append(c.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(mc, "cache", "download"),
				Target: hostGoProxyView, ReadOnly: true, Optional: true})
			c.ReadOnly = append(c.ReadOnly, hostGoProxyView)
			goproxy = "file://" + hostGoProxyView + "," + goproxy
		}
	} else if dlErr == nil && goproxy != "off" {
		// A module cache the box cannot see at its own path (a symlink, one inside the
		// workspace): the box extracts into the box cache's own, from the host's read-only.
		if !slices.ContainsFunc(roots, func(r string) bool { return mc == r || plan.Within(mc, r) }) {
			c.Mounts = append(c.Mounts, plan.Mount{Kind: plan.MountBind, Source: mc, Target: mc, ReadOnly: true, Optional: true})
			c.ReadOnly = append(c.ReadOnly, mc)
		}
		goproxy = "file://" + filepath.Join(mc, "cache", "download") + "," + goproxy
	}
	// The box's python keeps its bytecode in the box cache (below), over the system's own.
	pycache := filepath.Join(cache, "python", "pycache")
	if mirror := d.pythonBytecode(toolchainPythonLibs(roots, ws, cwd, env)); mirror != "" {
		caches = append(caches, packageCache{name: "python", dir: pycache, lower: mirror})
	}
	if err := cacheOverlays(cache, id, caches, roots, facts, d.volatile, c); err != nil {
		return err
	}
	// The build cache is the host's default one below the box cache's layer (cacheOverlays:
	// what the host compiled from the same inputs is a hit, its folder is never written).
	c.Env = append(c.Env,
		"GOMODCACHE="+gomodcache,
		"GOCACHE="+filepath.Join(home, goBuildCache),
		"GOPROXY="+goproxy,
	)
	// The settings that decide what go builds, as the host's go has them: a box's build then
	// compiles and links what the host's does, and hits the host's build cache.
	c.Env = append(c.Env, goBuildSettings(home, ws, env)...)

	// What the box's cargo and python build from the workspace goes to the box cache, not
	// beside the sources, where the host's tools would take it for their own fresh output and
	// run it: cargo runs a binary under target/ whose fingerprint is fresh (`cargo run`; a
	// dependency the box compiled from a crate its box cache's layer holds, which a box may
	// have rewritten, has the fingerprint of the host's), and python imports a
	// __pycache__/*.pyc whose header matches its source's mtime and size, whatever the source
	// says. With PYTHONPYCACHEPREFIX the box's python also reads bytecode from there only.
	c.Env = append(c.Env,
		"CARGO_TARGET_DIR="+filepath.Join(cache, "cargo", "target"),
		"PYTHONPYCACHEPREFIX="+pycache,
	)
	// npm asks its registry for a newer npm at most once a day, whatever the command (its
	// update notifier): in a box whose egress proxy refuses the registry, an `npm ci --offline`
	// that needed no network ended with a line naming the registry as refused.
	c.Env = append(c.Env, npmNoUpdateCheck)
	return nil
}

// npmNoUpdateCheck turns npm's daily check for a newer npm off in every box (toolchains).
const npmNoUpdateCheck = "npm_config_update_notifier=false"

// packageCache is a package cache beneath the home that a box reads from the host and writes
// to its box cache, at the tool's own default place (the box's environment names no other).
type packageCache struct {
	name string // its layers' folder in the box cache
	rel  string // its folder, relative to the home
	dir  string // its folder, absolute (homeCaches sets it from rel)
	// masks are files beneath the folder that hold credentials, relative to it: hidden in the
	// box.
	masks []string
	// lowerFallback: where no overlay can be built, the box gets the host's folder read-only
	// rather than the box cache's layer alone (plan.Mount.LowerFallback).
	lowerFallback bool
	// workspace, when set, is the workspace the folder lies in (a dependency folder): the
	// overlay's lower layer is opened beneath it (plan.Mount.SourceBeneath).
	workspace string
	// lower, when set, is the overlay's lower layer in place of the folder itself, which is
	// then a folder of the box cache (the python bytecode prefix over the system's bytecode
	// mirror, bytecode.go), made here as the overlay's mount point.
	lower string
}

// goBuildCache is the go command's default build cache beneath the home (the box's GOCACHE).
const goBuildCache = ".cache/go-build"

// packageCaches are npm's cache, pip's (built wheels and downloads), uv's, go's build cache
// (a workspace's first build in a box takes what the host compiled of the standard
// library: docs/toolchains.md), and cargo's home
// (its registry index, downloaded and extracted crates, git checkouts, its lock and last-use
// files; the registry tokens in its credentials files are masked). Where no overlay can be
// built, a box gets the host's cargo home read-only, as when it was only the toolchain beside
// ~/.cargo/bin: cargo builds offline from what the host extracted, and writes nothing. go
// refuses a build cache it cannot write ("failed to initialize build cache"), so there it
// gets the box cache's layer alone, as npm, pip and uv do.
var packageCaches = []packageCache{
	{name: "npm", rel: ".npm"},
	{name: "pip", rel: ".cache/pip"},
	{name: "uv", rel: ".cache/uv"},
	{name: "go-build", rel: goBuildCache},
	{name: "cargo", rel: ".cargo", masks: []string{"credentials", "credentials.toml"}, lowerFallback: true},
}

// hostGoProxyView is where a box sees the host's module downloads (<GOMODCACHE>/cache/download)
// read-only, its first GOPROXY entry: where its module cache, at the host's path, is the box
// cache's layer alone (no overlay), go extracts from there what the host has downloaded.
const hostGoProxyView = "/run/agentbox-goproxy"

// homeCaches returns packageCaches with their folders beneath home.
func homeCaches(home string) []packageCache {
	out := slices.Clone(packageCaches)
	for i := range out {
		out[i].dir = filepath.Join(home, out[i].rel)
	}
	return out
}

// programCaches adds to c a program's caches in the home (a profile's cache entries, rels
// relative to home: Copilot CLI's extracted package): each an overlay of the host's folder,
// read and never written, under its layer in workspace ws's box cache, as the package caches
// are (cacheOverlays). The host's copy of what the program extracts there is used as it is;
// what a box extracts or writes there is kept for the later boxes of ws, and for nothing
// else (docs/profiles.md).
func (d *Daemon) programCaches(id, ws, home string, rels []string, facts plan.WorkspaceFacts, c *plan.Contributions) error {
	if len(rels) == 0 {
		return nil
	}
	caches := make([]packageCache, 0, len(rels))
	for _, rel := range rels {
		caches = append(caches, packageCache{name: programCacheLayer(rel), rel: rel, dir: filepath.Join(home, rel)})
	}
	cache, err := makeBoxCache(d.stateDir, ws)
	if err != nil {
		return err
	}
	return cacheOverlays(cache, id, caches, nil, facts, d.volatile, c)
}

// programCacheLayer names the box cache's layers of a program's cache rel (relative to the
// home): "home-" and the first 8 bytes of its SHA-256, in hex, and its name.
func programCacheLayer(rel string) string {
	sum := sha256.Sum256([]byte(rel))
	return "home-" + hex.EncodeToString(sum[:8]) + "-" + filepath.Base(rel)
}

// isPackageCache reports whether p is one of packageCaches' folders under home.
func isPackageCache(home, p string) bool {
	return slices.ContainsFunc(packageCaches, func(pc packageCache) bool { return p == filepath.Join(home, pc.rel) })
}

// cacheOverlays adds to c, for each of caches, the folder at its place in the box: an
// overlay of the host's folder (read, never written) under the box cache's layer for it
// (<cache>/<name>/upper, where every write of the box goes; its work folder is launch id's
// own, launchWorkDir), or, when the host has no such
// folder (or one the workspace rules keep out of a box), the box cache's layer alone. The
// layers are made beneath cache without following a symlink a box may have planted there.
// roots are the toolchain folders bound read-only; one beneath a cache's folder (~/.cargo/bin)
// is a mount point in its overlay, which a layer must not turn into a file. The overlays of
// caches (every one but a dependency folder's) are volatile where vol's record of the box cache
// allows it (volatileCaches.note); a nil vol makes none volatile.
func cacheOverlays(cache, id string, caches []packageCache, roots []string, facts plan.WorkspaceFacts, vol *volatileCaches, c *plan.Contributions) error {
	root, err := os.OpenRoot(cache)
	if err != nil {
		return err
	}
	defer root.Close()
	works := launchWorkDir(id)
	for _, d := range []string{boxWorkDir, works} {
		if st, err := root.Lstat(d); err == nil && !st.IsDir() {
			if err := root.Remove(d); err != nil {
				return fmt.Errorf("overlay work folder: %w", err)
			}
		}
		if err := root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("overlay work folder: %w", err)
		}
	}
	for _, pc := range caches {
		host := pc.dir
		upper, work := filepath.Join(pc.name, "upper"), filepath.Join(works, pc.name)
		layers := []string{pc.name, upper, work}
		lower, made := host, 3
		if pc.lower != "" {
			rel, err := filepath.Rel(cache, host)
			if err != nil || !filepath.IsLocal(rel) {
				return fmt.Errorf("%s layer: %s is not in the box cache", pc.name, host)
			}
			lower, made = pc.lower, 4
			layers = append(layers, rel)
		}
		for _, r := range roots {
			if rel, err := filepath.Rel(host, r); err == nil && plan.Within(r, host) {
				for p := filepath.Dir(rel); p != "."; p = filepath.Dir(p) {
					layers = append(layers, filepath.Join(upper, p))
				}
				layers = append(layers, filepath.Join(upper, rel))
			}
		}
		for i, d := range layers {
			// What a box left where a layer belongs (a symlink out of the box cache, a file;
			// in the upper layer, a file or whiteout over a mount point) is removed, never
			// followed.
			if st, err := root.Lstat(d); err == nil && !st.IsDir() {
				if err := root.Remove(d); err != nil {
					return fmt.Errorf("%s layer: %w", pc.name, err)
				}
			}
			if i >= made {
				continue // beneath the upper layer, only what stands in a mount point's way
			}
			if err := root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s layer: %w", pc.name, err)
			}
		}
		m := plan.Mount{Kind: plan.MountBind, Source: filepath.Join(cache, upper), Target: host, Beneath: cache}
		if isPlainDir(lower) && (pc.lower != "" || plan.CheckWorkspace(host, facts) == nil) {
			m = plan.Mount{Kind: plan.MountOverlay, Source: lower, Upper: filepath.Join(cache, upper), Work: filepath.Join(cache, work),
				Target: host, Beneath: cache, Optional: pc.workspace == "", LowerFallback: pc.lowerFallback, SourceBeneath: pc.workspace}
			if pc.workspace == "" {
				// A cache, whose content can be rebuilt; never a dependency folder's layer,
				// whose content the user keeps.
				if m.Volatile, err = vol.note(cache); err != nil {
					return err
				}
			}
		}
		c.Mounts = append(c.Mounts, m)
		c.ReadWrite = append(c.ReadWrite, host)
		for _, f := range pc.masks {
			c.Mounts = append(c.Mounts, plan.Mount{Kind: plan.MountMask, Target: filepath.Join(host, f), Optional: true})
		}
	}
	return nil
}

// boxWorkDir is the folder of a box cache that holds each launch's overlay work folders,
// <box cache>/work/<launch id>/<layer name> (launchWorkDir). The boxes of a workspace share
// its upper layers, never a work folder: the kernel empties an overlay's work folder when it
// mounts one (it removes and makes again the work/ folder inside), so a box starting beside
// another removed the work folder under the other's overlays, whose next copy-up, rename or
// removal of a host file failed (EPERM, ENOENT), and two boxes starting at once could fail to
// mount their overlays at all (ENOENT, EINVAL).
const boxWorkDir = "work"

// launchWorkDir is launch id's folder of overlay work folders, relative to its box cache.
func launchWorkDir(id string) string { return filepath.Join(boxWorkDir, id) }

// removeLaunchWork removes launch id's overlay work folders from the box cache cache, once
// its box has ended (or never started). The kernel's work/ folder inside each is mode 0, and a
// box could leave more such folders there: each folder is made writable first. Nothing is
// followed out of the box cache (os.Root).
func removeLaunchWork(cache, id string) error {
	root, err := os.OpenRoot(cache)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	dir := launchWorkDir(id)
	if err := root.RemoveAll(dir); err == nil {
		return nil
	}
	openTree(root, dir)
	return root.RemoveAll(dir)
}

// removeLaunchWork removes launch id's overlay work folders from workspace ws's box cache; a
// failure is logged (the folders stay, taking a little space, and the next daemon's start
// removes them: sweepLaunchWork).
func (d *Daemon) removeLaunchWork(id, ws string) {
	if ws == "" {
		return
	}
	if err := removeLaunchWork(boxCache(d.stateDir, ws), id); err != nil {
		d.log.Warn("box cache: remove the launch's overlay work folders", "launch", id, "err", err)
	}
}

// openTree gives the owner every permission on the folder dir beneath root and on every
// folder beneath it (at most 10,000 folders), without following a symlink, so that they can
// be removed.
func openTree(root *os.Root, dir string) {
	left := 10_000
	var walk func(p string)
	walk = func(p string) {
		if left--; left < 0 {
			return
		}
		if st, err := root.Lstat(p); err != nil || !st.IsDir() {
			return
		}
		root.Chmod(p, 0o700)
		f, err := root.Open(p)
		if err != nil {
			return
		}
		es, _ := f.ReadDir(-1)
		f.Close()
		for _, e := range es {
			if e.IsDir() {
				walk(filepath.Join(p, e.Name()))
			}
		}
	}
	walk(dir)
}

// sweepLaunchWork removes, from every box cache under stateDir, the overlay work folders of
// launches that known does not report (a daemon stopped between a launch's plan and its end
// leaves them): call it once the running launches are re-adopted, before any launch starts.
func sweepLaunchWork(stateDir string, known func(id string) bool) error {
	caches, err := os.ReadDir(filepath.Join(stateDir, boxCacheDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range caches {
		cache := filepath.Join(stateDir, boxCacheDir, c.Name())
		ids, err := os.ReadDir(filepath.Join(cache, boxWorkDir))
		if err != nil {
			continue // none (a cache made before work folders were per launch), or not a folder
		}
		for _, e := range ids {
			if !known(e.Name()) {
				if err := removeLaunchWork(cache, e.Name()); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// isPlainDir reports whether p is a directory reached without a symlink.
func isPlainDir(p string) bool {
	r, err := filepath.EvalSymlinks(p)
	if err != nil || r != p {
		return false
	}
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// toolchainRoots returns, in PATH order, what each PATH entry under home brings into the box,
// each symlink-resolved (a PATH entry ~/bin -> dotfiles/bin brings dotfiles/bin; home is
// compared resolved too): the entry's parent when the entry is a bin/ or shims/ folder and
// the parent is an install prefix (toolchainPrefix: ~/.pyenv for ~/.pyenv/shims, ~/go for
// ~/go/bin, an nvm version for its bin/), passes the workspace rules and is no package cache's
// folder (~/.cargo, which the box sees as an overlay), else the entry itself when it passes
// them and exposes no project (projectFolder); entries that do not exist on the host are left
// out.
func toolchainRoots(home, path string, facts plan.WorkspaceFacts) []string {
	home = plan.ResolveExisting(home)
	var out []string
	for _, e := range filepath.SplitList(path) {
		if !filepath.IsAbs(e) {
			continue
		}
		e, err := filepath.EvalSymlinks(e)
		if err != nil || !plan.Within(e, home) {
			continue
		}
		if st, err := os.Stat(e); err != nil || !st.IsDir() {
			continue
		}
		if b := filepath.Base(e); b == "bin" || b == "shims" {
			if p := filepath.Dir(e); p != home && !isPackageCache(home, p) && toolchainPrefix(home, p) && plan.CheckWorkspace(p, facts) == nil {
				out = append(out, p)
				continue
			}
		}
		if !projectFolder(e) && plan.CheckWorkspace(e, facts) == nil {
			out = append(out, e)
		}
	}
	return out
}

// programRoot returns the install prefix to bind read-only for the launch's program prog
// (absolute, symlink-resolved; "" for none), when prog lies in a bin/ or shims/ folder whose
// parent is an install prefix that none of roots (what the PATH entries under home brought)
// holds: a pyenv shim runs $PYENV_ROOT/libexec/pyenv, which runs the version
// $PYENV_ROOT/version selects, so the shim alone, which is what plan.Build binds of a program
// outside the system folders and the workspace, failed in the box (exit 127: "libexec/pyenv:
// No such file or directory"). That happened whenever the shim's folder was not under the
// daemon's home: root's ~/.pyenv while $HOME was another folder (every test environment, a
// daemon started from such a shell), a PYENV_ROOT outside the home, a ~/.pyenv linked to
// another disk. The prefix is chosen by toolchainPrefix's rules, relative to the home it lies
// in: home, else the account's home in the password database (accountHome), else none (no
// known layout, and no .git in it or in any folder above it); it must pass the workspace
// rules with the facts of home and, when it lies in the account's home, with those of that
// home (never the home itself, a harness home, agentbox's own folders); it is never a folder
// of the system or the home itself, nor a package cache's (~/.cargo, an overlay).
func programRoot(home, prog string, roots []string, facts plan.WorkspaceFacts) string {
	if !filepath.IsAbs(prog) {
		return ""
	}
	dir := filepath.Dir(prog)
	if b := filepath.Base(dir); b != "bin" && b != "shims" {
		return ""
	}
	p := filepath.Dir(dir)
	if slices.ContainsFunc(roots, func(r string) bool { return p == r || plan.Within(p, r) }) {
		return ""
	}
	sys := facts.SystemDirs
	if sys == nil {
		sys = plan.DefaultSystemDirs
	}
	if slices.ContainsFunc(sys, func(d string) bool { return p == d || plan.Within(p, d) }) {
		return "" // the box sees it already
	}
	rhome := plan.ResolveExisting(home)
	owner := ""
	switch acct := accountHome(); {
	case p == rhome || plan.Within(rhome, p) || isPackageCache(rhome, p):
		return ""
	case plan.Within(p, rhome):
		owner = rhome
	case acct != "" && (p == acct || plan.Within(acct, p)):
		return ""
	case acct != "" && plan.Within(p, acct):
		owner = acct
		if isPackageCache(acct, p) {
			return ""
		}
		f := facts
		f.Home = acct
		if plan.CheckWorkspace(p, f.ResolveHarness()) != nil {
			return ""
		}
	}
	if owner == "" {
		// In no home: a prefix in no git work tree (toolchainPrefix looks for one only
		// beneath the home it is given).
		for d := p; d != "/"; d = filepath.Dir(d) {
			if hasEntry(d, ".git") {
				return ""
			}
		}
		owner = rhome
	}
	if !isPlainDir(p) || !toolchainPrefix(owner, p) || plan.CheckWorkspace(p, facts) != nil {
		return ""
	}
	return p
}

// accountHome returns the home directory of the daemon's user in the password database,
// symlink-resolved ("" when it cannot be read): the home its toolchains were installed in
// when $HOME names another folder.
func accountHome() string {
	u, err := user.Current()
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		return ""
	}
	return plan.ResolveExisting(u.HomeDir)
}

// toolchainLayouts are the install prefixes (home-relative, path.Match patterns) of the
// toolchain managers whose bin/ or shims/ goes on PATH. Some are git clones themselves
// (~/.pyenv, ~/.nvm), which toolchainPrefix would otherwise take for a project.
var toolchainLayouts = []string{
	"go", ".pyenv", ".pyenv/versions/*", ".rbenv", ".rbenv/versions/*", ".nodenv", ".nodenv/versions/*",
	".goenv", ".goenv/versions/*", ".nvm/versions/node/*", ".asdf", ".asdf/installs/*/*", ".volta",
	".bun", ".deno", ".rustup/toolchains/*", ".sdkman/candidates/*/*", ".dotnet", ".ghcup", ".elan",
	".juliaup", ".local/share/fnm/node-versions/*/installation", ".fnm/node-versions/*/installation",
}

// prefixDirs are folders an install prefix holds beside its bin/ (a toolchain's libraries).
var prefixDirs = []string{"lib", "lib64", "libexec", "share", "include", "pkg", "versions"}

// toolchainPrefix reports whether p, the parent of a bin/ or shims/ folder on PATH beneath
// home, may be bound into every box whole: it holds no .env file, and it is one of
// toolchainLayouts, or else it is in no git work tree (another project of the user's, whose
// scripts' bin/ is on PATH: review 17, F10, a box of another workspace read its .env) and holds
// one of prefixDirs. Otherwise only the bin/ folder is bound.
func toolchainPrefix(home, p string) bool {
	if !holdsNone(p, isEnvFile) {
		return false
	}
	if rel, err := filepath.Rel(home, p); err == nil && slices.ContainsFunc(toolchainLayouts, func(l string) bool {
		ok, _ := pathpkg.Match(l, rel)
		return ok
	}) {
		return true
	}
	for d := p; plan.Within(d, home); d = filepath.Dir(d) {
		if hasEntry(d, ".git") {
			return false
		}
	}
	return slices.ContainsFunc(prefixDirs, func(n string) bool { return hasEntry(p, n) })
}

// projectFolder reports whether dir is, or may be, a project's folder rather than a
// toolchain's: it holds .git or a .env file, or cannot be listed in full (holdsNone).
func projectFolder(dir string) bool {
	return !holdsNone(dir, func(n string) bool { return n == ".git" || isEnvFile(n) })
}

// isEnvFile reports whether name is a dotenv file's (.env, .env.local, .envrc), where
// projects keep their secrets.
func isEnvFile(name string) bool { return strings.HasPrefix(name, ".env") }

// maxFolderNames bounds how many names holdsNone reads of a folder.
const maxFolderNames = 10000

// holdsNone reports whether dir can be listed and holds no name that match reports, within
// maxFolderNames names (a larger folder counts as holding one).
func holdsNone(dir string, match func(string) bool) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(maxFolderNames + 1)
	if err != nil && !errors.Is(err, io.EOF) || len(names) > maxFolderNames {
		return false
	}
	return !slices.ContainsFunc(names, match)
}

// hasEntry reports whether dir holds name, without following it.
func hasEntry(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}

// hostModCache is the host's Go module cache: $GOMODCACHE, else the first $GOPATH entry's
// pkg/mod, else ~/go/pkg/mod (the go command's own rule; a GOMODCACHE set with `go env -w`
// is not read).
func hostModCache(home string, env []string) string {
	if mc := envValue(env, "GOMODCACHE"); filepath.IsAbs(mc) {
		return filepath.Clean(mc)
	}
	if gp := filepath.SplitList(envValue(env, "GOPATH")); len(gp) > 0 && filepath.IsAbs(gp[0]) {
		return filepath.Join(gp[0], "pkg", "mod")
	}
	return filepath.Join(home, "go", "pkg", "mod")
}

// goSettingKeys are the go command's settings that decide what it compiles and links (and so
// its build cache keys) and hold no credential: a box gets the host's, which its own home
// (without the host's go env file) would otherwise lose. GOPROXY, GOMODCACHE and GOCACHE are
// the box's own (toolchains); GOAUTH, GONOSUMDB and the like are not carried.
var goSettingKeys = []string{"CGO_ENABLED", "GOFLAGS", "GOEXPERIMENT", "GOAMD64", "GOARM64"}

// goBuildSettings returns goSettingKeys as the host's go command would see them for the
// caller: each from the caller's environment env, else from the go env file (`go env -w`:
// $GOENV, else $XDG_CONFIG_HOME/go/env, else ~/.config/go/env; GOENV=off reads none). A go
// env file in the workspace ws, or one a symlink leads into it, is not read (a box could write
// it); a key set nowhere is left unset, the go command's default.
func goBuildSettings(home, ws string, env []string) []string {
	file := map[string]string{}
	path := envValue(env, "GOENV")
	if path == "" {
		cfg := envValue(env, "XDG_CONFIG_HOME")
		if !filepath.IsAbs(cfg) {
			cfg = filepath.Join(home, ".config")
		}
		path = filepath.Join(cfg, "go", "env")
	}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.IsAbs(path) && !plan.Within(real, ws) && real != ws {
		if data, err := readSmallFile(real, 64<<10); err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
					file[k] = v
				}
			}
		}
	}
	var out []string
	for _, k := range goSettingKeys {
		if v, ok := envLookup(env, k); ok {
			out = append(out, k+"="+v)
		} else if v, ok := file[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// readSmallFile reads the regular file at path, refusing one over max bytes (and, opened
// non-blocking, never waiting on a FIFO put there).
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > max {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// envLookup returns the value of key in env and whether it is set there (the last one when
// repeated).
func envLookup(env []string, key string) (string, bool) {
	v, set := "", false
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v, set = val, true
		}
	}
	return v, set
}

// envValue returns the value of key in env (KEY=VALUE), the last one when repeated.
func envValue(env []string, key string) string {
	v, _ := envLookup(env, key)
	return v
}
