// Package recordlimit bounds the records (log lines and audit rows) a box can make the daemon's
// brokers write. Each launch has a Budget: a token bucket of Burst records at once and Refill
// more a second, and a cap on the rows written in all (MaxRows), shared by the launch's
// brokers. Each broker keeps a Limiter over the Budget: a record past the budget is counted,
// not written, into a summary per key (a decision, an outcome), and the summaries are written
// every SummaryEvery while a flood lasts, and when the limiter closes or is flushed (the
// daemon's stop), so that totals summed from the records count every request. Past MaxRows
// the summaries wait for the flush or the close. A summary names what it counts with a Tally:
// its most requested targets, bounded in number and length. A Limiter's Journal keeps each
// record held back in a file, bounded, until its summary is written, so that a daemon killed
// before then leaves them to the next (Limiter.Replay).
package recordlimit

import (
	"os"
	"sync"
	"time"
)

// Defaults of a Budget and a Limiter.
const (
	Burst        = 512
	Refill       = 1 // records per second
	SummaryEvery = 10 * time.Second
)

// Budget is what the brokers of one launch may write. Its zero value allows Burst records at
// once, Refill a second after that, and no cap on the rows written in all. A Budget is safe
// for concurrent use.
type Budget struct {
	// MaxRows caps the records written in all, summaries included, by the limiters drawing on
	// this budget; past it records are only counted and summaries wait for Flush or Close.
	// Zero means no cap.
	MaxRows int64

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	written int64
}

// take reports whether one record may be written at now, and counts it if so.
func (b *Budget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = Burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(Burst, b.tokens+d.Seconds()*Refill)
	}
	if now.After(b.last) {
		b.last = now
	}
	if b.tokens < 1 || b.full() {
		return false
	}
	b.tokens--
	b.written++
	return true
}

// full reports whether MaxRows records were written; b.mu is held.
func (b *Budget) full() bool { return b.MaxRows > 0 && b.written >= b.MaxRows }

// wrote counts n records written whatever the budget (summaries, records after a close).
func (b *Budget) wrote(n int64) {
	b.mu.Lock()
	b.written += n
	b.mu.Unlock()
}

// Full reports whether the records written reached MaxRows.
func (b *Budget) Full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full()
}

// Written returns the number of records written on this budget.
func (b *Budget) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// Limiter holds back the records of one broker of a launch that its Budget refuses, as one
// summary per key, and writes the summaries later. Set Merge and Write before the first Admit.
type Limiter[R any] struct {
	// Budget is the launch's budget, shared with its other brokers' limiters. Nil means a
	// budget of this limiter's own, without a cap.
	Budget *Budget
	// Merge adds rec to sum, the summary of the records held back under rec's key; sum is R's
	// zero value for the first one.
	Merge func(sum, rec *R)
	// Write writes a summary (its log line and audit row). It is called without the
	// limiter's lock held, from Admit's caller, a timer or Flush.
	Write func(sum *R)
	// Every is how often the summaries are written while records are held back. Zero means
	// SummaryEvery.
	Every time.Duration

	// Journal is the file in which each record held back is kept (appended, one line, before
	// Admit returns) until its summary is written, so that a daemon killed meanwhile leaves
	// them to the next, which writes their summaries with Replay. The file is compacted into
	// the summaries held, and synced, past JournalMax. Empty means no journal: a daemon
	// killed loses the records held back.
	Journal string
	// JournalMax is the journal's size past which it is compacted. Zero means the constant
	// JournalMax.
	JournalMax int64
	// Encode and Decode turn a record, or a summary, into the journal's text and back. Nil
	// means encoding/json; a summary's Tally needs a field JSON sees.
	Encode func(*R) ([]byte, error)
	Decode func([]byte, *R) error
	// Commit, when set, returns once what Write wrote is durable (the daemon's audit writer
	// committed it); the journal of the summaries written is removed after it.
	Commit func()
	// Logf reports a journal that cannot be written. Nil means it is not reported.
	Logf func(format string, args ...any)

	mu      sync.Mutex
	own     Budget
	held    map[string]*R
	order   []string // keys in held, first held first
	timer   *time.Timer
	closed  bool
	j       *journal
	jbroken bool       // the journal could not be written: not tried again
	flushMu sync.Mutex // one flush at a time: each sets the journal of its summaries aside
}

func (l *Limiter[R]) budget() *Budget {
	if l.Budget != nil {
		return l.Budget
	}
	return &l.own
}

// Admit reports whether rec is written now; if not, it is merged into the summary of key,
// written later.
func (l *Limiter[R]) Admit(key string, rec *R, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// The broker closed: the records of the requests still ending are written, as many as
		// the connections that were open.
		l.budget().wrote(1)
		return true
	}
	if l.budget().take(now) {
		return true
	}
	if l.held == nil {
		l.held = map[string]*R{}
	}
	s := l.held[key]
	if s == nil {
		s = new(R)
		l.held[key] = s
		l.order = append(l.order, key)
	}
	l.Merge(s, rec)
	l.journalHold(key, rec)
	if l.timer == nil {
		every := l.Every
		if every <= 0 {
			every = SummaryEvery
		}
		l.timer = time.AfterFunc(every, l.tick)
	}
	return false
}

// AdmitAllowed is Admit for the record of a request that was let through (an egress tunnel
// or request to an allowed host, a git request relayed to its remote, a model call relayed):
// while the budget's cap is not reached it is written whatever the rate, so that a flood of
// refusals cannot hide where a box's data went (review 9, F3); it still counts against the
// cap. Past the cap it is held back under key, as Admit does.
func (l *Limiter[R]) AdmitAllowed(key string, rec *R, now time.Time) bool {
	b := l.budget()
	if b.Full() {
		return l.Admit(key, rec, now)
	}
	if !b.take(now) {
		b.wrote(1)
	}
	return true
}

// tick writes the summaries while the budget's cap is not reached; past it they wait for Flush
// or Close, so that a box that keeps flooding adds no row at all.
func (l *Limiter[R]) tick() {
	l.mu.Lock()
	l.timer = nil
	l.mu.Unlock()
	if !l.budget().Full() {
		l.flush(false)
	}
}

// Flush writes now the summaries of the records held back.
func (l *Limiter[R]) Flush() { l.flush(false) }

// Close writes the summaries of the records held back, and has every later record written:
// the broker is closing, and only the requests still in flight end after it.
func (l *Limiter[R]) Close() { l.flush(true) }

func (l *Limiter[R]) flush(closing bool) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	l.closed = l.closed || closing
	held, order := l.held, l.order
	l.held, l.order = nil, nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	aside := l.journalSetAside()
	l.mu.Unlock()
	l.budget().wrote(int64(len(order)))
	for _, k := range order {
		l.Write(held[k])
	}
	if aside == "" {
		return
	}
	if l.Commit != nil {
		l.Commit()
	}
	if err := os.Remove(aside); err != nil {
		l.logf("journal of held records: %v", err)
	}
}

// Budgets are the budgets of a daemon's launches, by launch id. The zero value gives budgets
// without a cap; a nil *Budgets gives each caller a budget of its own.
type Budgets struct {
	// MaxRows returns the cap of a new launch's budget (Budget.MaxRows), read when the
	// launch's first broker asks for it. Nil means no cap.
	MaxRows func() int64

	mu sync.Mutex
	m  map[string]*Budget
}

// Of returns the budget of launch id, made at the first call.
func (bs *Budgets) Of(id string) *Budget {
	if bs == nil {
		return &Budget{}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b := bs.m[id]; b != nil {
		return b
	}
	b := &Budget{}
	if bs.MaxRows != nil {
		b.MaxRows = bs.MaxRows()
	}
	if bs.m == nil {
		bs.m = map[string]*Budget{}
	}
	bs.m[id] = b
	return b
}

// End forgets the budget of launch id; the limiters that hold it keep using it.
func (bs *Budgets) End(id string) {
	if bs == nil {
		return
	}
	bs.mu.Lock()
	delete(bs.m, id)
	bs.mu.Unlock()
}
