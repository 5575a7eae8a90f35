package recordlimit

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

type rec struct {
	Key   string
	Count int64
	Bytes int64
}

// rig is a limiter over budget b whose written records and summaries are kept.
type rig struct {
	mu        sync.Mutex
	written   int
	summaries []rec
	l         *Limiter[rec]
}

func newRig(b *Budget) *rig {
	r := &rig{}
	r.l = &Limiter[rec]{
		Budget: b,
		Every:  time.Hour, // the tests flush by hand
		Merge: func(sum, x *rec) {
			sum.Key = x.Key
			sum.Count++
			sum.Bytes += x.Bytes
		},
		Write: func(s *rec) {
			r.mu.Lock()
			r.summaries = append(r.summaries, *s)
			r.mu.Unlock()
		},
	}
	return r
}

// send offers n records of key at now and counts those admitted.
func (r *rig) send(n int, key string, now time.Time) {
	for range n {
		if r.l.Admit(key, &rec{Key: key, Bytes: 10}, now) {
			r.written++
		}
	}
}

// TestLimiterBurstRefillSummary: Burst records at once, Refill a second after that; the rest is
// counted into one summary per key, written by Flush, and every record is accounted for.
func TestLimiterBurstRefillSummary(t *testing.T) {
	r := newRig(nil)
	t0 := time.Unix(1000, 0)
	r.send(Burst+100, "refuse", t0)
	r.send(50, "error", t0)
	if r.written != Burst {
		t.Errorf("%d records written at once, want %d", r.written, Burst)
	}
	r.send(10, "refuse", t0.Add(3*time.Second)) // 3 tokens refilled
	if want := Burst + 3*Refill; r.written != want {
		t.Errorf("%d records written after 3 s, want %d", r.written, want)
	}
	r.l.Flush()
	if len(r.summaries) != 2 || r.summaries[0].Key != "refuse" || r.summaries[1].Key != "error" {
		t.Fatalf("summaries %+v, want one for refuse then one for error", r.summaries)
	}
	var counted int64
	for _, s := range r.summaries {
		counted += s.Count
		if s.Bytes != 10*s.Count {
			t.Errorf("summary %+v: bytes not summed", s)
		}
	}
	if total := int64(r.written) + counted; total != Burst+100+50+10 {
		t.Errorf("written %d + summarized %d = %d, want every record (%d)", r.written, counted, total, Burst+160)
	}
	r.l.Flush()
	if len(r.summaries) != 2 {
		t.Errorf("a second flush wrote %d more summaries, want none", len(r.summaries)-2)
	}
}

// TestBudgetSharedAndCapped: the limiters of one launch draw on one budget, and past MaxRows
// nothing is written, however long the flood lasts, until Close writes the summaries; after
// Close every record is written (the requests still ending).
func TestBudgetSharedAndCapped(t *testing.T) {
	b := &Budget{MaxRows: 600}
	a, c := newRig(b), newRig(b)
	t0 := time.Unix(1000, 0)
	a.send(400, "x", t0)
	c.send(400, "y", t0)
	if got := a.written + c.written; got != Burst {
		t.Errorf("%d records written by two limiters of one budget, want the shared burst %d", got, Burst)
	}
	// A day of flooding: the refill would allow 86,400 more; the cap allows 88.
	for s := 1; s <= 86400; s += 60 {
		a.send(100, "x", t0.Add(time.Duration(s)*time.Second))
	}
	if got := b.Written(); got != 600 {
		t.Errorf("%d records written in a day of flooding, want the cap, 600", got)
	}
	a.l.tick() // the periodic summary: past the cap it waits
	if len(a.summaries) != 0 {
		t.Errorf("a periodic summary past the cap wrote %d rows, want 0", len(a.summaries))
	}
	a.l.Close()
	c.l.Close()
	if len(a.summaries) != 1 || len(c.summaries) != 1 {
		t.Fatalf("summaries at close: %+v %+v, want one each", a.summaries, c.summaries)
	}
	if total := int64(a.written+c.written) + a.summaries[0].Count + c.summaries[0].Count; total != 800+1440*100 {
		t.Errorf("records accounted for: %d, want %d", total, 800+1440*100)
	}
	before := a.written
	a.send(5, "x", t0.Add(48*time.Hour))
	if a.written != before+5 {
		t.Errorf("after Close %d of 5 records written, want all", a.written-before)
	}
}

// TestBudgets: a launch's brokers get one budget, with the cap read when it is made; End
// forgets it; a nil *Budgets gives budgets of their own.
func TestBudgets(t *testing.T) {
	n := int64(7)
	bs := &Budgets{MaxRows: func() int64 { return n }}
	x := bs.Of("a")
	n = 9
	if bs.Of("a") != x || x.MaxRows != 7 {
		t.Errorf("second Of gave another budget or cap %d, want the same with 7", x.MaxRows)
	}
	if y := bs.Of("b"); y == x || y.MaxRows != 9 {
		t.Errorf("budget of another launch: same=%v cap %d, want its own with 9", y == x, y.MaxRows)
	}
	bs.End("a")
	if bs.Of("a") == x {
		t.Errorf("Of after End gave the ended budget")
	}
	var none *Budgets
	if none.Of("a") == none.Of("a") {
		t.Errorf("a nil *Budgets gave one budget twice")
	}
}

// TestAllowedWrittenPastTheRate guards review 9's F3: a flood of refusals spent the budget's
// rate, and the record of a request that was let through afterwards (an egress tunnel to an
// allowed host) was only counted into a summary that names no target. AdmitAllowed writes it
// while the cap is not reached, and counts it against the cap; past the cap it is held back.
func TestAllowedWrittenPastTheRate(t *testing.T) {
	b := &Budget{MaxRows: Burst + 2}
	r := newRig(b)
	now := time.Unix(1000, 0)
	for range Burst + 100 { // the burst spent by refusals, the rest held back
		r.l.Admit("refuse", &rec{Key: "refuse"}, now)
	}
	if r.l.Admit("refuse", &rec{Key: "refuse"}, now) {
		t.Fatal("a refusal past the burst was admitted")
	}
	if !r.l.AdmitAllowed("allow", &rec{Key: "allow"}, now) {
		t.Fatal("the record of an allowed request after a flood of refusals was held back, not written")
	}
	if got := b.Written(); got != Burst+1 {
		t.Fatalf("written = %d, want %d: an allowed record counts against the cap", got, Burst+1)
	}
	if !r.l.AdmitAllowed("allow", &rec{Key: "allow"}, now) {
		t.Fatal("the second allowed record, under the cap, was held back")
	}
	if r.l.AdmitAllowed("allow", &rec{Key: "allow"}, now) {
		t.Fatal("an allowed record past the cap was written")
	}
}

// TestTally: a summary's tally counts a few names exactly, shows the most counted first, keeps
// a name of at most MaxNameLen bytes, and stays bounded under a flood of distinct names.
func TestTally(t *testing.T) {
	var ta Tally
	for range 5 {
		ta.Add("b:443")
	}
	for range 7 {
		ta.Add("a:443")
	}
	ta.Add("c:443")
	ta.Add("b:443")
	top, others := ta.Top(2)
	if len(top) != 2 || top[0] != (NameCount{"a:443", 7, 0}) || top[1] != (NameCount{"b:443", 6, 0}) || others != 1 {
		t.Errorf("top 2 = %+v and %d others, want a:443×7 then b:443×6, 1 other", top, others)
	}
	if s := ta.String(); s != "a:443*7,b:443*6,c:443*1" {
		t.Errorf("String() = %q", s)
	}
	for i := range 10 * TallyNames {
		ta.Add(fmt.Sprintf("flood%d.evil.test:443", i))
	}
	if n := len(ta.counts); n != TallyNames {
		t.Errorf("%d names kept, want %d", n, TallyNames)
	}
	var long Tally
	long.Add(strings.Repeat("x", 10*MaxNameLen))
	if top, _ := long.Top(1); len(top[0].Name) > MaxNameLen+len("…") {
		t.Errorf("a name of %d bytes kept whole", len(top[0].Name))
	}
	var empty Tally
	if top, others := empty.Top(TopNames); len(top) != 0 || others != 0 || empty.String() != "-" {
		t.Errorf("empty tally: %+v %d %q", top, others, empty.String())
	}
}

// TestTallyLateTargetAfterFlood guards issue 21's leftover of item 10: only the first
// TallyNames distinct targets of a summary were counted one by one, so a box that first asked
// for 64 decoys put every later request — the one whose target mattered — among the others,
// unnamed. Now the late target is named first, with a count that holds: at least the certain
// count and at most that plus its uncertainty; and every record is still counted once.
func TestTallyLateTargetAfterFlood(t *testing.T) {
	var ta Tally
	for i := range 10 * TallyNames {
		ta.Add(fmt.Sprintf("decoy%d.evil.test:443", i))
	}
	for range 200 {
		ta.Add("exfil.example.org:443")
	}
	top, others := ta.Top(TopNames)
	if len(top) == 0 || top[0].Name != "exfil.example.org:443" || top[0].Count > 200 || top[0].Count+top[0].Over < 200 {
		t.Fatalf("top = %+v, want exfil.example.org:443 first with 200 within [Count, Count+Over]", top)
	}
	sum := others
	for _, c := range top {
		sum += c.Count
	}
	if want := int64(10*TallyNames + 200); sum != want {
		t.Errorf("shown counts and others add up to %d, want %d (every record once)", sum, want)
	}
	if s := ta.String(); !strings.HasPrefix(s, "exfil.example.org:443*") {
		t.Errorf("String() = %q, want the late target first", s)
	}
}

// TestTallyBounds: over a skewed stream of many distinct names, every name a tally keeps has
// its true count within [Count, Count+Over], and every name with more than
// 1/TallyNames of the records is kept (Space-Saving's guarantees, on which the summaries'
// honesty rests).
func TestTallyBounds(t *testing.T) {
	var ta Tally
	truth := map[string]int64{}
	rng := rand.New(rand.NewPCG(21, 10))
	var total int64
	for range 5000 {
		// A Zipf-like mix: a few heavy names, a long tail of rare ones.
		var name string
		switch r := rng.IntN(100); {
		case r < 30:
			name = fmt.Sprintf("heavy%d", rng.IntN(3))
		case r < 40:
			name = fmt.Sprintf("mid%d", rng.IntN(20))
		default:
			name = fmt.Sprintf("tail%d", rng.IntN(2000))
		}
		ta.Add(name)
		truth[name]++
		total++
	}
	all, _ := ta.Top(TallyNames)
	kept := map[string]bool{}
	for _, c := range all {
		kept[c.Name] = true
		if f := truth[c.Name]; f < c.Count || f > c.Count+c.Over {
			t.Errorf("%s: %d records, outside [%d, %d]", c.Name, f, c.Count, c.Count+c.Over)
		}
	}
	for name, f := range truth {
		if f*TallyNames > total && !kept[name] {
			t.Errorf("%s has %d of %d records (more than 1/%d) and was dropped", name, f, total, TallyNames)
		}
	}
}
