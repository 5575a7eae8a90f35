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

// packedReplace returns the lines of a packed-refs file that are replace refs (with the peeled
// line that follows one, if any), in file order.
func packedReplace(b []byte) []string {
	var out []string
	keep := false
	for _, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSuffix(ln, "\r")
		if strings.HasPrefix(ln, "^") {
			if keep {
				out = append(out, ln)
			}
			continue
		}
		_, name, ok := strings.Cut(ln, " ")
		keep = ok && strings.HasPrefix(strings.TrimSpace(name), replacePrefix)
		if keep {
			out = append(out, ln)
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

// withoutReplace returns b without the replace-ref lines not in keep (each with its peeled
// line), and how many refs it dropped.
func withoutReplace(b []byte, keep map[string]bool) ([]byte, int) {
	var out bytes.Buffer
	drop, dropped := false, 0
	lines := strings.SplitAfter(string(b), "\n")
	for _, raw := range lines {
		ln := strings.TrimRight(raw, "\r\n")
		if ln == "" && raw == "" {
			continue
		}
		if strings.HasPrefix(ln, "^") {
			if !drop {
				out.WriteString(raw)
			}
			continue
		}
		_, name, ok := strings.Cut(ln, " ")
		drop = ok && strings.HasPrefix(strings.TrimSpace(name), replacePrefix) && !keep[ln]
		if drop {
			dropped++
			continue
		}
		out.WriteString(raw)
	}
	return out.Bytes(), dropped
}

// isPackedRefs reports whether a finding's path is a packed-refs file.
func isPackedRefs(p string) bool { return strings.HasSuffix(p, "/packed-refs") }
