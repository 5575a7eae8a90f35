package recordlimit

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Bounds of a Tally.
const (
	// TallyNames is the number of distinct names a Tally counts one by one; the records of
	// later names are counted together as others.
	TallyNames = 64
	// TopNames is the number of names a summary shows, most counted first (Tally.Top).
	TopNames = 8
	// MaxNameLen bounds a name as a Tally keeps it; a longer one is cut and ends in "…".
	MaxNameLen = 200
)

// Tally counts the records of a summary by what they were about (an egress target, a relay
// path, a git repository), so that a summary of the records held back still says where they
// went, in bounded space. Its zero value is empty. A Tally is not safe for concurrent use: it
// lives in a summary, under its Limiter's lock.
type Tally struct {
	counts map[string]int64
	others int64 // records of names past the first TallyNames
}

// NameCount is a name and the number of records about it.
type NameCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Add counts one record about name. The first TallyNames distinct names are counted exactly;
// the records of any later name are counted as others.
func (t *Tally) Add(name string) {
	if len(name) > MaxNameLen {
		name = strings.ToValidUTF8(name[:MaxNameLen], "") + "…"
	}
	if _, ok := t.counts[name]; !ok && len(t.counts) >= TallyNames {
		t.others++
		return
	}
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	t.counts[name]++
}

// Top returns the n most counted names, most first (equal counts by name), and the number of
// records about every other name, those past TallyNames included. A nil Tally has none.
func (t *Tally) Top(n int) (top []NameCount, others int64) {
	if t == nil {
		return nil, 0
	}
	all := make([]NameCount, 0, len(t.counts))
	for k, c := range t.counts {
		all = append(all, NameCount{Name: k, Count: c})
	}
	slices.SortFunc(all, func(a, b NameCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	others = t.others
	if len(all) > n {
		for _, c := range all[n:] {
			others += c.Count
		}
		all = all[:n]
	}
	return all, others
}

// String is the Tally's top names for a log line: "name*count,…" and "+N" for the others, or
// "-" when it is empty.
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
	}
	if others > 0 {
		if len(top) > 0 {
			b.WriteByte(',')
		}
		b.WriteString("+" + strconv.FormatInt(others, 10))
	}
	return b.String()
}
