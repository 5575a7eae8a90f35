package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAddAudits(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	a1 := &Audit{Time: at, LaunchID: "a", Kind: "relay", Detail: json.RawMessage(`{"n":1}`)}
	a2 := &Audit{LaunchID: "a", Kind: "git"}
	if err := s.AddAudits(ctx, []*Audit{a1, a2}); err != nil {
		t.Fatal(err)
	}
	if !(a1.Seq > 0 && a1.Seq < a2.Seq) || a2.Time.IsZero() || string(a2.Detail) != "{}" {
		t.Fatalf("a1 %+v, a2 %+v", a1, a2)
	}
	// One invalid entry: nothing is written.
	bad := []*Audit{{Kind: "relay"}, {Kind: "relay", Detail: json.RawMessage(`{bad`)}}
	if err := s.AddAudits(ctx, bad); err == nil {
		t.Fatal("AddAudits with invalid JSON succeeded")
	}
	if err := s.AddAudits(ctx, []*Audit{{}}); err == nil {
		t.Fatal("AddAudits without kind succeeded")
	}
	got, err := s.ListAudit(ctx, "")
	if err != nil || len(got) != 2 || got[0].Seq != a1.Seq || got[1].Seq != a2.Seq || !got[0].Time.Equal(at) {
		t.Fatalf("ListAudit = %+v, %v", got, err)
	}
}

// TestAuditWriter guards the batched writer: every row added is written, in the order added,
// a bad row costs the others nothing, and Close leaves nothing queued.
func TestAuditWriter(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	var mu sync.Mutex
	var logged []string
	w := s.NewAuditWriter(20*time.Millisecond, func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, a...))
	})
	const goroutines, each = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				w.Add(&Audit{Time: at, LaunchID: fmt.Sprint("L", g), Kind: "relay", Detail: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			}
		}()
	}
	w.Add(&Audit{LaunchID: "bad", Kind: "relay", Detail: json.RawMessage(`{bad`)})
	wg.Wait()
	w.Close()
	for g := range goroutines {
		rows, err := s.ListAudit(ctx, fmt.Sprint("L", g))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != each {
			t.Fatalf("launch L%d: %d rows, want %d", g, len(rows), each)
		}
		for i, r := range rows {
			if string(r.Detail) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Fatalf("launch L%d row %d: %s (out of order)", g, i, r.Detail)
			}
		}
	}
	mu.Lock()
	if len(logged) != 1 || !strings.Contains(logged[0], "not valid JSON") {
		t.Errorf("logged %q", logged)
	}
	mu.Unlock()

	// After Close, a row is written at once; Close again is harmless.
	w.Add(&Audit{LaunchID: "late", Kind: "relay"})
	w.Close()
	if rows, err := s.ListAudit(ctx, "late"); err != nil || len(rows) != 1 {
		t.Fatalf("row added after Close: %d, %v", len(rows), err)
	}
}

// TestAuditWriterWithoutClose: rows are written while the writer runs, not only at Close.
func TestAuditWriterWithoutClose(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	w := s.NewAuditWriter(time.Millisecond, nil)
	defer w.Close()
	w.Add(&Audit{LaunchID: "x", Kind: "relay"})
	for range 1000 {
		if rows, err := s.ListAudit(ctx, "x"); err == nil && len(rows) == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the row was never written")
}

// TestAuditWriterSync: Sync returns once the rows queued before it are committed, without
// waiting for the linger (an hour here); the daemon removes the journal of held records
// (internal/recordlimit) only after it.
func TestAuditWriterSync(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	w := s.NewAuditWriter(time.Hour, nil)
	defer w.Close()
	for i := range 3 {
		w.Add(&Audit{LaunchID: "x", Kind: "relay", Detail: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		w.Sync()
		if rows, err := s.ListAudit(ctx, "x"); err != nil || len(rows) != i+1 {
			t.Fatalf("after Sync: %d rows, %v; want %d", len(rows), err, i+1)
		}
	}
	w.Sync() // nothing queued
	w.Close()
	w.Sync() // after Close
}
