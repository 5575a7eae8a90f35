package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// bytecodeDir is the folder of the daemon's runtime directory holding the bytecode mirrors,
// one folder per generation (bytecodeMirror). No box sees it but as an overlay's lower layer.
// The runtime directory is a tmpfs on most systems ($XDG_RUNTIME_DIR): the 2,200 links of a
// Debian system took 17-19 ms to make there, against about 1 s on a loaded machine's disk
// (BenchmarkBytecodeMirror); it is made again after a reboot.
const bytecodeDir = "bytecode"

// maxMirrored bounds the files a mirror links (a system with more bytecode gets the rest
// compiled in the box cache, as before).
const maxMirrored = 50_000

// bytecodeMirror returns the mirror of the bytecode in libs (absolute folders) under dir
// (the daemon's runtime directory), made when missing: <dir>/bytecode/<generation>, the
// generation named by
// the libraries' paths and modification times (a package installed or removed there makes a
// new one; a file replaced in place needs none: the link follows it). A new generation is
// made beside the others and renamed into place, then the others are removed. "" and nil
// when libs hold no bytecode.
func bytecodeMirror(runtimeDir string, libs []string) (string, error) {
	if len(libs) == 0 {
		return "", nil
	}
	h := sha256.New()
	for _, l := range libs {
		st, err := os.Stat(l)
		if err != nil {
			continue
		}
		fmt.Fprintf(h, "%s %d\n", l, st.ModTime().UnixNano())
	}
	base := filepath.Join(runtimeDir, bytecodeDir)
	gen := hex.EncodeToString(h.Sum(nil)[:8])
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
	n, err := linkBytecode(tmp, libs)
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
	// The earlier generations: a box that still reads one finds its links gone and compiles
	// those modules into its layer.
	if es, err := os.ReadDir(base); err == nil {
		for _, e := range es {
			if e.Name() != gen && !strings.HasPrefix(e.Name(), ".new-") {
				os.RemoveAll(filepath.Join(base, e.Name()))
			}
		}
	}
	return dir, nil
}

// isDir reports whether p is a folder (not through a symlink).
func isDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}

// linkBytecode makes in dst, for each regular *.pyc file of a __pycache__ folder beneath
// libs, a symlink to it at the path python's PYTHONPYCACHEPREFIX layout gives it (the
// source's folder, without __pycache__, beneath dst), and returns how many it made (at most
// maxMirrored). Symlinks in libs are not followed.
func linkBytecode(dst string, libs []string) (int, error) {
	n := 0
	made := map[string]bool{}
	for _, lib := range libs {
		err := filepath.WalkDir(lib, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // an unreadable folder: its modules are compiled in the box
			}
			if n >= maxMirrored {
				return filepath.SkipAll
			}
			if !d.Type().IsRegular() || !strings.HasSuffix(p, ".pyc") || filepath.Base(filepath.Dir(p)) != "__pycache__" {
				return nil
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

// systemBytecode returns the mirror of the system's bytecode (bytecodeMirror), "" when there
// is none; a mirror that cannot be made is logged, and the box compiles what it imports.
func (d *Daemon) systemBytecode() string {
	d.bytecodeMu.Lock()
	defer d.bytecodeMu.Unlock()
	dir, err := bytecodeMirror(d.runtimeDir, d.pythonLibs)
	if err != nil {
		d.log.Warn("python: the mirror of the system's bytecode is not made; boxes compile what they import", "err", err)
	}
	return dir
}
