package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/changes"
)

// TestProposedBounded (review 10, F3): the answer of GET /v0/launches/{id}/changes is bounded
// whatever the store holds (here 30 text files of 80 KiB of control characters,
// each 6 JSON bytes a byte, as a store kept before its bound could hold): past
// api.MaxChangesAnswer a change is listed with its size and hash, not its diff; and a request
// cancelled stops the listing. Before, the answer held every diff whole (the review's 100 such
// files took the daemon past 11 GB) and a cancelled request went on.
func TestProposedBounded(t *testing.T) {
	t.Parallel()
	d := &Daemon{stateDir: t.TempDir()}
	l := &api.Launch{ID: strings.Repeat("c", 32), Workspace: t.TempDir()}
	dir := d.changesDir(l.ID)
	content := []byte(strings.Repeat("\x01", changes.MaxShown+16<<10) + "\n")
	for i := 0; i < 30; i++ {
		p := filepath.Join(dir, ".devcontainer", fmt.Sprintf("f%02d.json", i))
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := d.proposed(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	notShown := 0
	for _, c := range out.Changes {
		if c.NotShown {
			notShown++
		}
	}
	if len(out.Changes) != 30 || len(b) > api.MaxChangesAnswer+64<<10 || notShown == 0 || notShown == 30 {
		t.Errorf("answer: %d changes, %d JSON bytes, %d not shown; want all 30 within %d bytes, the first shown", len(out.Changes), len(b), notShown, api.MaxChangesAnswer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.proposed(ctx, l); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled listing: %v, want context.Canceled", err)
	}
}

// BenchmarkProposedNUL lists a launch whose store holds 5 files of changes.MaxFile NUL bytes
// (the review's reproduction, ws13, with 5 files instead of 100): the bytes allocated and the
// answer's size per listing (docs/benchmarks.md).
func BenchmarkProposedNUL(b *testing.B) {
	d := &Daemon{stateDir: b.TempDir()}
	l := &api.Launch{ID: strings.Repeat("c", 32), Workspace: b.TempDir()}
	dir := d.changesDir(l.ID)
	os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o700)
	for i := 0; i < 5; i++ {
		if err := os.WriteFile(filepath.Join(dir, ".devcontainer", fmt.Sprintf("f%d.json", i)), make([]byte, changes.MaxFile), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var n int
	for i := 0; i < b.N; i++ {
		out, err := d.proposed(context.Background(), l)
		if err != nil {
			b.Fatal(err)
		}
		data, _ := json.Marshal(out)
		n = len(data)
	}
	b.ReportMetric(float64(n), "answer-bytes")
}
