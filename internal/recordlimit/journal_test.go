package recordlimit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// jrec is a record whose summary names what it counts, as the brokers' do.
type jrec struct {
	Target string `json:"target,omitempty"`
	Count  int64  `json:"count,omitempty"`
	Bytes  int64  `json:"bytes"`
	Names  Tally  `json:"names,omitzero"`
}

// journalRig is a limiter over a budget of cap rows (its burst spent at once) with a journal
// at path, whose written summaries are kept.
type journalRig struct {
	l       *Limiter[jrec]
	written []jrec
	commits int
}

func newJournalRig(path string) *journalRig {
	r := &journalRig{}
	r.l = &Limiter[jrec]{
		Budget:  &Budget{MaxRows: 1},
		Every:   time.Hour,
		Journal: path,
		Merge: func(sum, x *jrec) {
			sum.Count++
			sum.Bytes += x.Bytes
			sum.Names.Add(x.Target)
		},
		Write:  func(s *jrec) { r.written = append(r.written, *s) },
		Commit: func() { r.commits++ },
		Logf:   func(f string, a ...any) { panic(fmt.Sprintf(f, a...)) },
	}
	return r
}

// hold offers n records about targets made by name(i) under key; all past the first row are
// held back.
func (r *journalRig) hold(key string, n int, name func(i int) string) {
	for i := range n {
		r.l.Admit(key, &jrec{Target: name(i), Bytes: 3}, time.Unix(1000, 0))
	}
}

// TestJournalReplaysHeldRecords guards issue 21's leftover: the records a limiter held back
// lived only in memory, so a daemon killed before it wrote their summaries lost them. With a
// journal, a limiter made after the first one is abandoned (its daemon killed: no Flush, no
// Close) writes, with Replay, the very summaries the first would have written, then removes
// the journal; a second Replay writes nothing.
func TestJournalReplaysHeldRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "held", "x.egress")
	a := newJournalRig(path)
	a.hold("refuse", 301, func(i int) string { return fmt.Sprintf("h%d.evil.test:443", i%3) })
	a.hold("error", 40, func(i int) string { return "down.example.org:443" })
	// What the first limiter holds, copied before it is flushed for comparison only.
	want := map[string]string{}
	for k, s := range a.l.held {
		want[k] = fmt.Sprintf("%d %d %s", s.Count, s.Bytes, s.Names.String())
	}

	b := newJournalRig(path)
	n, err := b.l.Replay()
	if err != nil || n != 2 {
		t.Fatalf("Replay = %d, %v; want 2 summaries", n, err)
	}
	if len(b.written) != 2 || b.commits != 1 {
		t.Fatalf("replayed %d summaries with %d commits, want 2 and 1", len(b.written), b.commits)
	}
	got := map[string]string{"refuse": "", "error": ""}
	got["refuse"] = fmt.Sprintf("%d %d %s", b.written[0].Count, b.written[0].Bytes, b.written[0].Names.String())
	got["error"] = fmt.Sprintf("%d %d %s", b.written[1].Count, b.written[1].Bytes, b.written[1].Names.String())
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("replayed summary of %s = %q, want %q (what the killed limiter held)", k, got[k], want[k])
		}
	}
	if want["refuse"] != "300 900 h0.evil.test:443*100,h1.evil.test:443*100,h2.evil.test:443*100" {
		t.Errorf("held under refuse: %q, want the 300 records past the one row", want["refuse"])
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("journal after Replay: %v, want it removed", err)
	}
	if n, err := newJournalRig(path).l.Replay(); n != 0 || err != nil {
		t.Errorf("a second Replay = %d, %v; want nothing", n, err)
	}
}

// TestJournalBoundedAndFlushed: a flood of records with long, distinct targets (90 KB of
// lines) keeps the journal under its JournalMax (64 KiB here) plus a line: it is compacted
// into the summaries held, which a replay reads back exactly. Flush writes the summaries,
// commits, and removes the journal, and a record held after it starts a new one.
func TestJournalBoundedAndFlushed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.relay")
	const jmax = 64 << 10
	a := newJournalRig(path)
	a.l.JournalMax = jmax
	long := strings.Repeat("p", 2*MaxNameLen)
	var biggest int64
	for i := range 2 {
		a.hold("refuse", 100, func(j int) string { return fmt.Sprintf("%s/%d/%d", long, i, j) })
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		biggest = max(biggest, fi.Size())
	}
	if line := int64(len(long)) + 200; biggest > jmax+line {
		t.Errorf("journal grew to %d bytes under a flood, want at most %d (JournalMax and a line)", biggest, jmax+line)
	}
	held := a.l.held["refuse"]
	want := fmt.Sprintf("%d %d %s", held.Count, held.Bytes, held.Names.String())
	b := newJournalRig(path)
	if _, err := b.l.Replay(); err != nil || len(b.written) != 1 {
		t.Fatalf("Replay after compactions: %v, %d summaries", err, len(b.written))
	}
	if got := fmt.Sprintf("%d %d %s", b.written[0].Count, b.written[0].Bytes, b.written[0].Names.String()); got != want || b.written[0].Count != 2*100-1 {
		t.Errorf("summary read back from a compacted journal: %q, want %q (%d records)", got, want, 2*100-1)
	}

	c := newJournalRig(path)
	c.hold("refuse", 10, func(int) string { return "a:443" })
	c.l.Flush()
	if len(c.written) != 1 || c.written[0].Count != 9 || c.commits != 1 {
		t.Fatalf("Flush wrote %+v with %d commits, want one summary of 9 and a commit", c.written, c.commits)
	}
	if left, _ := filepath.Glob(path + "*"); len(left) != 0 {
		t.Errorf("files left after Flush: %v", left)
	}
	c.hold("refuse", 2, func(int) string { return "b:443" })
	if n, err := newJournalRig(path).l.Replay(); n != 1 || err != nil {
		t.Errorf("records held after a Flush: Replay = %d, %v; want their summary", n, err)
	}
}

// TestJournalCompactionTempsRemoved: a compaction leaves nothing but the journal beside it, and
// the temporary files of compactions a killed daemon left (atomicfile's, and the fixed name an
// earlier agentbox used) are removed by the replay, whose summaries they do not change.
func TestJournalCompactionTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.relay")
	a := newJournalRig(path)
	a.l.JournalMax = 4 << 10
	a.hold("refuse", 200, func(j int) string { return fmt.Sprintf("host-%d:443", j) })
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 || left[0] != path {
		t.Fatalf("beside the compacted journal: %v, want only %s", left, path)
	}
	if hidden, _ := filepath.Glob(filepath.Join(dir, ".*")); len(hidden) != 0 {
		t.Fatalf("temporary files left by compactions: %v", hidden)
	}
	for _, name := range []string{".x.relay.tmp-123456", "x.relay.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"k":"refuse","s":{"Count":1000}}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b := newJournalRig(path)
	if n, err := b.l.Replay(); n != 1 || err != nil || b.written[0].Count != 199 {
		t.Fatalf("Replay = %d, %v, %+v; want the 199 records held, from the journal alone", n, err, b.written)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("left after the replay: %v", left)
	}
	if hidden, _ := filepath.Glob(filepath.Join(dir, ".*")); len(hidden) != 0 {
		t.Errorf("temporary files left after the replay: %v", hidden)
	}
}

// TestJournalCutLine: a journal whose last line was cut (a power loss) replays every whole
// line and names the cut one.
func TestJournalCutLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.git")
	a := newJournalRig(path)
	a.hold("refuse", 6, func(int) string { return "a:443" })
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"k":"refuse","r":{"tar`)
	f.Close()
	b := newJournalRig(path)
	n, err := b.l.Replay()
	if n != 1 || len(b.written) != 1 || b.written[0].Count != 5 {
		t.Fatalf("Replay = %d summaries %+v, want one of the 5 whole records", n, b.written)
	}
	if err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("Replay error %v, want the cut line 6 named", err)
	}
}

// TestJournalConcurrentFlush: records held back by several goroutines while summaries are
// flushed are each counted once, in a summary written or in the journal, and nothing is left
// once the limiter closes (run with -race).
func TestJournalConcurrentFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.egress")
	r := newJournalRig(path)
	var mu sync.Mutex
	var counted int64
	r.l.Write = func(s *jrec) {
		mu.Lock()
		counted += s.Count
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				r.l.Admit("refuse", &jrec{Target: fmt.Sprintf("g%d-%d", g, i%7)}, time.Unix(1000, 0))
			}
		})
	}
	for range 20 {
		r.l.Flush()
	}
	wg.Wait()
	r.l.Close()
	if counted != 4*300-1 {
		t.Errorf("summaries count %d records, want %d (every one held back, once)", counted, 4*300-1)
	}
	if left, _ := filepath.Glob(path + "*"); len(left) != 0 {
		t.Errorf("files left after Close: %v", left)
	}
}

// BenchmarkHeld is the cost of a record held back, without a journal and with one on the
// disk of the test's temporary folder (a line appended per record, compacted and synced past
// JournalMax).
func BenchmarkHeld(b *testing.B) {
	for _, withJournal := range []bool{false, true} {
		name := "memory"
		if withJournal {
			name = "journal"
		}
		b.Run(name, func(b *testing.B) {
			r := newJournalRig("")
			if withJournal {
				r.l.Journal = filepath.Join(b.TempDir(), "x.egress")
			}
			r.l.Budget = &Budget{MaxRows: 1}
			r.l.Admit("refuse", &jrec{}, time.Unix(1000, 0))
			b.ResetTimer()
			for i := range b.N {
				r.l.Admit("refuse", &jrec{Target: fmt.Sprintf("h%d.evil.test:443", i%3), Bytes: 3}, time.Unix(1000, 0))
			}
		})
	}
}
