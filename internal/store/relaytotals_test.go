package store

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestRelayTotals: a launch's relay counters come back from its audit rows (requests, tokens,
// cancelled requests, the last request's status), per launch, ignoring other kinds of rows.
func TestRelayTotals(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	add := func(launch, kind, detail string) {
		t.Helper()
		if err := s.AddAudit(ctx, &Audit{LaunchID: launch, Kind: kind, Detail: json.RawMessage(detail)}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "relay", `{"status":200,"outcome":"ok","usage":{"inputTokens":10,"outputTokens":3}}`)
	add("b", "relay", `{"status":401,"outcome":"ok"}`)
	add("a", "git", `{"status":500}`)
	add("a", "relay", `{"status":200,"outcome":"canceled","usage":{"inputTokens":5}}`)
	add("a", "relay", `{"status":429,"outcome":"ok","usage":{"inputTokens":1,"outputTokens":1}}`)
	add("c", "egress", `{"status":200}`)

	all, err := s.RelayTotals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]RelayTotals{
		"a": {Requests: 3, LastStatus: 429, Canceled: 1, InputTokens: 16, OutputTokens: 4},
		"b": {Requests: 1, LastStatus: 401},
	}
	if len(all) != len(want) {
		t.Fatalf("totals for %d launches (%+v), want %d", len(all), all, len(want))
	}
	for id, w := range want {
		if all[id] != w {
			t.Errorf("launch %s: %+v, want %+v", id, all[id], w)
		}
	}
	one, err := s.RelayTotals(ctx, "b")
	if err != nil || len(one) != 1 || one["b"] != want["b"] {
		t.Errorf("totals of b alone: %+v, %v", one, err)
	}
	none, err := s.RelayTotals(ctx, "nobody")
	if err != nil || len(none) != 0 {
		t.Errorf("totals of a launch without rows: %+v, %v", none, err)
	}
}
