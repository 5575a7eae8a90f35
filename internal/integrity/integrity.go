// Package integrity protects and watches a launch's executable configuration: it resolves the
// protected paths of a workspace (and the placeholders absent ones need while a box runs),
// snapshots the integrity roots before the box spawns (content hash plus file identity), and
// verifies them while the box runs and at its exit, reporting every transition (modified,
// replaced, created, removed) and any new executable git configuration in the workspace.
// It is alert-first: nothing is restored or blocked by the watch, except that executable git
// configuration and hooks that appear or change outside the pinned paths are moved aside
// (GitSurfaceFiles, GitProgramKeys).
package integrity

import (
	"errors"
	"path/filepath"
	"strconv"
	"time"
)

// Kind names an integrity transition.
type Kind string

const (
	// Modified: the content (or, for a folder, an entry's content or identity) changed.
	Modified Kind = "modified"
	// Replaced: the content is equal but the file is another one (new device or inode), such
	// as a same-bytes replacement by rename.
	Replaced Kind = "replaced"
	// Created: the path did not exist (or the finding was not there) and now does.
	Created Kind = "created"
	// Removed: the path existed and now does not.
	Removed Kind = "removed"
)

// Transition is one change of an integrity root or of the workspace's executable
// configuration, relative to what the watch saw last.
type Transition struct {
	Kind Kind   `json:"kind"`
	Path string `json:"path"`
	// Detail says what changed ("content", "identity", the entries of a folder, the executable
	// git configuration found).
	Detail string `json:"detail,omitempty"`
	// Alert is false for paths that are watched but not pinned (HEAD, which git must move):
	// the transition is recorded, but it does not raise the launch's drift flag.
	Alert bool `json:"alert"`
}

// Source says what triggered a verification.
type Source string

const (
	SourceSnapshot Source = "snapshot"
	SourcePeriodic Source = "periodic"
	SourceInotify  Source = "inotify"
	SourceExit     Source = "exit"
)

// Limits bound a snapshot. The zero value means the defaults.
type Limits struct {
	// MaxDepth is how deep a folder root is walked; deeper entries make the root "too-large"
	// (recorded by structure down to the bound). Zero means 16.
	MaxDepth int `json:"maxDepth,omitempty"`
	// MaxEntries is the number of entries a folder root may hold before it is "too-large".
	// Zero means 10000.
	MaxEntries int `json:"maxEntries,omitempty"`
	// MaxBytes is the content budget of one folder root: over it, the folder is recorded by
	// structure (names, kinds, sizes, identities) without content hashes. Zero means 8 MiB.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// MaxFileBytes bounds the bytes hashed of one file (a longer file is hashed up to it, and
	// its size and identity still count). Zero means 4 MiB.
	MaxFileBytes int64 `json:"maxFileBytes,omitempty"`
	// ScanDirs bounds the directories the executable-configuration scan of the workspace
	// visits (a bound reached is reported as drift by the check at exit). Zero means 200000.
	ScanDirs int `json:"scanDirs,omitempty"`
	// DepEntries bounds the entries the check at exit looks at in the dependency folders that
	// were there at launch (State.VerifyExit: one changed while the box ran is moved aside);
	// past it the rest are reported as not checked. Zero means 1000000.
	DepEntries int `json:"depEntries,omitempty"`
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 16
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 10000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 8 << 20
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 4 << 20
	}
	if l.ScanDirs <= 0 {
		l.ScanDirs = 200000
	}
	if l.DepEntries <= 0 {
		l.DepEntries = 1000000
	}
	return l
}

// DefaultInterval is how often a running box's roots are verified when the configuration
// does not say (integrity.interval).
const DefaultInterval = 60 * time.Second

// ErrNotSupported is returned on platforms without the Linux mechanisms this package uses.
var ErrNotSupported = errors.New("integrity: not supported on this platform")

// AsidePath is where the n-th file of path's name moved aside in its folder lies
// (PATH.agentbox-quarantined-N), and AsideDirPath the n-th folder
// (FOLDER/.agentbox-quarantined-N/NAME): atomicfile.RenameAside.
func AsidePath(path string, n int) string { return path + QuarantineSuffix + strconv.Itoa(n) }

// AsideDirPath: see AsidePath.
func AsideDirPath(path string, n int) string {
	return filepath.Join(filepath.Dir(path), QuarantineSuffix+strconv.Itoa(n), filepath.Base(path))
}
