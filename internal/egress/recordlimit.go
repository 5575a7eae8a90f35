package egress

import (
	"sync"
	"time"
)

// Bounds of a proxy's records (log lines and audit rows). A box that floods the proxy (20,000
// refused requests in two seconds) must not grow the daemon's log and store without bound:
// each proxy writes at most RecordBurst records at once and RecordRefill more per second
// after that; past the limit a record is counted, not written, and what was counted is
// written as one summary Record per decision (Count set, bytes summed) at most every
// RecordSummaryEvery and when the proxy closes, so that totals summed from the records
// count every request.
const (
	RecordBurst        = 512
	RecordRefill       = 1 // records per second
	RecordSummaryEvery = 10 * time.Second
)

// recordLimiter is a token bucket over a proxy's records, with the summaries of what it
// held back.
type recordLimiter struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	held    map[string]*Record // by decision: the sum of the records held back
	order   []string           // decisions in held, first held first
	timer   *time.Timer
	flushTo func(*Record)
	closed  bool // the proxy closed: the records of requests still ending are written
}

// admit reports whether rec is written; if not, it is added to the summary of its decision,
// written later by flush.
func (l *recordLimiter) admit(rec *Record, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = RecordBurst
	} else {
		l.tokens = min(RecordBurst, l.tokens+now.Sub(l.last).Seconds()*RecordRefill)
	}
	l.last = now
	if l.closed {
		return true
	}
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	if l.held == nil {
		l.held = map[string]*Record{}
	}
	s := l.held[rec.Decision]
	if s == nil {
		s = &Record{Time: rec.Time, LaunchID: rec.LaunchID, Method: "-", Decision: rec.Decision,
			Reason: ReasonRateLimited}
		l.held[rec.Decision] = s
		l.order = append(l.order, rec.Decision)
	}
	s.Count++
	s.BytesUp += rec.BytesUp
	s.BytesDown += rec.BytesDown
	s.Duration = now.Sub(s.Time)
	if l.timer == nil && l.flushTo != nil {
		l.timer = time.AfterFunc(RecordSummaryEvery, func() { l.flush(false) })
	}
	return false
}

// flush writes the summaries of the records held back; after a flush that closes the limiter
// (the proxy's Close), every record is written, those of the requests still ending.
func (l *recordLimiter) flush(closing bool) {
	l.mu.Lock()
	l.closed = l.closed || closing
	held, order := l.held, l.order
	l.held, l.order = nil, nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	for _, d := range order {
		l.flushTo(held[d])
	}
}
