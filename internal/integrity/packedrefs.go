package integrity

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Replace refs (refs/replace/<id>) make git hand out another object wherever it reads <id>:
// checkout, show, archive and worktree add of a box's content while diff stays empty. Loose ones
// lie in GITDIR/refs/replace (protected: plan.GitDirProtected); packed ones are lines of
// GITDIR/packed-refs, which git must keep writable (branch deletion, pack-refs), so the scan
// reads them and the watch strips the ones a box added (stripPackedReplace).

// replacePrefix is the namespace of replace refs.
const replacePrefix = "refs/replace/"

// maxPackedRecord bounds one record of a packed-refs file (a ref's line and its peeled lines),
// the only part held in memory: the file itself is read in records, whatever its size (git
// reads any; a bound on the file had a box pad it past 64 MiB to keep its replace ref, review
// 15, F14). No ref git writes comes near it.
const maxPackedRecord = 1 << 20

// errPackedRecord is a packed-refs record over maxPackedRecord: the file is not checked, and
// one the launch wrote is moved aside whole.
var errPackedRecord = fmt.Errorf("a record longer than %d KiB (no ref git writes is)", maxPackedRecord>>10)

// eachPackedRecord reads a packed-refs file from r in records as git's packed backend reads
// them (packed-backend.c, next_record), without losing a byte, and passes each to fn (header:
// the header line, "# pack-refs with: …", first only; fn must copy rec to keep it). A record
// is an object id (40 or 64 hex digits), one byte of git's whitespace (isspace: space, TAB, LF,
// CR), the refname to the end of its line, and the peeled lines ("^" id) after it. A LF there
// makes the next line the refname: a record of two lines. What git would refuse (and die on)
// is a record of one line. Before, the check cut each line at its first space, and git's
// "ID<TAB>refs/replace/…" was no replace ref to it (review 14, F14). A record over
// maxPackedRecord is errPackedRecord.
func eachPackedRecord(r io.Reader, fn func(rec []byte, header bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	line := func(rec []byte) ([]byte, error) { // rec and the next line, its LF included
		for {
			chunk, err := br.ReadSlice('\n')
			if len(rec)+len(chunk) > maxPackedRecord {
				return rec, errPackedRecord
			}
			rec = append(rec, chunk...)
			switch {
			case errors.Is(err, bufio.ErrBufferFull):
				continue
			case errors.Is(err, io.EOF):
				return rec, nil
			default:
				return rec, err
			}
		}
	}
	var rec []byte
	var err error
	for first := true; ; first = false {
		rec, err = line(rec[:0])
		if err != nil || len(rec) == 0 {
			return err
		}
		if first && bytes.HasPrefix(rec, []byte("# pack-refs with:")) {
			if err := fn(rec, true); err != nil {
				return err
			}
			continue
		}
		n := 0
		for n < len(rec) && hexDigit(rec[n]) {
			n++
		}
		if (n == 40 || n == 64) && n < len(rec) && rec[n] == '\n' {
			if rec, err = line(rec); err != nil {
				return err
			}
		}
		for {
			if p, _ := br.Peek(1); len(p) == 0 || p[0] != '^' {
				break
			}
			if rec, err = line(rec); err != nil {
				return err
			}
		}
		if err := fn(rec, false); err != nil {
			return err
		}
	}
}

func hexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// replaceRecord returns a packed-refs record's key (its text without the peeled lines and the
// line end) and its peeled lines, and whether it is a replace ref: any record whose text names
// refs/replace/, whatever whitespace git accepts before it, and one git would take for another
// ref or refuse too (a record cannot name it otherwise: no id or peeled line can).
func replaceRecord(rec string) (key string, peeled []string, ok bool) {
	if !strings.Contains(rec, replacePrefix) {
		return "", nil, false
	}
	lines := strings.Split(strings.TrimSuffix(rec, "\n"), "\n")
	head := lines
	for len(head) > 1 && strings.HasPrefix(head[len(head)-1], "^") {
		head = head[:len(head)-1]
	}
	for _, l := range lines[len(head):] {
		peeled = append(peeled, strings.TrimSuffix(l, "\r"))
	}
	return strings.TrimSuffix(strings.Join(head, "\n"), "\r"), peeled, true
}

// packedReplaceFrom returns the replace refs of a packed-refs file read from r
// (eachPackedRecord, replaceRecord): each record's key, then its peeled lines, in file order.
func packedReplaceFrom(r io.Reader) ([]string, error) {
	var out []string
	err := eachPackedRecord(r, func(rec []byte, header bool) error {
		if key, peeled, ok := replaceRecord(string(rec)); ok && !header {
			out = append(append(out, key), peeled...)
		}
		return nil
	})
	return out, err
}

// checkPackedRefs records a gitdir's packed-refs when it holds replace refs, with a hash of
// them so that an added or changed one is a change.
func checkPackedRefs(ws, path string, skip passOver, out map[string]string) {
	if skip.roots[path] {
		return
	}
	lines, err := packedReplaceAt(ws, path)
	if errors.Is(err, errOutside) {
		out[path] = "git packed-refs that is a symlink leading out of the workspace"
		return
	}
	if errors.Is(err, errPackedRecord) {
		// Replace refs past the record would go unseen: it counts as holding some
		// (stripPackedReplace then refuses it, and a packed-refs the launch wrote is moved
		// aside).
		out[path] = "git packed-refs with " + err.Error() + ": replace refs in it are not checked"
		return
	}
	if err != nil || len(lines) == 0 {
		return
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	out[path] = fmt.Sprintf("git replace refs in packed-refs: %d (sha256 %s)", countRefs(lines), hex.EncodeToString(sum[:6]))
}

func countRefs(lines []string) int {
	n := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "^") {
			n++
		}
	}
	return n
}

// copyWithoutReplace copies the packed-refs file read from r to w without the replace refs
// (eachPackedRecord, replaceRecord) whose key is not in keep, each with its peeled lines, and
// returns how many refs it dropped.
func copyWithoutReplace(w io.Writer, r io.Reader, keep map[string]bool) (int, error) {
	dropped := 0
	err := eachPackedRecord(r, func(rec []byte, header bool) error {
		if key, _, ok := replaceRecord(string(rec)); ok && !header && !keep[key] {
			dropped++
			return nil
		}
		_, err := w.Write(rec)
		return err
	})
	return dropped, err
}

// isPackedRefs reports whether a finding's path is a packed-refs file.
func isPackedRefs(p string) bool { return strings.HasSuffix(p, "/packed-refs") }
