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
	if strings.Contains(name, QuarantineSuffix) {
		return nil
	}
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
}

// outermost drops from deps the folders that lie beneath another of them (a package's own
// node_modules inside node_modules): the outer one is what counts, and what is moved.
func outermost(deps map[string]DepFolder) {
	for p := range deps {
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			if _, ok := deps[d]; ok {
				delete(deps, p)
				break
			}
		}
	}
}
