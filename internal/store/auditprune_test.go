package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// TestPruneAudit: PruneAudit deletes the audit rows older than the cut-off, on the real
// SQLite store, except those of a launch a restarted daemon still re-adopts (running), whose
// counters it sums from them; the rows left are the newer ones, and the totals rebuilt from
// them count what is left.
func TestPruneAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s := open(t, path)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	zero := 0
	for _, id := range []string{"ended", "running"} {
		l := newLaunch(id)
		l.Started = at
		must(s.CreateLaunch(ctx, l))
	}
	must(s.Transition(ctx, "running", Transition{To: api.StateRunning}))
	must(s.Transition(ctx, "ended", Transition{To: api.StateExited, ExitCode: &zero, Ended: at.Add(time.Hour)}))
	must(s.SetSettled(ctx, "ended"))
	// 2,000 old rows (a flood of an earlier month) and 3 new ones for the ended launch; 2 old
	// rows for the running one.
	old := make([]*Audit, 0, 2002)
	for i := 0; i < 2000; i++ {
		old = append(old, &Audit{Time: at.Add(time.Duration(i) * time.Millisecond), LaunchID: "ended", Kind: "egress",
			Detail: []byte(`{"decision":"refuse","target":"registry.example.org:443","reason":"host_not_allowed"}`)})
	}
	for i := 0; i < 2; i++ {
		old = append(old, &Audit{Time: at, LaunchID: "running", Kind: "egress", Detail: []byte(`{"decision":"allow"}`)})
	}
	must(s.AddAudits(ctx, old))
	for i := 0; i < 3; i++ {
		must(s.AddAudit(ctx, &Audit{Time: at.Add(48 * time.Hour), LaunchID: "ended", Kind: "egress", Detail: []byte(`{"decision":"allow"}`)}))
	}

	n, err := s.PruneAudit(ctx, at.Add(24*time.Hour))
	must(err)
	if n != 2000 {
		t.Errorf("PruneAudit deleted %d rows, want 2000", n)
	}
	rows, err := s.ListAudit(ctx, "ended")
	must(err)
	if len(rows) != 3 {
		t.Errorf("ended launch keeps %d rows, want the 3 newer ones", len(rows))
	}
	for _, r := range rows {
		if r.Time.Before(at.Add(24 * time.Hour)) {
			t.Errorf("row %d from %v survived the cut-off", r.Seq, r.Time)
		}
	}
	tot, err := s.EgressTotals(ctx, "")
	must(err)
	if got := tot["running"].Allowed; got != 2 {
		t.Errorf("running launch's allowed total after prune = %d, want 2 (its rows are kept)", got)
	}
	if got := tot["ended"]; got.Allowed != 3 || got.Refused != 0 {
		t.Errorf("ended launch's totals after prune = %+v, want 3 allowed, 0 refused", got)
	}
	// Nothing older is left: a second prune deletes nothing.
	n, err = s.PruneAudit(ctx, at.Add(24*time.Hour))
	must(err)
	if n != 0 {
		t.Errorf("second PruneAudit deleted %d rows, want 0", n)
	}
}
