package integrity

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The branch-rewrite alert compares what git reads as a branch's tip at the snapshot and at
// exit, so it reads refs as git's files backend does (refs/files-backend.c, read_ref_internal
// and parse_loose_ref_contents; refs.c, refs_resolve_ref_unsafe; git 2.39 to 2.47). Before, a
// loose ref counted only when its whole text was an object id; git also reads a symbolic ref
// ("ref: refs/wip"), an id followed by whitespace and more text, and a symlink to a file
// holding an id, and with the user's branch packed a box rewrote its history unsaid
// (review 16, F3). Where git would block or read without end (a FIFO, a symlink to a device),
// the ref reads as broken here: the check reports it rather than waits.

// symrefMaxDepth is git's SYMREF_MAXDEPTH: the refs read in resolving one, symbolic refs
// included.
const symrefMaxDepth = 5

// maxLooseRef bounds what is read of a loose ref: an id and a space are all git uses of one
// that holds an id; a symbolic ref's name is rarely more than a few dozen bytes.
const maxLooseRef = 4096

// errBrokenRef is a ref git would not resolve to an object id.
var errBrokenRef = errors.New("not a valid ref")

// refReader reads the refs of the repository whose common git directory is gd.
type refReader struct {
	gd     string
	hexLen int // the object format's id length in hex: 40 (SHA-1) or 64 (SHA-256)
	// packed are the records of packed-refs (refname → id); "" for a name it records more than
	// once, whose id git's binary search would pick by the file's order.
	packed map[string]string
	// unread, when not "", says why packed-refs was not read whole (too large, not a regular
	// file, unreadable): the refs it holds may be missing from packed.
	unread string
}

// maxPackedRefs bounds what is read of packed-refs: git reads it whole, however large (a
// repository with a million refs has one of about 100 MiB). Before, anything over
// maxCheckedFile (1 MiB, about 15,000 refs) was read as no packed ref at all, silently: a
// busy origin's remote-tracking branches were enough for the snapshot to record none of the
// user's packed branches, and a box's rewrite of them went unsaid (review 17, F5). Of the names
// outside recordedRefs (the targets a symbolic ref may name), at most maxBranches are kept.
var maxPackedRefs int64 = 256 << 20 // a variable for the tests

// newRefReader returns a reader of gd's refs: its object format from its configuration, and
// its packed-refs read once.
func newRefReader(gd string) *refReader {
	r := &refReader{gd: gd, hexLen: 40, packed: map[string]string{}}
	if objectFormat(gd) == "sha256" {
		r.hexLen = 64
	}
	f, err := openReadBeneath(gd, filepath.Join(gd, "packed-refs"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.unread = fmt.Sprintf("its packed-refs could not be read: %v", err)
		}
		return r
	}
	defer f.Close()
	lr := &io.LimitedReader{R: f, N: maxPackedRefs + 1}
	others := 0
	err = eachPackedRecord(lr, func(rec []byte, header bool) error {
		// git's packed backend: the id, one byte it skips, the refname to the end of the line.
		if header || len(rec) <= r.hexLen || !allHex(rec[:r.hexLen]) {
			return nil
		}
		name, _, ok := bytes.Cut(rec[r.hexLen+1:], []byte("\n"))
		if !ok {
			return nil
		}
		if !slices.ContainsFunc(recordedRefs, func(k string) bool { return bytes.HasPrefix(name, []byte(k)) }) {
			if others >= maxBranches {
				return nil
			}
			others++
		}
		if _, dup := r.packed[string(name)]; dup {
			r.packed[string(name)] = ""
		} else {
			r.packed[string(name)] = strings.ToLower(string(rec[:r.hexLen]))
		}
		return nil
	})
	switch {
	case lr.N <= 0:
		r.unread = fmt.Sprintf("its packed-refs is larger than %d MiB, of which only the first were read", maxPackedRefs>>20)
	case err != nil:
		r.unread = fmt.Sprintf("its packed-refs could not be read to its end: %v", err)
	}
	return r
}

// objectFormat returns the object format gd's configuration names (extensions.objectFormat),
// "" when it names none (SHA-1).
func objectFormat(gd string) string {
	b, _ := readBeneath(gd, filepath.Join(gd, "config"), maxCheckedFile)
	es, _ := ParseConfig(b)
	f := ""
	for _, e := range es {
		if e.Section == "extensions" && !e.HasSub && e.Key == "objectformat" {
			f = strings.ToLower(e.Value)
		}
	}
	return f
}

// resolve returns the object id the ref name resolves to, as git reads it (rev-parse, log,
// push), and the ref the first symbolic ref on the way names ("" when name is no symbolic
// ref). err (errBrokenRef, or the reason) when git would give no object id.
func (r *refReader) resolve(name string) (id, symref string, err error) {
	for range symrefMaxDepth {
		id, target, err := r.readRaw(name)
		if err != nil {
			return "", symref, err
		}
		if target == "" {
			return id, symref, nil
		}
		if symref == "" {
			symref = target
		}
		if !checkRefname(target, true) {
			return "", symref, fmt.Errorf("a symbolic ref to %q, which is not a ref name: %w", target, errBrokenRef)
		}
		name = target
	}
	return "", symref, fmt.Errorf("symbolic refs nested more than %d deep: %w", symrefMaxDepth-1, errBrokenRef)
}

// readRaw reads one ref as git's read_ref_internal does: the loose file (a symlink whose
// target is a ref name is a symbolic ref to it; any other is read through), else the record of
// packed-refs. It returns the id, or the name a symbolic ref points to.
func (r *refReader) readRaw(name string) (id, target string, err error) {
	p := filepath.Join(r.gd, filepath.FromSlash(name))
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return r.readPacked(name)
	case err != nil:
		return "", "", err
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return "", "", err
		}
		if strings.HasPrefix(t, "refs/") && checkRefname(t, false) {
			return "", t, nil
		}
	case fi.IsDir():
		return r.readPacked(name)
	}
	// git opens anything else and reads it whole; a FIFO or a device is no ref here.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", "", fmt.Errorf("not a regular file: %w", errBrokenRef)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLooseRef+1))
	if err != nil {
		return "", "", err
	}
	return r.parseLoose(b)
}

// readPacked returns name's id in packed-refs.
func (r *refReader) readPacked(name string) (string, string, error) {
	id, ok := r.packed[name]
	switch {
	case !ok:
		return "", "", os.ErrNotExist
	case id == "":
		return "", "", fmt.Errorf("packed-refs records it more than once: %w", errBrokenRef)
	}
	return id, "", nil
}

// parseLoose parses a loose ref's content as parse_loose_ref_contents does, after git's
// strbuf_rtrim: "ref:", whitespace and a name (to the first NUL) is a symbolic ref; an id
// followed by the end, a NUL or whitespace is that id (git ignores the rest: FETCH_HEAD's
// format).
func (r *refReader) parseLoose(b []byte) (id, target string, err error) {
	b = bytes.TrimRight(b, " \t\n\r")
	if rest, ok := bytes.CutPrefix(b, []byte("ref:")); ok {
		if len(b) > maxLooseRef {
			return "", "", fmt.Errorf("a symbolic ref of more than %d bytes: %w", maxLooseRef, errBrokenRef)
		}
		rest = bytes.TrimLeft(rest, " \t\n\r")
		rest, _, _ = bytes.Cut(rest, []byte{0})
		return "", string(rest), nil
	}
	if len(b) < r.hexLen || !allHex(b[:r.hexLen]) || len(b) > r.hexLen && b[r.hexLen] != 0 && !gitSpace(b[r.hexLen]) {
		return "", "", errBrokenRef
	}
	id = strings.ToLower(string(b[:r.hexLen]))
	if strings.Trim(id, "0") == "" {
		return "", "", fmt.Errorf("the null id: %w", errBrokenRef)
	}
	return id, "", nil
}

// looseNames returns the names of the loose refs beneath prefix (e.g. "refs/heads/") that
// git's iteration lists (loose_fill_ref_dir: no name beginning with a dot or ending in
// .lock), at most max, sorted. Unlike git, a symlink to a folder is not followed: a box's
// symlinks to their own folders would make the walk's paths without end, and a name reached
// only through one is another name of a ref the walk lists; the entries read are bounded.
func (r *refReader) looseNames(prefix string, max int) []string {
	var out []string
	budget := 4 * max
	var walk func(dir, ref string)
	walk = func(dir, ref string) {
		es, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range es {
			if len(out) >= max || budget <= 0 {
				return
			}
			budget--
			n := e.Name()
			if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".lock") {
				continue
			}
			p := filepath.Join(dir, n)
			if e.IsDir() {
				walk(p, ref+n+"/")
				continue
			}
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && checkRefname(ref+n, true) {
				out = append(out, ref+n)
			}
		}
	}
	walk(filepath.Join(r.gd, filepath.FromSlash(prefix)), prefix)
	slices.Sort(out)
	return out
}

// checkRefname reports whether git's check_refname_format accepts name (oneLevel:
// REFNAME_ALLOW_ONELEVEL): components not empty, not beginning with a dot or ending in .lock,
// no "..", "@{", control character, space, ~ ^ : ? * [ or backslash; not "@", not ending in a
// dot.
func checkRefname(name string, oneLevel bool) bool {
	if name == "@" || name == "" || strings.HasSuffix(name, ".") {
		return false
	}
	parts := strings.Split(name, "/")
	if !oneLevel && len(parts) < 2 {
		return false
	}
	for _, c := range parts {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") || strings.Contains(c, "..") || strings.Contains(c, "@{") {
			return false
		}
		if strings.ContainsFunc(c, func(r rune) bool { return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) }) {
			return false
		}
	}
	return true
}

// gitSpace reports whether git's isspace holds for c: space, TAB, LF, CR.
func gitSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func allHex(b []byte) bool {
	for _, c := range b {
		if !hexDigit(c) {
			return false
		}
	}
	return true
}
