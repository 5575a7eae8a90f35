package sshbroker

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/recordlimit"
)

// TestReplayRecords: the lines a launch's broker held back and did not log (its daemon was
// killed) are logged from its journal by the next daemon as the summary the broker would have
// logged: the same message, attributes, count and targets (issue 21's leftover of held record
// counts).
func TestReplayRecords(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "held", "l.ssh")
	var first bytes.Buffer
	r := newRecorder(slog.New(slog.NewTextHandler(&first, nil)), &recordlimit.Budget{MaxRows: 1}, journal)
	for range 40 {
		r.write(line{level: slog.LevelInfo, msg: "ssh agent", key: []any{"op", "sign", "decision", "deny"}, rest: []any{"key", "SHA256:x"}, target: "SHA256:x"})
	}
	r.warn("ssh agent: connection refused: connection budget exhausted", "max", 64)
	if n := strings.Count(first.String(), "\n"); n != 1 {
		t.Fatalf("%d lines logged under a cap of 1, want 1:\n%s", n, first.String())
	}
	var next bytes.Buffer
	n, err := ReplayRecords(slog.New(slog.NewTextHandler(&next, nil)), journal)
	if err != nil || n != 2 {
		t.Fatalf("ReplayRecords = %d, %v; want 2 summaries", n, err)
	}
	out := next.String()
	for _, want := range []string{
		`level=INFO msg="ssh agent" op=sign decision=deny count=39 reason=rate_limited`, `targets=SHA256:x*39`,
		`level=WARN msg="ssh agent: connection refused: connection budget exhausted" max=64 count=1 reason=rate_limited`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replayed summaries lack %q:\n%s", want, out)
		}
	}
}
