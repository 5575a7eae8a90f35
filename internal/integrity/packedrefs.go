package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Replace refs (refs/replace/<id>) make git hand out another object wherever it reads <id>:
// checkout, show, archive and worktree add of a box's content while diff stays empty. Loose ones
// lie in GITDIR/refs/replace (protected: plan.GitDirProtected); packed ones are lines of
// GITDIR/packed-refs, which git must keep writable (branch deletion, pack-refs), so the scan
// reads them and the watch strips the ones a box added (stripPackedReplace).

// replacePrefix is the namespace of replace refs.
const replacePrefix = "refs/replace/"

// packedRecords splits the text of a packed-refs file into its records as git's packed
// backend reads them (packed-backend.c, next_record), without losing a byte: the header line
// ("# pack-refs with: …", first only); then each record: an object id (40 or 64 hex digits),
// one byte of git's whitespace (isspace: space, TAB, LF, CR), the refname to the end of its
// line, and the peeled lines ("^" id) after it. A LF there makes the next line the refname: a
// record of two lines. What git would refuse (and die on) is a record of one line. Before, the
// check cut each line at its first space, and git's "ID<TAB>refs/replace/…" was no replace ref
// to it (review 14, F14).
func packedRecords(b []byte) (header string, recs []string) {
	s := string(b)
	if strings.HasPrefix(s, "# pack-refs with:") {
		i := strings.IndexByte(s, '\n') + 1
		if i == 0 {
			i = len(s)
		}
		header, s = s[:i], s[i:]
	}
	line := func(s string) int { // the end of s's first line, its LF included
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return i + 1
		}
		return len(s)
	}
	for len(s) > 0 {
		n := 0
		for n < len(s) && hexDigit(s[n]) {
			n++
		}
		end := line(s)
		if (n == 40 || n == 64) && n < len(s) && s[n] == '\n' {
			end = n + 1 + line(s[n+1:])
		}
		for end < len(s) && s[end] == '^' {
			end += line(s[end:])
		}
		recs = append(recs, s[:end])
		s = s[end:]
	}
	return header, recs
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

// packedReplace returns the replace refs of a packed-refs file (packedRecords, replaceRecord):
// each record's key, then its peeled lines, in file order.
func packedReplace(b []byte) []string {
	var out []string
	_, recs := packedRecords(b)
	for _, r := range recs {
		if key, peeled, ok := replaceRecord(r); ok {
			out = append(append(out, key), peeled...)
		}
	}
	return out
}

// checkPackedRefs records a gitdir's packed-refs when it holds replace refs, with a hash of
// them so that an added or changed one is a change.
func checkPackedRefs(ws, path string, skip map[string]bool, out map[string]string) {
	if skip[path] {
		return
	}
	b, err := readBeneath(ws, path, 64<<20)
	if errors.Is(err, errOutside) {
		out[path] = "git packed-refs that is a symlink leading out of the workspace"
		return
	}
	if tooLarge(err) != nil {
		// Replace refs past the bound would go unseen: it counts as holding some
		// (stripPackedReplace then refuses it, and the finding says so).
		out[path] = "git packed-refs " + err.Error() + ": replace refs in it are not checked"
		return
	}
	if err != nil {
		return
	}
	lines := packedReplace(b)
	if len(lines) == 0 {
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

// withoutReplace returns b without the replace refs (packedRecords, replaceRecord) whose key
// is not in keep, each with its peeled lines, and how many refs it dropped.
func withoutReplace(b []byte, keep map[string]bool) ([]byte, int) {
	header, recs := packedRecords(b)
	var out bytes.Buffer
	out.WriteString(header)
	dropped := 0
	for _, r := range recs {
		if key, _, ok := replaceRecord(r); ok && !keep[key] {
			dropped++
			continue
		}
		out.WriteString(r)
	}
	return out.Bytes(), dropped
}

// isPackedRefs reports whether a finding's path is a packed-refs file.
func isPackedRefs(p string) bool { return strings.HasSuffix(p, "/packed-refs") }
