package changes

import "path/filepath"

// IgnoredSuffix names, beside a kept file, the mark of a change that is a file the launch left
// in a git-ignored place of the workspace (TakeIgnored): not protected configuration, but code
// the host's tools would run (a build's output, a test file in bin/, a plugin's metadata in
// *.egg-info/) and that no git status shows. It holds nothing.
const IgnoredSuffix = ".agentbox-ignored"

// IgnoredDroppedRecord names, at the top of a store, the record of the files TakeIgnored
// removed from the workspace without keeping them, past its bounds (Dropped).
const IgnoredDroppedRecord = ".agentbox-ignored-dropped.json"

// MaxIgnoredFiles and MaxIgnoredBytes bound what TakeIgnored keeps of one launch: files, and
// the bytes of their contents together. Past either, a file is removed from the workspace and
// counted in IgnoredDroppedRecord, never left in place.
const (
	MaxIgnoredFiles = 10000
	MaxIgnoredBytes = 1 << 30
)

// Ignored is what TakeIgnored did: the paths kept as proposed changes (Kept, their bytes
// KeptBytes), and those removed from the workspace past the bounds (Dropped).
type Ignored struct {
	Kept      []string
	KeptBytes int64
	Dropped   Dropped
	// Moved are the host's own files (their ctime before the launch: taken only because a
	// folder above them was made or renamed in the launch; or born before it, by statx's
	// birth time, and changed in it: review 32) moved into the store by a rename past the
	// bounds, never removed (review 17, F3); Left those of them left in place, where no rename
	// into the store could be (another file system, or a change there already), unchanged since
	// before the launch; Renamed the new paths of those changed in it (born before the launch,
	// by statx's birth time, with one name), renamed beside themselves
	// (NAME.agentbox-kept-XXXXXXXX) where no rename into the store could be.
	Moved, Left, Renamed []string
	// Failed are the files that could be neither kept nor removed, and why: they are still
	// in the workspace, to be reported.
	Failed []Failure
}

// ReadIgnoredDropped returns what TakeIgnored removed from the workspace without keeping it
// (none when none).
func ReadIgnoredDropped(dir string) (Dropped, error) {
	return readDroppedFile(filepath.Join(dir, IgnoredDroppedRecord))
}
