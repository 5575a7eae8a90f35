package daemon

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// A box's python keeps its bytecode in the box cache (PYTHONPYCACHEPREFIX, toolchains), never
// beside the workspace's sources, where the host's python would import it. With a prefix,
// python reads bytecode from the prefix only, so a workspace's first python in a box compiled
// every module it imported, the standard library's and pip's included: `pip download` against
// a refused host took 5-11 s under load, of which the refusal itself took milliseconds. The
// system's own bytecode (what Debian compiled into each __pycache__ when it installed the
// package) is therefore the lower layer of the box's prefix: a folder of the daemon's runtime
// directory that mirrors the system's __pycache__ files at the prefix's layout
// (<prefix>/usr/lib/python3.11/json/decoder.cpython-311.pyc for
// /usr/lib/python3.11/json/__pycache__/decoder.cpython-311.pyc), as symlinks to them. The box
// sees the system's folders read-only, so it follows them to what the host's python itself
// loads; it writes what it compiles to the workspace's layer above, never to the mirror.
// python checks each file's header against its source (mtime and size) as it would beside
// the source: a stale or missing one is compiled again, into the layer.

// systemPythonGlobs are the system's Python library folders whose bytecode a box's python
// reads (bytecodeMirror): outside the home, written by the package manager only.
var systemPythonGlobs = []string{"/usr/lib/python3*", "/usr/local/lib/python3*"}

// systemPythonLibs returns the folders systemPythonGlobs match that are folders reached
// without a symlink, sorted.
func systemPythonLibs() []string {
	var out []string
	for _, g := range systemPythonGlobs {
		ms, _ := filepath.Glob(g)
		for _, m := range ms {
			if isPlainDir(m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// A Python of the user's toolchains (pyenv's, under the home) has its standard library's
// bytecode beside its sources too (python-build compiles it when it installs a version), and
// the box's prefix hid it as it hid the system's: its first run in each workspace compiled the
// standard library again. The versions a launch's python selects (pyenvVersions) are mirrored
// with the system's, in one mirror per set of libraries: each link leads to a file the box
// sees read-only, since a toolchain folder is bound read-only at its own path and a library
// inside or around the workspace is not mirrored.

// maxToolchainPythons bounds the toolchain Pythons mirrored for a launch.
const maxToolchainPythons = 8

// toolchainPythonLibs returns the Python library folders (lib/python3*) beneath roots (the
// toolchain folders a launch binds read-only: toolchains) whose bytecode its box's python
// reads: a root that is itself a Python's prefix (~/.pyenv/versions/3.11.7 for its bin/ on
// PATH, any prefix/bin on PATH), and, in a root holding pyenv's versions/ (~/.pyenv, for
// ~/.pyenv/shims or ~/.pyenv/bin on PATH), the versions pyenv selects for the launch
// (pyenvVersions): not every installed one, since a pyenv of nine versions holds 55,000
// bytecode files. Each is a folder reached without a symlink, neither inside nor around the
// workspace ws (which the box writes), at most maxToolchainPythons; sorted.
func toolchainPythonLibs(roots []string, ws, cwd string, env []string) []string {
	var prefixes []string
	for _, r := range roots {
		prefixes = append(prefixes, r)
		if isPlainDir(filepath.Join(r, "versions")) {
			for _, v := range pyenvVersions(r, ws, cwd, env) {
				prefixes = append(prefixes, filepath.Join(r, "versions", v))
			}
		}
	}
	var out []string
	for _, p := range prefixes {
		ms, _ := filepath.Glob(filepath.Join(p, "lib", "python3*"))
		for _, m := range ms {
			if len(out) >= maxToolchainPythons {
				break
			}
			if !slices.Contains(out, m) && isPlainDir(m) && m != ws && !plan.Within(m, ws) && !plan.Within(ws, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// maxVersionFile bounds the .python-version and version files read (pyenvVersions).
const maxVersionFile = 4096

// pyenvVersions returns the names of the versions of the pyenv root r that pyenv selects for a
// launch started in cwd in workspace ws, by pyenv's own order: $PYENV_VERSION (names separated
// by ':'), else the first .python-version file in cwd or a folder above it (names separated
// by white space, '#' lines left out), else r/version. Only names of folders in r/versions are
// kept ("system" and a prefix such as "3.11" name none: their bytecode is compiled in the box
// as before). The files are read without following a symlink at their name, nor waiting on a
// FIFO, nor beyond 4 KiB: a box may have written a .python-version in the workspace. A box
// choosing a version chooses only which of the host's read-only Pythons is mirrored.
func pyenvVersions(r, ws, cwd string, env []string) []string {
	var names []string
	if v := envValue(env, "PYENV_VERSION"); v != "" {
		names = strings.Split(v, ":")
	} else {
		from := filepath.Join(r, "version")
		if cwd != "" && (cwd == ws || plan.Within(cwd, ws)) {
			for d := filepath.Clean(cwd); ; d = filepath.Dir(d) {
				if st, err := os.Lstat(filepath.Join(d, ".python-version")); err == nil && !st.IsDir() {
					from = filepath.Join(d, ".python-version")
					break
				}
				if d == "/" {
					break
				}
			}
		}
		b, _ := integrity.ReadRegular(from, maxVersionFile)
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); !strings.HasPrefix(l, "#") {
				names = append(names, strings.Fields(l)...)
			}
		}
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') || slices.Contains(out, n) {
			continue
		}
		if isPlainDir(filepath.Join(r, "versions", n)) {
			out = append(out, n)
		}
		if len(out) == maxToolchainPythons {
			break
		}
	}
	return out
}

// bytecodeDir is the folder of the daemon's runtime directory holding the bytecode mirrors,
// one folder per set of libraries and generation (bytecodeMirror). No box sees it but as an overlay's lower layer.
// The runtime directory is a tmpfs on most systems ($XDG_RUNTIME_DIR): the 2,200 links of a
// Debian system took 17-19 ms to make there, against about 1 s on a loaded machine's disk
// (BenchmarkBytecodeMirror); it is made again after a reboot.
const bytecodeDir = "bytecode"

// maxMirrored bounds the files a mirror links (a system with more bytecode gets the rest
// compiled in the box cache, as before).
const maxMirrored = 50_000

// maxBytecodeSets bounds the mirrors kept, one per set of libraries (bytecodeMirror): past it
// the oldest made goes.
const maxBytecodeSets = 8

// bytecodeMirror returns the mirror of the bytecode in libs (absolute folders) under dir
// (the daemon's runtime directory), made when missing: <dir>/bytecode/<set>-<generation>, the
// set named by the libraries' paths (the system's, and the toolchain Pythons a launch
// selects: launches of other selections have mirrors of their own, at most maxBytecodeSets),
// the generation by their modification times and those of their site-packages and
// dist-packages (a package installed or removed there makes a new one; a file replaced in
// place needs none: the link follows it). A new generation is made beside the others and
// renamed into place, then the set's other generations are removed. "" and nil when libs hold
// no bytecode.
func bytecodeMirror(ctx context.Context, runtimeDir string, libs []string) (string, error) {
	if len(libs) == 0 {
		return "", nil
	}
	base, set, gen := bytecodeNames(runtimeDir, libs)
	dir := filepath.Join(base, gen)
	if st, err := os.Lstat(dir); err == nil && st.IsDir() {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, ".new-")
	if err != nil {
		return "", err
	}
	n, err := linkBytecode(ctx, tmp, libs)
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err == nil && n > 0 {
		err = os.Rename(tmp, dir)
		if errors.Is(err, fs.ErrExist) || errors.Is(err, os.ErrExist) {
			err = nil // another daemon of this user made it meanwhile
		}
	}
	if err != nil || n == 0 {
		os.RemoveAll(tmp)
		if err != nil && !isDir(dir) {
			return "", err
		}
		if n == 0 {
			return "", nil
		}
	}
	// The set's earlier generations, and the oldest sets past maxBytecodeSets: a box that
	// still reads one finds its links gone and compiles those modules into its layer.
	if es, err := os.ReadDir(base); err == nil {
		type made struct {
			name string
			at   int64
		}
		var others []made
		for _, e := range es {
			switch n := e.Name(); {
			case n == gen || strings.HasPrefix(n, ".new-"):
			case strings.HasPrefix(n, set+"-") || !strings.Contains(n, "-"): // one of an earlier agentbox: a generation alone
				os.RemoveAll(filepath.Join(base, n))
			default:
				if st, err := e.Info(); err == nil {
					others = append(others, made{n, st.ModTime().UnixNano()})
				}
			}
		}
		slices.SortFunc(others, func(a, b made) int { return cmp.Compare(a.at, b.at) })
		for len(others) > maxBytecodeSets-1 {
			os.RemoveAll(filepath.Join(base, others[0].name))
			others = others[1:]
		}
	}
	return dir, nil
}

// bytecodeNames returns the folder of the bytecode mirrors under runtimeDir, and the names of
// libs' set and of its current generation (bytecodeMirror).
func bytecodeNames(runtimeDir string, libs []string) (base, set, gen string) {
	hs, h := sha256.New(), sha256.New()
	for _, l := range libs {
		fmt.Fprintf(hs, "%s\n", l)
		for _, p := range []string{l, filepath.Join(l, "site-packages"), filepath.Join(l, "dist-packages")} {
			if st, err := os.Stat(p); err == nil {
				fmt.Fprintf(h, "%s %d\n", p, st.ModTime().UnixNano())
			}
		}
	}
	set = hex.EncodeToString(hs.Sum(nil)[:8])
	return filepath.Join(runtimeDir, bytecodeDir), set, set + "-" + hex.EncodeToString(h.Sum(nil)[:8])
}

// isDir reports whether p is a folder (not through a symlink).
func isDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}

// linkBytecode makes in dst, for each regular *.pyc file of a __pycache__ folder beneath
// libs (not the .opt-1 and .opt-2 ones of python -O and -OO), a symlink to it at the path
// python's PYTHONPYCACHEPREFIX layout gives it (the source's folder, without __pycache__,
// beneath dst), and returns how many it made (at most maxMirrored). Symlinks in libs are not
// followed. It stops with ctx's error when ctx ends (the daemon stops).
func linkBytecode(ctx context.Context, dst string, libs []string) (int, error) {
	n, seen := 0, 0
	made := map[string]bool{}
	for _, lib := range libs {
		err := filepath.WalkDir(lib, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // an unreadable folder: its modules are compiled in the box
			}
			if n >= maxMirrored {
				return filepath.SkipAll
			}
			// Every 256 entries walked, not links made: a walk through a tree of sources made
			// no link for thousands of entries, and a stopping daemon waited for it, holding its
			// lock (TestEndAnsweredBeforeCommitSurvivesDaemonEnd: the next daemon could not start).
			if seen++; seen%256 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if !d.Type().IsRegular() || !strings.HasSuffix(p, ".pyc") || filepath.Base(filepath.Dir(p)) != "__pycache__" {
				return nil
			}
			if strings.Contains(d.Name(), ".opt-") {
				return nil // python -O's and -OO's (python-build compiles all three): rare, compiled in the box
			}
			src := filepath.Dir(filepath.Dir(p)) // the source's folder
			to := filepath.Join(dst, strings.TrimPrefix(src, "/"))
			if !made[to] {
				if err := os.MkdirAll(to, 0o755); err != nil {
					return err
				}
				made[to] = true
			}
			if err := os.Symlink(p, filepath.Join(to, d.Name())); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Making a mirror took 1.6 s for the system's Python alone and 16-17 s with a pyenv Python on
// a loaded machine (docs/benchmarks.md), and it was made on the launch's path: the first launch
// after a boot, or after a package install in a selected Python's site-packages, waited for
// it. It is made in the background now (buildBytecode): a launch whose generation is missing
// waits for it at most bytecodeWait, then starts without it, its python compiling what it
// imports into the workspace's layer as before the mirror existed; a later launch finds it.
// The system's own mirror is started when the daemon starts (startBytecode), so the first
// launch after a boot usually finds it. A launch is not given the set's earlier generation:
// the build that makes the new one removes it, possibly between the launch's plan and its
// box's mount of it.

// bytecodeWait bounds how long a launch waits for its mirror being made (pythonBytecode).
var bytecodeWait = 200 * time.Millisecond

// pythonBytecode returns the mirror of the bytecode of the system's Python libraries and of
// toolchain, the library folders of the toolchain Pythons a launch selects
// (toolchainPythonLibs; bytecodeMirror), "" when there is none or it is not made within
// bytecodeWait (it is being made in the background: buildBytecode).
func (d *Daemon) pythonBytecode(toolchain []string) string {
	libs := append(slices.Clone(d.pythonLibs), toolchain...)
	if len(libs) == 0 {
		return ""
	}
	base, set, gen := bytecodeNames(d.runtimeDir, libs)
	dir := filepath.Join(base, gen)
	if isDir(dir) {
		return dir
	}
	t := time.NewTimer(bytecodeWait)
	defer t.Stop()
	select {
	case <-d.buildBytecode(set, libs):
		if isDir(dir) {
			return dir
		}
	case <-t.C:
		d.log.Info("python: the bytecode mirror is being made; this box compiles what it imports", "mirror", dir)
	}
	return ""
}

// startBytecode starts making the mirror of the system's Python libraries when it is missing
// (the daemon's start: the first launch after a boot then usually finds it).
func (d *Daemon) startBytecode() {
	if len(d.pythonLibs) == 0 {
		return
	}
	base, set, gen := bytecodeNames(d.runtimeDir, d.pythonLibs)
	if !isDir(filepath.Join(base, gen)) {
		d.buildBytecode(set, slices.Clone(d.pythonLibs))
	}
}

// buildBytecode makes the mirror of libs, of the set named set, in the background, one build
// per set at a time: a build of the set already under way is not started again. The channel
// it returns is closed when the build ends. bytecodeMu serializes the builds of this daemon;
// bytecodeMirror's rename into place keeps those of two daemons of one user correct. The
// daemon's serve waits for the builds when it stops (bytecodeWG); its end stops them.
func (d *Daemon) buildBytecode(set string, libs []string) <-chan struct{} {
	d.bytecodeBuildsMu.Lock()
	defer d.bytecodeBuildsMu.Unlock()
	if ch, ok := d.bytecodeBuilds[set]; ok {
		return ch
	}
	if d.bytecodeBuilds == nil {
		d.bytecodeBuilds = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	d.bytecodeBuilds[set] = ch
	ctx := d.bytecodeCtx
	if ctx == nil {
		ctx = context.Background()
	}
	d.bytecodeWG.Add(1)
	go func() {
		defer d.bytecodeWG.Done()
		defer func() {
			d.bytecodeBuildsMu.Lock()
			delete(d.bytecodeBuilds, set)
			d.bytecodeBuildsMu.Unlock()
			close(ch)
		}()
		if d.opts.beforeBytecode != nil {
			d.opts.beforeBytecode(libs)
		}
		d.bytecodeMu.Lock()
		defer d.bytecodeMu.Unlock()
		start := time.Now()
		dir, err := bytecodeMirror(ctx, d.runtimeDir, libs)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("python: the mirror of the system's and toolchains' bytecode is not made; boxes compile what they import", "err", err)
			}
			return
		}
		d.log.Debug("python: bytecode mirror made", "mirror", dir, "took", time.Since(start))
	}()
	return ch
}
