package integrity

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// DepFolderKind is a folder where a package manager installs a project's dependencies, and
// that the host's own tools run code from: npm test and npx run node_modules/.bin/* and the
// packages' scripts, `source venv/bin/activate` runs the activate script and python's site
// runs the virtualenv's *.pth files at every start of its python, cargo runs a build script or
// binary under target/ whose fingerprint looks fresh. git ignores these folders, so no diff
// shows what a box left there.
type DepFolderKind struct {
	Name string // the folder's name; "" for a virtualenv of any name (VenvMarker)
	// Markers are the project files beside it, any of which makes an absent folder of this
	// name one that the project's tools would make.
	Markers []string
	// Always says that a folder of this name is one wherever it is, marker or not; target/
	// is one only beside a Cargo.toml (other tools' target/ may hold sources).
	Always bool
	// Runs says who runs what from it (for the transition that moves one aside).
	Runs string
}

// VenvMarker is the file every Python virtualenv holds at its top (python -m venv, virtualenv,
// uv venv): python reads it to find its prefix, whatever the folder's name (venv/, env/,
// .env/, .venv/).
const VenvMarker = "pyvenv.cfg"

// DepFolderKinds are the dependency folders agentbox knows (docs/toolchains.md, "Dependency
// folders are the box's own"): the launch makes those it finds the box's own, and the check at
// exit moves aside one that appeared or was replaced while the box ran.
var DepFolderKinds = []DepFolderKind{
	{"node_modules", []string{"package.json"}, true, "npm test and npx run node_modules/.bin/* and node loads the packages"},
	{".venv", []string{"pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "Pipfile"}, true, "activating it runs bin/activate, and its python runs the *.pth files of site-packages at every start"},
	{"target", []string{"Cargo.toml"}, false, "cargo run and cargo build run a build script or binary whose fingerprint looks fresh"},
	{"", nil, false, "activating it runs bin/activate, and its python runs the *.pth files of site-packages at every start"},
}

// depFolderKind returns the kind of the folder name in a folder whose entries are ents
// (dependency folders by name: node_modules, .venv, target beside a Cargo.toml), or nil.
// A virtualenv of another name is told by its own entries (IsVenv).
func depFolderKind(name string, ents []fs.DirEntry) *DepFolderKind {
	for i, k := range DepFolderKinds {
		if k.Name == "" || k.Name != name {
			continue
		}
		if k.Always || slices.ContainsFunc(ents, func(e fs.DirEntry) bool {
			return e.Type().IsRegular() && slices.Contains(k.Markers, e.Name())
		}) {
			return &DepFolderKinds[i]
		}
	}
	return nil
}

// IsVenv reports whether a folder whose entries are ents is a Python virtualenv: it holds a
// regular VenvMarker.
func IsVenv(ents []fs.DirEntry) bool {
	return slices.ContainsFunc(ents, func(e fs.DirEntry) bool { return e.Name() == VenvMarker && e.Type().IsRegular() })
}

// DepFolder is a dependency folder as the watch saw it: its identity, which a folder the host
// removed and another made in its place does not share.
type DepFolder struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Btime int64  `json:"btime,omitempty"` // its birth time (statx), 0 where the file system keeps none
	Runs  string `json:"runs"`
	// Empty says that it held nothing at the snapshot: one the box fills in place (not the
	// box's own: past the launch's bound) is moved aside at exit, so that a box's empty folder
	// can never become one with content that outranks the host's (review 14, F4).
	Empty bool `json:"empty,omitempty"`
}

// pthRuns is the Runs of a python path configuration file (*.pth) in a site-packages folder,
// which the scan records besides the dependency folders (a file, never beneath another).
const pthRuns = "python's site runs its import lines at every start of the python whose prefix holds it"

// venvLayout returns the top of the virtualenv that dir, a site-packages folder at a
// virtualenv's layout (TOP/lib/python3.X/site-packages, lib64, pypy3.X), would belong to, or
// "". A folder of that layout is a virtualenv to python once a pyvenv.cfg is put beside lib:
// python -m venv over an existing folder keeps what site-packages holds, and its python runs
// the *.pth there from its first start (review 14, F6).
func venvLayout(dir string) string {
	if filepath.Base(dir) != "site-packages" {
		return ""
	}
	ver := filepath.Dir(dir)
	lib := filepath.Dir(ver)
	if v := filepath.Base(ver); !strings.HasPrefix(v, "python") && !strings.HasPrefix(v, "pypy") {
		return ""
	}
	if b := filepath.Base(lib); b != "lib" && b != "lib64" {
		return ""
	}
	return filepath.Dir(lib)
}

// sitePackages records in deps, when dir (entries ents) is a site-packages folder, the
// *.pth files in it and, when it lies at a virtualenv's layout (venvLayout), the top of that
// virtualenv as a dependency folder, whether it holds a pyvenv.cfg or not.
func sitePackages(ws, dir string, ents []fs.DirEntry, deps map[string]DepFolder) {
	if filepath.Base(dir) != "site-packages" {
		return
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pth") && !e.IsDir() {
			deps[filepath.Join(dir, e.Name())] = DepFolder{Runs: pthRuns}
		}
	}
	if top := venvLayout(dir); top != "" && top != ws && within(top, ws) {
		deps[top] = DepFolder{Runs: DepFolderKinds[len(DepFolderKinds)-1].Runs}
	}
}

// outermost drops from deps the folders that lie beneath another of them (a package's own
// node_modules inside node_modules): the outer one is what counts, and what is moved. A *.pth
// file is kept: one new in the host's virtualenv is moved aside on its own.
func outermost(deps map[string]DepFolder) {
	for p, f := range deps {
		if f.Runs == pthRuns {
			continue
		}
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			if _, ok := deps[d]; ok {
				delete(deps, p)
				break
			}
		}
	}
}
