package cli

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestEgressHintSkipsExpected: the line printed at the end of an attached launch names the
// refused targets the user could allow, never one the launch's profile expects refused (a
// request the program makes at every start whatever its settings); the EGRESS column of
// `agentbox launches` still counts it, and says it was expected.
func TestEgressHintSkipsExpected(t *testing.T) {
	tip := api.EgressRefusal{Target: "tips.example.org:443", Key: "egressAllow", Expected: true, Why: "every start"}
	other := api.EgressRefusal{Target: "other.example.org:443", Key: "egressAllow"}
	if h := egressHint(&api.EgressStats{Refused: 1, Refusals: []api.EgressRefusal{tip}}); h != "" {
		t.Errorf("an expected refusal alone is announced: %q", h)
	}
	h := egressHint(&api.EgressStats{Refused: 2, Refusals: []api.EgressRefusal{tip, other}})
	if !strings.Contains(h, "refused other.example.org:443 (egressAllow)") || strings.Contains(h, "tips.example.org") {
		t.Errorf("hint = %q, want other.example.org only", h)
	}
	if h := egressHint(nil); h != "" {
		t.Errorf("hint without a record = %q", h)
	}
	col := egressColumn(&api.EgressStats{Refused: 1, LastRefused: tip.Target, Refusals: []api.EgressRefusal{tip}})
	if col != "0 ok, 1 refused (last tips.example.org:443, expected)" {
		t.Errorf("EGRESS column = %q", col)
	}
	col = egressColumn(&api.EgressStats{Refused: 2, LastRefused: other.Target, Refusals: []api.EgressRefusal{tip, other}})
	if col != "0 ok, 2 refused (last other.example.org:443)" {
		t.Errorf("EGRESS column = %q", col)
	}
}
