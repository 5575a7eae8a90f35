package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Root is one integrity root: a file or folder whose state the watch records.
type Root struct {
	Path string `json:"path"`
	// Alert is false for a watched-but-not-pinned root (HEAD).
	Alert bool `json:"alert"`
	// Shallow records a folder by its own identity only, not its entries (".git" itself: its
	// objects change with every commit).
	Shallow bool `json:"shallow,omitempty"`
}

// Entry kinds.
const (
	KindFile    = "file"
	KindDir     = "dir"
	KindSymlink = "symlink"
	KindOther   = "other"
	KindAbsent  = "absent"
)

// Entry is the recorded state of one file system entry.
type Entry struct {
	// Rel is the path relative to its root ("" for the root itself).
	Rel  string `json:"rel,omitempty"`
	Kind string `json:"kind"`
	// Identity: device, inode, mode, size and ctime (ns). For directories only device, inode
	// and mode count (their size and ctime move with every entry added).
	Dev   uint64 `json:"dev,omitempty"`
	Ino   uint64 `json:"ino,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Ctime int64  `json:"ctime,omitempty"`
	// Hash is the SHA-256 of a file's content (bounded by Limits.MaxFileBytes) or of a
	// symlink's target; "" for directories and for folders recorded by structure.
	Hash string `json:"hash,omitempty"`
}

// Folder states beyond the limits.
const (
	// PartialStructure: over the content budget, recorded by names, kinds, sizes, identities.
	PartialStructure = "structure"
	// PartialTooLarge: deeper than MaxDepth or more than MaxEntries entries; recorded by
	// structure up to the bound.
	PartialTooLarge = "too-large"
)

// RootState is the recorded state of one root.
type RootState struct {
	Root
	Entry Entry `json:"entry"`
	// Tree lists a folder root's entries beneath it, sorted by Rel.
	Tree []Entry `json:"tree,omitempty"`
	// Partial is "", PartialStructure or PartialTooLarge.
	Partial string `json:"partial,omitempty"`
	// Taken is when the state was recorded (Unix ns): hashes of files whose identity has not
	// changed since, and whose ctime is safely older, are reused by the next verification.
	Taken int64 `json:"taken,omitempty"`
}

// racyWindow is how much older than the previous recording a file's ctime must be for its
// unchanged identity to vouch for unchanged content (timestamps are coarse: a write in the
// same tick as the recording may leave ctime as it was), as git does for its index.
const racyWindow = int64(2 * time.Second)

// Take records the current state of roots.
func Take(roots []Root, lim Limits) []RootState {
	return take(roots, nil, lim)
}

// take records roots; prev, when not nil, is the previous state of the same roots, whose
// hashes are reused for files that did not change (see racyWindow).
func take(roots []Root, prev []RootState, lim Limits) []RootState {
	lim = lim.withDefaults()
	now := time.Now().UnixNano()
	out := make([]RootState, 0, len(roots))
	buf := make([]byte, 32<<10)
	for i, r := range roots {
		var p *RootState
		if prev != nil && prev[i].Path == r.Path {
			p = &prev[i]
		}
		st := takeRoot(r, lim, buf, p)
		st.Taken = now
		out = append(out, st)
	}
	return out
}

// hasher hashes files, reusing the previous hash of a file whose identity is unchanged and
// whose ctime is older than the previous recording by racyWindow.
type hasher struct {
	lim   Limits
	buf   []byte
	prev  map[string]Entry
	trust int64 // ctime bound below which an unchanged identity is trusted; 0: never
}

func (h *hasher) hash(rel, path string, e Entry) string {
	if p, ok := h.prev[rel]; ok && h.trust > 0 && p.Hash != "" && p.Kind == e.Kind && p.Dev == e.Dev &&
		p.Ino == e.Ino && p.Size == e.Size && p.Mode == e.Mode && p.Ctime == e.Ctime && e.Ctime < h.trust {
		return p.Hash
	}
	return hashFile(path, h.lim.MaxFileBytes, h.buf)
}

func takeRoot(r Root, lim Limits, buf []byte, prev *RootState) RootState {
	st := RootState{Root: r}
	h := &hasher{lim: lim, buf: buf}
	if prev != nil && prev.Taken > 0 {
		h.trust = prev.Taken - racyWindow
		h.prev = make(map[string]Entry, len(prev.Tree)+1)
		h.prev[""] = prev.Entry
		for _, e := range prev.Tree {
			h.prev[e.Rel] = e
		}
	}
	fi, err := os.Lstat(r.Path)
	if err != nil {
		st.Entry = Entry{Kind: KindAbsent}
		return st
	}
	st.Entry = entryOf("", r.Path, fi, h)
	if st.Entry.Kind != KindDir || r.Shallow {
		return st
	}
	st.Tree, st.Partial = walk(r.Path, lim, h)
	return st
}

// walk records a folder's entries iteratively (a deep tree cannot overflow the stack): first
// the structure within the bounds, then, when the content fits the budget, each file's hash.
func walk(root string, lim Limits, h *hasher) ([]Entry, string) {
	type dir struct {
		rel   string
		depth int
	}
	partial := ""
	var tree []Entry
	var total int64
	stack := []dir{{"", 1}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ents, err := os.ReadDir(filepath.Join(root, d.rel))
		if err != nil {
			continue // vanished or unreadable: its absence shows in the tree
		}
		for _, de := range ents {
			if len(tree) >= lim.MaxEntries {
				partial = PartialTooLarge
				break
			}
			rel := filepath.Join(d.rel, de.Name())
			fi, err := de.Info()
			if err != nil {
				continue
			}
			e := entryOf(rel, filepath.Join(root, rel), fi, nil)
			tree = append(tree, e)
			if e.Kind == KindFile {
				total += e.Size
			}
			if e.Kind == KindDir {
				if d.depth >= lim.MaxDepth {
					partial = PartialTooLarge
					continue
				}
				stack = append(stack, dir{rel, d.depth + 1})
			}
		}
	}
	sort.Slice(tree, func(i, j int) bool { return tree[i].Rel < tree[j].Rel })
	if partial == "" && total > lim.MaxBytes {
		partial = PartialStructure
	}
	if partial == "" {
		for i := range tree {
			if tree[i].Kind == KindFile {
				tree[i].Hash = h.hash(tree[i].Rel, filepath.Join(root, tree[i].Rel), tree[i])
			}
		}
	}
	return tree, partial
}

// entryOf records fi; a file's content is hashed when h is not nil.
func entryOf(rel, path string, fi fs.FileInfo, h *hasher) Entry {
	e := Entry{Rel: rel, Mode: uint32(fi.Mode().Perm()), Size: fi.Size()}
	e.Dev, e.Ino, e.Ctime = identity(fi)
	switch {
	case fi.Mode().IsRegular():
		e.Kind = KindFile
		if h != nil {
			e.Hash = h.hash(rel, path, e)
		}
	case fi.IsDir():
		e.Kind, e.Size, e.Ctime = KindDir, 0, 0
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Kind = KindSymlink
		if t, err := os.Readlink(path); err == nil {
			sum := sha256.Sum256([]byte(t))
			e.Hash = hex.EncodeToString(sum[:])
		}
	default:
		e.Kind = KindOther
	}
	return e
}

// hashFile returns the SHA-256 of up to max bytes of path, or "unreadable: …".
func hashFile(path string, max int64, buf []byte) string {
	f, err := openNoFollow(path)
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, io.LimitReader(f, max), buf); err != nil {
		return "unreadable"
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compare returns the transition from old to cur, if any.
func compare(old, cur RootState) (Transition, bool) {
	t := Transition{Path: cur.Path, Alert: cur.Alert}
	o, c := old.Entry, cur.Entry
	switch {
	case o.Kind == KindAbsent && c.Kind == KindAbsent:
		return t, false
	case o.Kind == KindAbsent:
		t.Kind, t.Detail = Created, c.Kind
		return t, true
	case c.Kind == KindAbsent:
		t.Kind, t.Detail = Removed, o.Kind
		return t, true
	case o.Kind != c.Kind:
		t.Kind, t.Detail = Replaced, fmt.Sprintf("%s replaced by a %s", o.Kind, c.Kind)
		return t, true
	}
	sameFile := o.Dev == c.Dev && o.Ino == c.Ino
	if o.Kind != KindDir {
		switch {
		case o.Hash != c.Hash || o.Size != c.Size:
			t.Kind, t.Detail = Modified, "content"
			if !sameFile {
				t.Detail = "content and identity (new inode)"
			}
		case !sameFile:
			t.Kind, t.Detail = Replaced, "equal content, new inode"
		case o.Mode != c.Mode:
			t.Kind, t.Detail = Modified, fmt.Sprintf("mode %04o → %04o", o.Mode, c.Mode)
		case o.Ctime != c.Ctime:
			t.Kind, t.Detail = Modified, "rewritten in place (equal content, new ctime)"
		default:
			return t, false
		}
		return t, true
	}
	diff := treeDiff(old.Tree, cur.Tree)
	if old.Partial != cur.Partial {
		diff = append(diff, fmt.Sprintf("recorded %s → %s", orFull(old.Partial), orFull(cur.Partial)))
	}
	switch {
	case len(diff) > 0:
		t.Kind, t.Detail = Modified, strings.Join(diff, "; ")
		if !sameFile {
			t.Detail = "new inode; " + t.Detail
		}
	case !sameFile:
		t.Kind, t.Detail = Replaced, "equal entries, new inode"
	case o.Mode != c.Mode:
		t.Kind, t.Detail = Modified, fmt.Sprintf("mode %04o → %04o", o.Mode, c.Mode)
	default:
		return t, false
	}
	return t, true
}

func orFull(p string) string {
	if p == "" {
		return "full"
	}
	return p
}

// maxDiff bounds the entries a folder transition lists.
const maxDiff = 8

// treeDiff lists the entries added (+), removed (-) and changed (~) between two sorted trees.
func treeDiff(a, b []Entry) []string {
	var out []string
	n := 0
	note := func(s string) {
		n++
		if n <= maxDiff {
			out = append(out, s)
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].Rel < b[j].Rel):
			note("-" + a[i].Rel)
			i++
		case i >= len(a) || b[j].Rel < a[i].Rel:
			note("+" + b[j].Rel)
			j++
		default:
			if !sameEntry(a[i], b[j]) {
				note("~" + a[i].Rel)
			}
			i++
			j++
		}
	}
	if n > maxDiff {
		out = append(out, fmt.Sprintf("and %d more", n-maxDiff))
	}
	return out
}

// sameEntry compares content and identity; a folder's size and ctime do not count.
func sameEntry(a, b Entry) bool {
	if a.Kind != b.Kind || a.Dev != b.Dev || a.Ino != b.Ino || a.Mode != b.Mode || a.Hash != b.Hash {
		return false
	}
	return a.Kind == KindDir || (a.Size == b.Size && a.Ctime == b.Ctime)
}

var errNotRegular = errors.New("not a regular file")

// tooLargeError is what readBeneath returns for a file longer than its bound. It names the
// file's size and ctime, so that a finding made of it changes whenever the file does (any
// write moves the ctime, which no program sets), without reading it.
type tooLargeError struct {
	size, ctime, max int64
}

func newTooLarge(fi fs.FileInfo, max int64) *tooLargeError {
	_, _, ctime := identity(fi)
	return &tooLargeError{size: fi.Size(), ctime: ctime, max: max}
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("too large to check (%d bytes, over the %d read; ctime %d)", e.size, e.max, e.ctime)
}

// tooLarge returns the *tooLargeError in err's chain, or nil.
func tooLarge(err error) *tooLargeError {
	var e *tooLargeError
	if errors.As(err, &e) {
		return e
	}
	return nil
}
