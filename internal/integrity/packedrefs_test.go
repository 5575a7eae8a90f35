package integrity

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// packedReplace is packedReplaceFrom of the bytes b.
func packedReplace(b []byte) []string {
	out, _ := packedReplaceFrom(bytes.NewReader(b))
	return out
}

// withoutReplace is copyWithoutReplace of the bytes b.
func withoutReplace(b []byte, keep map[string]bool) ([]byte, int) {
	var w bytes.Buffer
	n, _ := copyWithoutReplace(&w, bytes.NewReader(b), keep)
	return w.Bytes(), n
}

// TestPackedRecordsStreamed: a packed-refs file is read in records whatever its size, each
// record whole however the reader's buffer cuts it (review 15, F14: a file padded past the
// 64 MiB the check read kept its replace ref); a record over maxPackedRecord is refused.
func TestPackedRecordsStreamed(t *testing.T) {
	id := strings.Repeat("1", 40)
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for i := range 20000 {
		b.WriteString(id + " refs/tags/pad-" + strings.Repeat("x", i%300) + "\n^" + id + "\n")
	}
	b.WriteString(id + "\nrefs/replace/" + id + "\n^" + strings.Repeat("2", 40) + "\n") // two lines
	b.WriteString(id + " refs/heads/" + strings.Repeat("y", 200<<10) + "\n")            // past the buffer
	b.WriteString(id + "\trefs/replace/" + strings.Repeat("3", 40))                     // no LF
	in := b.String()
	got := packedReplace([]byte(in))
	want := []string{id + "\nrefs/replace/" + id, "^" + strings.Repeat("2", 40), id + "\trefs/replace/" + strings.Repeat("3", 40)}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("replace refs %q, want %q", got, want)
	}
	out, n := withoutReplace([]byte(in), map[string]bool{want[2]: true})
	if n != 1 || string(out) != strings.Replace(in, want[0]+"\n"+want[1]+"\n", "", 1) {
		t.Errorf("the strip dropped %d refs, or changed more than the one record", n)
	}
	long := id + " refs/heads/" + strings.Repeat("z", maxPackedRecord) + "\n"
	if _, err := packedReplaceFrom(strings.NewReader(long)); !errors.Is(err, errPackedRecord) {
		t.Errorf("a record over the bound: %v, want errPackedRecord", err)
	}
}
