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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// Truncated says the file was larger than MaxFile and Content holds its start only.
	Truncated bool `json:"truncated,omitempty"`
	// Modifies says Path was a protected file when the launch started, which the box changed
	// in its staged copy; Base is what it held then. Applying it needs the host's file to
	// hold Base still.
	Modifies bool   `json:"modifies,omitempty"`
	Base     []byte `json:"base,omitempty"`
	// ModeChanged says the box changed the file's executable bits (Modifies only).
	ModeChanged bool `json:"modeChanged,omitempty"`
}

// List returns the changes kept in dir, sorted by path; an absent dir holds none.
func List(dir string) ([]Change, error) {
	var out []Change
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, TruncatedSuffix) || strings.HasSuffix(p, baseSuffix) || p == filepath.Join(dir, AddedRecord) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		c := Change{Path: rel, Kind: KindFile}
		if d.Type()&fs.ModeSymlink != 0 {
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			c.Kind, c.Content = KindSymlink, []byte(t)
		} else if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			c.Content = b
			if _, err := os.Lstat(p + TruncatedSuffix); err == nil {
				c.Truncated = true
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			c.Mode = fi.Mode().Perm()
			if bfi, err := os.Lstat(p + baseSuffix); err == nil {
				if c.Base, err = os.ReadFile(p + baseSuffix); err != nil {
					return err
				}
				c.Modifies = true
				c.ModeChanged = (bfi.Mode().Perm()^c.Mode)&0o111 != 0
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

// Diff renders c as a unified diff against the host's current state of the path: host is
// the host's content, nil when the path is absent there (the usual case for a change that
// creates the path). A change to a file that existed (Modifies) is shown against its Base when
// the host still has that, so that the diff shows what the box changed; otherwise against the
// host's file now, marked so.
func Diff(c Change, host []byte) string {
	var b strings.Builder
	what := c.Content
	if c.Kind == KindSymlink {
		what = []byte("symlink to " + string(c.Content) + "\n")
	}
	switch {
	case host == nil:
		fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n", c.Path)
	case c.Modifies && bytes.Equal(host, c.Base):
		fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", c.Path, c.Path)
	default:
		fmt.Fprintf(&b, "--- a/%s (on the host now)\n+++ b/%s (proposed by the box)\n", c.Path, c.Path)
	}
	if c.Modifies && c.ModeChanged {
		fmt.Fprintf(&b, "(the box changed the file's mode to %#o)\n", c.Mode)
	}
	if c.Truncated && len(what) > truncatedShown {
		// It cannot be applied: its start is enough to review, and a bound full of control
		// bytes, each shown escaped, would not fit in the answer of `agentbox changes`.
		what = what[:truncatedShown]
	}
	writeHunks(&b, lines(host), lines(what))
	if c.Truncated {
		fmt.Fprintf(&b, "(truncated at %d bytes: cannot be applied; the diff shows its first %d bytes)\n", MaxFile, min(len(c.Content), truncatedShown))
	}
	return b.String()
}

// truncatedShown is how much of a truncated change Diff shows.
const truncatedShown = 64 << 10

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
