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

// TestEgressTotals: a launch's egress counters come back from its audit rows: allowed, refused
// and failed tunnels, bytes both ways, and the latest refusal that was the allowlist's.
func TestEgressTotals(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	add := func(launch, kind, detail string) {
		t.Helper()
		if err := s.AddAudit(ctx, &Audit{LaunchID: launch, Kind: kind, Detail: json.RawMessage(detail)}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "egress", `{"decision":"allow","target":"pkg.test:443","bytesUp":100,"bytesDown":2000}`)
	add("a", "egress", `{"decision":"refuse","target":"evil.test:443","reason":"host_not_allowed","bytesUp":0,"bytesDown":0}`)
	add("a", "relay", `{"status":200}`)
	add("a", "egress", `{"decision":"refuse","target":"x.test:22","reason":"port_not_allowed"}`)
	add("a", "egress", `{"decision":"refuse","reason":"pairing"}`)
	add("a", "egress", `{"decision":"refuse","target":"y.test:443","reason":"bad_request"}`)
	add("a", "egress", `{"decision":"allow","target":"pkg.test:443","bytesUp":1,"bytesDown":2}`)
	add("a", "egress", `{"decision":"error","target":"gone.test:443"}`)
	add("b", "egress", `{"decision":"refuse","reason":"pairing"}`)

	all, err := s.EgressTotals(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]EgressTotals{
		"a": {Allowed: 2, Refused: 4, Failed: 1, BytesUp: 101, BytesDown: 2002, LastRefused: "x.test:22", LastRefusedReason: "port_not_allowed"},
		"b": {Refused: 1},
	}
	if len(all) != len(want) {
		t.Fatalf("totals for %d launches (%+v), want %d", len(all), all, len(want))
	}
	for id, w := range want {
		if all[id] != w {
			t.Errorf("launch %s: %+v, want %+v", id, all[id], w)
		}
	}
	if one, err := s.EgressTotals(ctx, "a"); err != nil || len(one) != 1 || one["a"] != want["a"] {
		t.Errorf("totals of a alone: %+v, %v", one, err)
	}
}
