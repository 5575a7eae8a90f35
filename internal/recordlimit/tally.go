package recordlimit

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Bounds of a Tally.
const (
	// TallyNames is the number of names a Tally keeps a count for; past it a new name takes
	// the place of the least counted one (Tally.Add).
	TallyNames = 64
	// TopNames is the number of names a summary shows, most counted first (Tally.Top).
	TopNames = 8
	// MaxNameLen bounds a name as a Tally keeps it; a longer one is cut and ends in "…".
	MaxNameLen = 200
)

// Tally counts the records of a summary by what they were about (an egress target, a relay
// path, a git repository), so that a summary of the records held back still says where they
// went, in bounded space. It is a Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005)
// of TallyNames counters: a flood of distinct names cannot hide a name that came later, for
// every name with more than 1/TallyNames of the records is kept, with bounds on its count
// (Top). Its zero value is empty. A Tally is not safe for concurrent use: it lives in a
// summary, under its Limiter's lock.
type Tally struct {
	counts map[string]*tallyCount
	total  int64 // records added
}

// tallyCount is a kept name's count: at most n records are about it, and at least n - over
// (over is the count of the name it replaced, whose records may or may not be its own).
type tallyCount struct {
	n, over int64
}

// NameCount is a name and the number of records about it.
type NameCount struct {
	Name string `json:"name"`
	// Count is how many records are certainly about Name (exact when Over is 0).
	Count int64 `json:"count"`
	// Over is how many more records, counted among the others, may be about Name too: it was
	// first counted once TallyNames other names were, in the place of the least counted one.
	// Zero means Count is exact.
	Over int64 `json:"over,omitempty"`
}

// Add counts one record about name. A name not kept yet, once TallyNames are, replaces the
// least counted name, and starts from that name's count, which becomes its uncertainty: so a
// kept name's count is never less than its records, and any name with more than
// total/TallyNames records is kept.
func (t *Tally) Add(name string) {
	if len(name) > MaxNameLen {
		name = strings.ToValidUTF8(name[:MaxNameLen], "") + "…"
	}
	t.total++
	if c, ok := t.counts[name]; ok {
		c.n++
		return
	}
	if t.counts == nil {
		t.counts = map[string]*tallyCount{}
	}
	if len(t.counts) < TallyNames {
		t.counts[name] = &tallyCount{n: 1}
		return
	}
	// The least counted name, the first by name among equals, so that a tally's contents do
	// not depend on map order.
	var minName string
	var min *tallyCount
	for k, c := range t.counts {
		if min == nil || c.n < min.n || c.n == min.n && k < minName {
			minName, min = k, c
		}
	}
	delete(t.counts, minName)
	t.counts[name] = &tallyCount{n: min.n + 1, over: min.n}
}

// Top returns the n names counted most certainly (NameCount.Count, then the most possible, then
// by name), and the number of records not counted as certainly theirs: those of every other
// name, and the uncertain ones (Over) of the names shown. The shown counts and others add up to
// every record added. A nil Tally has none.
func (t *Tally) Top(n int) (top []NameCount, others int64) {
	if t == nil {
		return nil, 0
	}
	all := make([]NameCount, 0, len(t.counts))
	for k, c := range t.counts {
		all = append(all, NameCount{Name: k, Count: c.n - c.over, Over: c.over})
	}
	slices.SortFunc(all, func(a, b NameCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count+b.Over, a.Count+a.Over); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(all) > n {
		all = all[:n]
	}
	others = t.total
	for _, c := range all {
		others -= c.Count
	}
	return all, others
}

// String is the Tally's top names for a log line: "name*count,…" ("name*min-max" for a count
// with an uncertainty) and "+N" for the others, or "-" when it is empty.
func (t *Tally) String() string {
	top, others := t.Top(TopNames)
	if len(top) == 0 && others == 0 {
		return "-"
	}
	var b strings.Builder
	for i, c := range top {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c.Name)
		b.WriteByte('*')
		b.WriteString(strconv.FormatInt(c.Count, 10))
		if c.Over > 0 {
			// Between Count and Count+Over records.
			b.WriteString("-" + strconv.FormatInt(c.Count+c.Over, 10))
		}
	}
	if others > 0 {
		if len(top) > 0 {
			b.WriteByte(',')
		}
		b.WriteString("+" + strconv.FormatInt(others, 10))
	}
	return b.String()
}

// tallyJSON is a Tally as a journal keeps it (Limiter.Journal): every kept name with its
// count and uncertainty, and the records added, so that a summary read back counts on exactly.
type tallyJSON struct {
	Total int64       `json:"total"`
	Names []NameCount `json:"names"` // Count is the kept count (n), Over its uncertainty
}

// IsZero reports whether t is empty, so that a record's empty Tally is left out of its JSON
// (`json:",omitzero"`).
func (t Tally) IsZero() bool { return t.total == 0 }

// MarshalJSON encodes t's whole state, names sorted.
func (t Tally) MarshalJSON() ([]byte, error) {
	j := tallyJSON{Total: t.total, Names: make([]NameCount, 0, len(t.counts))}
	for k, c := range t.counts {
		j.Names = append(j.Names, NameCount{Name: k, Count: c.n, Over: c.over})
	}
	slices.SortFunc(j.Names, func(a, b NameCount) int { return strings.Compare(a.Name, b.Name) })
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encoded; a state no Tally can have (more than
// TallyNames names, an uncertainty above its count, counts above the total) is refused.
func (t *Tally) UnmarshalJSON(b []byte) error {
	var j tallyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Names) > TallyNames {
		return fmt.Errorf("tally: %d names, at most %d", len(j.Names), TallyNames)
	}
	*t = Tally{total: j.Total}
	var sum int64
	for _, c := range j.Names {
		if c.Count <= 0 || c.Over < 0 || c.Over >= c.Count || len(c.Name) > MaxNameLen+len("…") {
			return fmt.Errorf("tally: name %.40q: count %d, over %d", c.Name, c.Count, c.Over)
		}
		if t.counts == nil {
			t.counts = map[string]*tallyCount{}
		}
		t.counts[c.Name] = &tallyCount{n: c.Count, over: c.Over}
		sum += c.Count - c.Over
	}
	if sum > j.Total {
		return fmt.Errorf("tally: names count %d records of %d", sum, j.Total)
	}
	return nil
}
