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

// MaxFile is the largest file kept as a proposed change; a larger one is kept truncated to it
// and marked so (Change.Truncated), and cannot be applied.
const MaxFile = 4 << 20

// truncatedSuffix marks, beside a kept file, that it was cut at MaxFile.
const truncatedSuffix = ".agentbox-truncated"

// Errors of Apply.
var (
	// ErrConflict: the host has something at the path now (made while or after the box ran);
	// it is never overwritten.
	ErrConflict = errors.New("the host changed the path meanwhile")
	// ErrUnknown: the launch proposed no change at that path.
	ErrUnknown = errors.New("no proposed change at that path")
)

// Kinds of a change.
const (
	KindFile    = "file"
	KindSymlink = "symlink"
)

// Change is one proposed change: the box created Path (workspace-relative), which was absent
// when the launch started.
type Change struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Content is the file's content, or the symlink's target.
	Content []byte `json:"content"`
	// Truncated says the file was larger than MaxFile and Content holds its start only.
	Truncated bool `json:"truncated,omitempty"`
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
		if d.IsDir() || strings.HasSuffix(p, truncatedSuffix) {
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
			if _, err := os.Lstat(p + truncatedSuffix); err == nil {
				c.Truncated = true
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
// the host's content, nil when the path is absent there (the usual case: the change creates
// it).
func Diff(c Change, host []byte) string {
	var b strings.Builder
	what := c.Content
	if c.Kind == KindSymlink {
		what = []byte("symlink to " + string(c.Content) + "\n")
	}
	if host == nil {
		fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n", c.Path)
	} else {
		fmt.Fprintf(&b, "--- a/%s (on the host now)\n+++ b/%s (proposed by the box)\n", c.Path, c.Path)
	}
	old, neu := lines(host), lines(what)
	fmt.Fprintf(&b, "@@ -%s +%s @@\n", span(len(old)), span(len(neu)))
	for _, l := range old {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range neu {
		b.WriteString("+" + l + "\n")
	}
	if c.Truncated {
		fmt.Fprintf(&b, "(truncated at %d bytes: cannot be applied)\n", MaxFile)
	}
	return b.String()
}

func span(n int) string {
	if n == 0 {
		return "0,0"
	}
	return fmt.Sprintf("1,%d", n)
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
