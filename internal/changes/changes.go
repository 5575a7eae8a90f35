// Package changes keeps a launch's proposed changes: what its box created at an absent
// protected path of the workspace (an MCP server file, a VS Code setting, a git hook), moved out
// of the workspace the moment it appeared so that it never reaches the host unreviewed, and
// kept until the user applies or discards it (docs/integrity.md, "Proposed changes").
//
// A store is a directory holding each change at its workspace-relative path: a file with the
// box's content, a symlink with the box's target. Nothing in it is ever executed.
package changes

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// MaxFile is the largest file kept as a proposed change: a larger file a box created at a
// guarded path is kept truncated to it and marked so (Change.Truncated), and cannot be
// applied; a staged copy the box made larger is not kept at all (Collected.TooLarge).
const MaxFile = 4 << 20

// TruncatedSuffix marks, beside a kept file, that it was cut at MaxFile; beside a staged copy,
// that the box filled it to MaxFile (its bound while the box runs) and what it wrote beyond was
// refused.
const TruncatedSuffix = ".agentbox-truncated"

// AddedRecord names, at the top of a store, the record of the paths guarded after the launch
// started (Guard.Add, Added). It is no change: List skips it and Apply refuses it. No protected
// path has that name.
const AddedRecord = ".agentbox-guarded.json"

// DroppedRecord names, at the top of a store, the record of what its guard moved out of the
// workspace and did not keep, the store being full (MaxChanges, MaxStore; Dropped). It is no
// change.
const DroppedRecord = ".agentbox-dropped.json"

// MaxChanges bounds the changes a launch's store keeps, and MaxStore the bytes of their files
// together: past either, what the box creates at a guarded path is still moved out of the
// workspace, and recorded as dropped (Dropped) instead of kept; a file that fits only in part
// is kept truncated (it cannot be applied).
const (
	MaxChanges = 256
	MaxStore   = 16 << 20
)

// HiddenSuffix marks, beside a kept file and its base, a change that is a tracked file whose
// change the host's git views did not show (TakeHidden): the host's file was put back, and
// applying the change makes the file the box's again. It holds nothing.
const HiddenSuffix = ".agentbox-hidden"

// baseSuffix names, beside a kept file, the content the path had when the launch started: the
// change modifies an existing protected file (its staged copy, see Stage).
const baseSuffix = ".agentbox-base"

// Collected is what Collect did with a launch's staged copies; each list holds
// workspace-relative paths in lexical order.
type Collected struct {
	// Kept are the paths kept as proposed changes.
	Kept []string
	// TooLarge are the paths whose copy the box made larger than MaxFile: not kept (the
	// host's file is untouched), to be reported. (An engine that bounds the copies while the
	// box runs leaves none: see Truncated.)
	TooLarge []string
	// Truncated are the paths, among Kept, whose copy the box filled to MaxFile while it ran
	// (its writes beyond were refused): kept truncated, never to be applied, to be reported.
	Truncated []string
	// Failed are the copies that could not be collected; they are left where Stage made them.
	Failed []Failure
}

// Failure is a staged copy Collect could not collect, and why.
type Failure struct {
	Path string
	Err  error
}

// Errors of Apply.
var (
	// ErrConflict: the host has something at the path now (made while or after the box ran);
	// it is never overwritten.
	ErrConflict = errors.New("the host changed the path meanwhile")
	// ErrUnknown: the launch proposed no change at that path.
	ErrUnknown = errors.New("no proposed change at that path")
	// ErrHardLinked: a protected file has more than one name (a hard link). Neither a staged
	// copy nor a read-only bind covers the other name, which the box may write: the launch is
	// refused until the user breaks the link (Stage).
	ErrHardLinked = errors.New("a protected file has another name (a hard link)")
	// ErrStoreHolds: the store holds a change at the path already; TakeHidden neither
	// replaces it nor puts the host's file back.
	ErrStoreHolds = errors.New("the launch's proposed changes hold a change at that path already")
)

// Kinds of a change.
const (
	KindFile    = "file"
	KindSymlink = "symlink"
)

// Change is one proposed change: the box created Path (workspace-relative), which was absent
// when the launch started, or (Modifies) changed the protected file that was there.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Content is the file's content, or the symlink's target.
	Content []byte `json:"content"`
	// Mode is a file's permission bits as the box left them.
	Mode os.FileMode `json:"mode,omitempty"`
	// Size is a file's size in the store (Index), Content's length once read (Read).
	Size int64 `json:"size,omitempty"`
	// Truncated says the file was larger than its bound (MaxFile, or what was left of the
	// store's, MaxStore) and Content holds its start only.
	Truncated bool `json:"truncated,omitempty"`
	// Modifies says Path was a protected file when the launch started, which the box changed
	// in its staged copy; Base is what it held then. Applying it needs the host's file to
	// hold Base still.
	Modifies bool   `json:"modifies,omitempty"`
	Base     []byte `json:"base,omitempty"`
	// ModeChanged says the box changed the file's executable bits (Modifies only).
	ModeChanged bool `json:"modeChanged,omitempty"`
	// Ignored says the launch left the file in a git-ignored place of the workspace, from
	// which it was moved here at exit (TakeIgnored): a path the host had nothing at then.
	Ignored bool `json:"ignored,omitempty"`
	// SHA256 is, for an Ignored file, the SHA-256 (hex) of the whole file as it was kept
	// (its mark's content): Apply puts it back only while the store's file has it.
	SHA256 string `json:"sha256,omitempty"`
	// Hidden says (with Modifies) the path is a tracked file whose change the host's git
	// views did not show, put back at exit (TakeHidden); not protected configuration.
	Hidden bool `json:"hidden,omitempty"`
}

// List returns the changes kept in dir with their content (Index, then Read for each), sorted
// by path; an absent dir holds none. A store is bounded (MaxChanges, MaxStore), and so is what
// List holds in memory; a caller that renders the changes one by one uses Index and Read.
func List(dir string) ([]Change, error) {
	cs, err := Index(dir)
	if err != nil {
		return nil, err
	}
	for i := range cs {
		if err := Read(dir, &cs[i]); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// Index returns the changes kept in dir, sorted by path, without their content (Change.Size
// says how large a file is; Read fills in Content and Base); an absent dir holds none.
func Index(dir string) ([]Change, error) {
	var out []Change
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() || isMetadata(d.Name()) || p == filepath.Join(dir, AddedRecord) || p == filepath.Join(dir, DroppedRecord) || p == filepath.Join(dir, IgnoredDroppedRecord) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		c := Change{Path: workspaceName(rel), Kind: KindFile}
		if mark, err := readStored(p + IgnoredSuffix); err == nil {
			c.Ignored = true
			if sum := strings.TrimSpace(string(mark)); len(sum) == 2*sha256.Size {
				c.SHA256 = sum
			}
		}
		if d.Type()&fs.ModeSymlink != 0 {
			c.Kind = KindSymlink
		} else if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			c.Mode, c.Size = fi.Mode().Perm(), fi.Size()
			if _, err := os.Lstat(p + TruncatedSuffix); err == nil {
				c.Truncated = true
			}
			if bfi, err := os.Lstat(p + baseSuffix); err == nil && bfi.Mode().IsRegular() {
				c.Modifies = true
				c.ModeChanged = (bfi.Mode().Perm()^c.Mode)&0o111 != 0
				if _, err := os.Lstat(p + HiddenSuffix); err == nil {
					c.Hidden = true
				}
			}
		} else {
			return nil
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("proposed changes in %s: %w", dir, err)
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Read fills in c's Content (and Base, for a change that modifies a file) from the store dir,
// each at most MaxFile bytes.
func Read(dir string, c *Change) error {
	p := filepath.Join(dir, storeName(c.Path))
	if c.Kind == KindSymlink {
		t, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("proposed change %s: %w", c.Path, err)
		}
		c.Content = []byte(t)
		return nil
	}
	var err error
	if c.Content, err = readStored(p); err != nil {
		return fmt.Errorf("proposed change %s: %w", c.Path, err)
	}
	if c.Modifies {
		if c.Base, err = readStored(p + baseSuffix); err != nil {
			return fmt.Errorf("proposed change %s: %w", c.Path, err)
		}
	}
	return nil
}

// readStored reads a file of a store, without following a symlink, at most MaxFile bytes.
func readStored(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, min(fi.Size(), MaxFile))
	n, err := io.ReadFull(f, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil // shorter now than when looked at
	}
	return b[:n], err
}

// The store keeps, beside a change, files of its own whose names end in a reserved suffix
// (TruncatedSuffix, baseSuffix), and atomicfile's temporary names while a file is written
// (atomicfile.IsTemp). A name the box chose that has one of these forms (or ends in boxSuffix,
// or is AddedRecord or DroppedRecord) is kept with
// boxSuffix appended, so that no box file can pass for the store's own: storeName maps a
// workspace-relative path to its path in the store, component by component, and workspaceName
// back. Protected paths end in none of them, and are kept as they are.
const boxSuffix = ".agentbox-box"

// isMetadata reports a store name that is the store's own (not a change).
func isMetadata(name string) bool {
	return !strings.HasSuffix(name, boxSuffix) &&
		(strings.HasSuffix(name, TruncatedSuffix) || strings.HasSuffix(name, baseSuffix) || strings.HasSuffix(name, IgnoredSuffix) || strings.HasSuffix(name, HiddenSuffix) || atomicfile.IsTemp(name))
}

func reservedName(name string) bool {
	return name == AddedRecord || name == DroppedRecord || name == IgnoredDroppedRecord || strings.HasSuffix(name, boxSuffix) ||
		strings.HasSuffix(name, TruncatedSuffix) || strings.HasSuffix(name, baseSuffix) || strings.HasSuffix(name, IgnoredSuffix) ||
		strings.HasSuffix(name, HiddenSuffix) || atomicfile.IsTemp(name)
}

func storeName(rel string) string {
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		if reservedName(c) {
			parts[i] = c + boxSuffix
		}
	}
	return strings.Join(parts, "/")
}

func workspaceName(stored string) string {
	parts := strings.Split(stored, "/")
	for i, c := range parts {
		parts[i] = strings.TrimSuffix(c, boxSuffix)
	}
	return strings.Join(parts, "/")
}

// Dropped is what a guard moved out of the workspace and did not keep because the launch's
// store was full (MaxChanges, MaxStore): how many, and the first maxDroppedPaths of their
// workspace-relative paths. It is recorded in the store (DroppedRecord) and said by `agentbox
// changes`.
type Dropped struct {
	Count int      `json:"count"`
	Paths []string `json:"paths,omitempty"`
}

// maxDroppedPaths bounds the paths a Dropped record names.
const maxDroppedPaths = 20

// ReadDropped returns what the guards of the store dir did not keep (none when none).
func ReadDropped(dir string) (Dropped, error) {
	return readDroppedFile(filepath.Join(dir, DroppedRecord))
}

func readDroppedFile(path string) (Dropped, error) {
	var d Dropped
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &d)
	}
	if err != nil {
		return d, fmt.Errorf("proposed changes not kept %s: %w", path, err)
	}
	return d, nil
}

type heldFile struct {
	fd   int
	wd   int32
	rel  string // workspace-relative
	mode uint32
}

// Diff renders c as a unified diff against the host's current state of the path: host is
// the host's content, nil when the path is absent there (the usual case for a change that
// creates the path). A change to a file that existed (Modifies) is shown against its Base when
// the host still has that, so that the diff shows what the box changed; otherwise against the
// host's file now, marked so.
//
// A diff is bounded: a file holding a NUL byte is shown as binary, with its size and SHA-256,
// not line by line; of a larger file, the first MaxShown bytes are compared (the size and hash
// of the whole are said), so that one change cannot make the answer of `agentbox changes` too
// large to read.
func Diff(c Change, host []byte) string {
	var b strings.Builder
	what := c.Content
	if c.Kind == KindSymlink {
		what = []byte("symlink to " + oneLine(string(c.Content)) + "\n")
	}
	path := oneLine(c.Path)
	switch {
	case host == nil:
		fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n", path)
	case c.Modifies && bytes.Equal(host, c.Base):
		fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", path, path)
	default:
		fmt.Fprintf(&b, "--- a/%s (on the host now)\n+++ b/%s (proposed by the box)\n", path, path)
	}
	if c.Modifies && c.ModeChanged {
		fmt.Fprintf(&b, "(the box changed the file's mode to %#o)\n", c.Mode)
	}
	if binary(what) || binary(host) {
		if host != nil {
			fmt.Fprintf(&b, "-%s\n", Summary(host))
		}
		fmt.Fprintf(&b, "+%s\n", Summary(what))
	} else {
		writeHunks(&b, lines(shown(host)), lines(shown(what)))
		for _, side := range []struct {
			name string
			data []byte
		}{{"the host's file", host}, {"the box's file", what}} {
			if len(side.data) > MaxShown {
				fmt.Fprintf(&b, "(the diff compares the first %d bytes of %s: %s)\n", MaxShown, side.name, Summary(side.data))
			}
		}
	}
	if c.Truncated {
		fmt.Fprintf(&b, "(truncated at %d bytes: cannot be applied; the box wrote more)\n", len(c.Content))
	}
	return b.String()
}

// oneLine writes a newline in a box-chosen name out as \x0a, so that the name cannot forge
// further lines of the diff (a header, a hunk); the client escapes every other control.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", `\x0a`) }

// MaxShown is how much of each side of a change Diff compares line by line.
const MaxShown = 64 << 10

func shown(b []byte) []byte {
	if len(b) > MaxShown {
		return b[:MaxShown]
	}
	return b
}

// ShownWhole reports whether Diff(c, host) shows the whole of what c would write: a symlink's target,
// or a text file no longer than MaxShown. A file with a NUL byte is shown by its size and
// hash only, and of a longer one the first MaxShown bytes are compared: what lies beyond would
// be applied unseen (review 32, B F5: a `.envrc` ending in `#\0` showed as binary, and bash
// ran it all the same).
//
// host is what Diff compares against (the host's content, or nil): a NUL byte on that side
// makes Diff show both sides by size and hash (review 32 D, F6).
func ShownWhole(c Change, host []byte) bool {
	return c.Kind == KindSymlink || !binary(c.Content) && !binary(host) && len(c.Content) <= MaxShown
}

// StorePath returns where the store dir keeps the change at the workspace-relative rel.
func StorePath(dir, rel string) string { return filepath.Join(dir, storeName(rel)) }

// binary reports content git would call binary: it holds a NUL byte.
func binary(b []byte) bool { return bytes.IndexByte(b, 0) >= 0 }

// Summary names content by its size and SHA-256, for what is not shown line by line.
func Summary(b []byte) string {
	kind := "text"
	if binary(b) {
		kind = "binary"
	}
	return fmt.Sprintf("(%s, %d bytes, sha256 %x)", kind, len(b), sha256.Sum256(b))
}

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// maxDiffCells bounds the line-diff table (lines of one side times lines of the other); past
// it a diff shows every line of the old side removed and every line of the new one added.
const maxDiffCells = 4 << 20

// writeHunks writes the hunks of a line diff from old to neu (a longest common subsequence).
func writeHunks(b *strings.Builder, old, neu []string) {
	type op struct {
		kind byte // ' ', '-', '+'
		line string
	}
	var ops []op
	if len(old)*len(neu) > maxDiffCells {
		for _, l := range old {
			ops = append(ops, op{'-', l})
		}
		for _, l := range neu {
			ops = append(ops, op{'+', l})
		}
	} else {
		// lcs[i][j] is the length of the longest common subsequence of old[i:] and neu[j:].
		lcs := make([][]int32, len(old)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(neu)+1)
		}
		for i := len(old) - 1; i >= 0; i-- {
			for j := len(neu) - 1; j >= 0; j-- {
				if old[i] == neu[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(old) || j < len(neu) {
			switch {
			case i < len(old) && j < len(neu) && old[i] == neu[j]:
				ops = append(ops, op{' ', old[i]})
				i, j = i+1, j+1
			case i < len(old) && (j == len(neu) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, op{'-', old[i]}) // removals first, as diff(1) shows them
				i++
			default:
				ops = append(ops, op{'+', neu[j]})
				j++
			}
		}
	}
	if len(ops) == 0 {
		fmt.Fprintf(b, "@@ -0,0 +0,0 @@\n")
		return
	}
	// Hunks: the changed ops with diffContext unchanged ones around them, merged when close.
	for start := 0; start < len(ops); {
		first := start
		for first < len(ops) && ops[first].kind == ' ' {
			first++
		}
		if first == len(ops) {
			return // no (further) change: a mode change only shows none
		}
		from := max(first-diffContext, start)
		end := first
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, run)
				break
			}
			end = run
		}
		// Line numbers (1-based) of the hunk's first line on each side.
		oldLine, newLine := 1, 1
		for _, o := range ops[:from] {
			if o.kind != '+' {
				oldLine++
			}
			if o.kind != '-' {
				newLine++
			}
		}
		oldN, newN := 0, 0
		for _, o := range ops[from:end] {
			if o.kind != '+' {
				oldN++
			}
			if o.kind != '-' {
				newN++
			}
		}
		fmt.Fprintf(b, "@@ -%s +%s @@\n", span(oldLine, oldN), span(newLine, newN))
		for _, o := range ops[from:end] {
			b.WriteString(string(o.kind) + o.line + "\n")
		}
		start = end
	}
}

// span renders a hunk side: its first line and length ("0,0" style for an empty side, whose
// line is the one before it).
func span(line, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", line-1)
	}
	return fmt.Sprintf("%d,%d", line, n)
}

func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.Split(string(bytes.TrimSuffix(b, []byte("\n"))), "\n")
	if !bytes.HasSuffix(b, []byte("\n")) {
		s[len(s)-1] += "\n\\ No newline at end of file"
	}
	return s
}
