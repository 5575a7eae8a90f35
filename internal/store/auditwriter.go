package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AuditWriter appends audit rows for callers that must not wait for the store (a relay
// request, whose row is written after its response). Add queues a row and returns; one
// goroutine commits the rows queued in one transaction, Linger after the first of them
// arrived. With synchronous=FULL every commit is an fsync: a burst of requests pays one for
// all its rows instead of one each, and a lone request pays it off its own path. Each
// committed row is as durable as before; what a crash of the daemon can lose is what was
// queued and not yet committed, at most Linger's worth more than without the wait. Close
// commits what is queued.
type AuditWriter struct {
	s      *Store
	linger time.Duration
	logf   func(format string, args ...any)
	rows   chan *Audit
	stop   chan struct{}
	done   chan struct{}
	kick   chan struct{} // Sync ends the linger of the batch being gathered

	mu     sync.RWMutex // held for reading while a row is queued, for writing by Close
	closed bool
}

// Bounds of an AuditWriter: rows queued before Add waits (backpressure: a row is never
// dropped for want of room), and rows per transaction.
const (
	auditQueueMax = 4096
	auditBatchMax = 512
)

// NewAuditWriter starts an AuditWriter on s. logf reports rows that could not be written.
func (s *Store) NewAuditWriter(linger time.Duration, logf func(format string, args ...any)) *AuditWriter {
	w := &AuditWriter{s: s, linger: linger, logf: logf,
		rows: make(chan *Audit, auditQueueMax), stop: make(chan struct{}), done: make(chan struct{}),
		kick: make(chan struct{}, 1)}
	go w.run()
	return w
}

// Add queues a for writing. After Close it writes a at once.
func (w *AuditWriter) Add(a *Audit) {
	w.mu.RLock()
	if !w.closed {
		w.rows <- a
		w.mu.RUnlock()
		return
	}
	w.mu.RUnlock()
	w.write([]*Audit{a})
}

// Sync returns once the rows queued before it are committed (or failed and were reported),
// without waiting for the linger.
// After Close it returns at once: Add writes at once then.
func (w *AuditWriter) Sync() {
	m := &Audit{synced: make(chan struct{})}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return
	}
	w.rows <- m
	w.mu.RUnlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	<-m.synced
}

// Close commits the rows queued and stops the writer's goroutine.
func (w *AuditWriter) Close() {
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if !already {
		close(w.stop)
	}
	<-w.done
}

func (w *AuditWriter) run() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	batch := make([]*Audit, 0, auditBatchMax)
	for {
		select {
		case a := <-w.rows:
			batch = append(batch[:0], a)
		case <-w.stop:
			for {
				if batch = w.collect(batch[:0]); len(batch) == 0 {
					return
				}
				w.write(batch)
			}
		}
		// Rows that arrive meanwhile are queued without waking this goroutine.
		timer.Reset(w.linger)
		select {
		case <-timer.C:
		case <-w.kick:
			timer.Stop()
		case <-w.stop:
			timer.Stop()
		}
		w.write(w.collect(batch))
	}
}

// collect appends the rows queued now to batch, up to auditBatchMax.
func (w *AuditWriter) collect(batch []*Audit) []*Audit {
	for len(batch) < auditBatchMax {
		select {
		case a := <-w.rows:
			batch = append(batch, a)
		default:
			return batch
		}
	}
	return batch
}

func (w *AuditWriter) write(batch []*Audit) {
	rows, marks := batch[:0:0], []*Audit(nil)
	for _, a := range batch {
		if a.synced != nil {
			marks = append(marks, a)
		} else {
			rows = append(rows, a)
		}
	}
	defer func() {
		for _, m := range marks {
			close(m.synced)
		}
	}()
	batch = rows
	if len(batch) == 0 {
		return
	}
	ctx := context.Background()
	if err := w.s.AddAudits(ctx, batch); err == nil {
		return
	}
	// One bad row must not cost the others theirs.
	for _, a := range batch {
		if err := w.s.AddAudit(ctx, a); err != nil && w.logf != nil {
			w.logf("audit %s of launch %s: %v", a.Kind, a.LaunchID, err)
		}
	}
}

// AddAudits appends entries in one transaction, in order, and sets their Seq (and Time when
// it was zero). Either every entry is written or none is.
func (s *Store) AddAudits(ctx context.Context, as []*Audit) error {
	details := make([]json.RawMessage, len(as))
	for i, a := range as {
		if a.Kind == "" {
			return errors.New("store: add audit: kind is required")
		}
		if details[i] = a.Detail; details[i] == nil {
			details[i] = json.RawMessage("{}")
		}
		if !json.Valid(details[i]) {
			return fmt.Errorf("store: add audit %s: detail is not valid JSON", a.Kind)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: add audit: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit (time_ns, launch_id, kind, detail) VALUES (?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("store: add audit: %w", err)
	}
	defer stmt.Close()
	seqs := make([]int64, len(as))
	now := time.Now()
	for i, a := range as {
		t := a.Time
		if t.IsZero() {
			t = now
		}
		res, err := stmt.ExecContext(ctx, t.UnixNano(), a.LaunchID, a.Kind, string(details[i]))
		if err != nil {
			return fmt.Errorf("store: add audit %s: %w", a.Kind, err)
		}
		if seqs[i], err = res.LastInsertId(); err != nil {
			return fmt.Errorf("store: add audit %s: %w", a.Kind, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: add audit: %w", err)
	}
	for i, a := range as {
		a.Seq, a.Detail = seqs[i], details[i]
		if a.Time.IsZero() {
			a.Time = now
		}
	}
	return nil
}
