package integrity

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
)

// A split index (git update-index --split-index, core.splitIndex) keeps most entries in a
// shared index, GITDIR/sharedindex.<id>, and in the index itself the entries that replace some
// of them (with no name), those added, and a link extension: the shared index's id (its
// trailing checksum) and two EWAH bitmaps, of the shared entries deleted and of those replaced.
// A box's flags and stat data live in either file. The check reads it as git does
// (split-index.c, merge_base_index) into the entries git sees, and an index it rewrites is
// written whole, unsplit: git reads an index without a link extension as it is, whatever
// sharedindex files remain (review 15, F2).

// splitLink is an index's link extension: the shared index's id, and the positions of the
// shared entries deleted and replaced.
type splitLink struct {
	shared            []byte
	deleted, replaced []int
}

// parseLink reads the payload of a link extension of an index whose ids are hashLen bytes long
// (git's read_link_extension); positions are bounded by baseMax, which bounds the shared
// entries a position may name.
func parseLink(b []byte, hashLen, baseMax int) (splitLink, error) {
	var l splitLink
	if len(b) < hashLen {
		return l, errors.New("the split index's link extension is truncated")
	}
	l.shared, b = b[:hashLen], b[hashLen:]
	if len(b) == 0 {
		return l, nil
	}
	var err error
	var n int
	if l.deleted, n, err = ewahBits(b, baseMax); err != nil {
		return l, fmt.Errorf("the split index's bitmap of deleted entries: %w", err)
	}
	b = b[n:]
	if l.replaced, n, err = ewahBits(b, baseMax); err != nil {
		return l, fmt.Errorf("the split index's bitmap of replaced entries: %w", err)
	}
	if n != len(b) {
		return l, errors.New("garbage at the end of the split index's link extension")
	}
	return l, nil
}

// ewahBits returns the positions of the bits set in the EWAH bitmap at the start of b (git's
// ewah_read_mmap and ewah_each_bit: a 32-bit size in bits, a 32-bit count of 64-bit words, the
// words, the position of the last run-length word; each run-length word holds its running bit
// (bit 0), its run's length in words (bits 1-32) and the count of literal words after it (bits
// 33-63)), and the bytes it takes. A position past max is refused (git dies on one past the
// shared index's entries).
func ewahBits(b []byte, max int) ([]int, int, error) {
	if len(b) < 8 {
		return nil, 0, errors.New("truncated")
	}
	words := int64(binary.BigEndian.Uint32(b[4:]))
	size := 8 + 8*words + 4
	if int64(len(b)) < size {
		return nil, 0, errors.New("truncated")
	}
	word := func(i int64) uint64 { return binary.BigEndian.Uint64(b[8+8*i:]) }
	var out []int
	pos := int64(0)
	add := func(p int64) error {
		if p >= int64(max) {
			return fmt.Errorf("position %d past the %d shared entries", p, max)
		}
		out = append(out, int(p))
		return nil
	}
	for i := int64(0); i < words; {
		rlw := word(i)
		run := int64(rlw>>1&0xffffffff) * 64
		lits := int64(rlw >> 33)
		if rlw&1 != 0 {
			if run > 0 {
				if err := add(pos + run - 1); err != nil { // the last first: bounds the run
					return nil, 0, err
				}
				out = out[:len(out)-1]
			}
			for k := int64(0); k < run; k++ {
				out = append(out, int(pos+k))
			}
		}
		pos += run
		i++
		for k := int64(0); k < lits && i < words; k, i = k+1, i+1 {
			w := word(i)
			for c := int64(0); c < 64; c++ {
				if w>>c&1 != 0 {
					if err := add(pos + c); err != nil {
						return nil, 0, err
					}
				}
			}
			pos += 64
		}
	}
	return out, int(size), nil
}

// sourced is an index entry and the index bytes it lies in.
type sourced struct {
	b []byte
	e indexEntry
}

// mergeSplit returns the entries git sees in a split index (entries es of the index b, link l)
// whose shared index (sb, its entries ses) is read: the shared entries, the replaced ones
// taking the replacing entries' data in order (they have no name), the deleted ones dropped,
// then the others added in order, each taking the place of one of the same name and stage.
func mergeSplit(b []byte, es []indexEntry, l splitLink, sb []byte, ses []indexEntry) ([]sourced, error) {
	merged := make([]sourced, len(ses))
	for i, e := range ses {
		merged[i] = sourced{sb, e}
	}
	next := 0
	for _, p := range l.replaced {
		if next >= len(es) || es[next].name != "" {
			return nil, fmt.Errorf("the split index replaces shared entry %d without an entry of no name for it", p)
		}
		r := es[next]
		r.name = ses[p].name
		merged[p] = sourced{b, r}
		next++
	}
	removed := make([]bool, len(merged))
	for _, p := range l.deleted {
		removed[p] = true
	}
	var out []sourced
	for i, m := range merged {
		if !removed[i] {
			out = append(out, m)
		}
	}
	stage := func(e indexEntry) uint16 { return e.flags & ceStageMask }
	cmp := func(a, b indexEntry) int {
		if c := bytes.Compare([]byte(a.name), []byte(b.name)); c != 0 {
			return c
		}
		return int(stage(a)) - int(stage(b))
	}
	for _, e := range es[next:] {
		if e.name == "" {
			return nil, errors.New("the split index adds an entry of no name")
		}
		i, found := slices.BinarySearchFunc(out, e, func(s sourced, e indexEntry) int { return cmp(s.e, e) })
		if found {
			out[i] = sourced{b, e}
		} else {
			out = slices.Insert(out, i, sourced{b, e})
		}
	}
	return out, nil
}

// unsplitIndex returns an ordinary index (version 3 when an entry has extended flags, else 2;
// no extension) of the entries, as git writes one: each entry's stat data, id, flags (its name's
// length recomputed) and extended flags as they were, and its trailing checksum under the
// repository's hash (hashLen).
func unsplitIndex(entries []sourced, hashLen int) []byte {
	version := uint32(2)
	for _, s := range entries {
		if s.e.flags&ceExtended != 0 {
			version = 3
		}
	}
	var w bytes.Buffer
	w.WriteString("DIRC")
	binary.Write(&w, binary.BigEndian, version)
	binary.Write(&w, binary.BigEndian, uint32(len(entries)))
	for _, s := range entries {
		start := w.Len()
		w.Write(s.b[s.e.off : s.e.off+40])
		w.Write(s.e.oid)
		nl := min(len(s.e.name), 0x0fff)
		binary.Write(&w, binary.BigEndian, s.e.flags&^0x0fff|uint16(nl))
		if s.e.flags&ceExtended != 0 {
			binary.Write(&w, binary.BigEndian, s.e.ext)
		}
		w.WriteString(s.e.name)
		for pad := 8 - (w.Len()-start)%8; pad > 0; pad-- {
			w.WriteByte(0)
		}
	}
	if hashLen == sha256.Size {
		sum := sha256.Sum256(w.Bytes())
		w.Write(sum[:])
	} else {
		sum := sha1.Sum(w.Bytes())
		w.Write(sum[:])
	}
	return w.Bytes()
}

// maxLinkBytes bounds a link extension read (an id and two bitmaps of a bit per shared entry).
const maxLinkBytes = 64 << 20

// readSplit returns, for an index (its start head, size bytes, its entries es and extensions
// exts, the rest read from r) that has a link extension to a shared index, the entries git sees
// as an ordinary index (unsplitIndex), and true; false for one without (or whose link names no
// shared index). shared reads GITDIR/sharedindex.<hex id> (at most maxIndexBytes).
func readSplit(head []byte, size int64, r io.ReaderAt, es []indexEntry, exts []indexExtension, hashLen int, shared func(name string) ([]byte, error)) ([]byte, bool, error) {
	i := slices.IndexFunc(exts, func(x indexExtension) bool { return x.sig == "link" })
	if i < 0 {
		return nil, false, nil
	}
	x := exts[i]
	n := int64(x.end - x.start - 8)
	if n > maxLinkBytes {
		return nil, false, errors.New("the split index's link extension is larger than 64 MiB")
	}
	payload := make([]byte, n)
	if int64(x.end) <= int64(len(head)) {
		copy(payload, head[x.start+8:x.end])
	} else if _, err := r.ReadAt(payload, int64(x.start+8)); err != nil {
		return nil, false, fmt.Errorf("read the split index's link extension: %w", err)
	}
	if len(payload) < hashLen {
		return nil, false, errors.New("the split index's link extension is truncated")
	}
	if allZero(payload[:hashLen]) {
		return nil, false, nil // git reads the index as it is
	}
	id := payload[:hashLen]
	name := "sharedindex." + hex.EncodeToString(id)
	sb, err := shared(name)
	if err != nil {
		return nil, false, fmt.Errorf("the split index's shared index %s: %w", name, err)
	}
	if len(sb) < hashLen || !bytes.Equal(sb[len(sb)-hashLen:], id) {
		return nil, false, fmt.Errorf("the split index's shared index %s does not end in its id (git refuses it)", name)
	}
	ses, sexts, err := indexContents(sb, hashLen)
	if err != nil {
		return nil, false, fmt.Errorf("the split index's shared index %s: %w", name, err)
	}
	if slices.ContainsFunc(sexts, func(x indexExtension) bool { return x.sig == "link" }) {
		return nil, false, fmt.Errorf("the split index's shared index %s is split itself", name)
	}
	l, err := parseLink(payload, hashLen, len(ses))
	if err != nil {
		return nil, false, err
	}
	merged, err := mergeSplit(head, es, l, sb, ses)
	if err != nil {
		return nil, false, err
	}
	return unsplitIndex(merged, hashLen), true, nil
}
