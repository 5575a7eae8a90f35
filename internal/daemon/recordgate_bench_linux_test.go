package daemon

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
)

// BenchmarkAttachedLaunch measures an attached launch of /bin/true through a spare shim as
// `agentbox run` makes it, less the CLI's own start: the launch request, the client's attach
// at the shim, the program's exit code, and the wait for the launch's end (api.WaitEnded).
// Two daemons run side by side in this process, one answering before the launch's record is
// committed (the program waits for the record in its shim) and one answering after it
// (answerAfterRecord, as before); each iteration launches once on each, in a rotating order,
// each with its spare ready (not timed). It reports the medians (after-ms, before-ms: answered
// after, before the commit) and the median of the iterations' ratios (before/after).
func BenchmarkAttachedLaunch(b *testing.B) {
	tds := []*testDaemon{startDaemonOpts(b, Options{}), startDaemonOpts(b, Options{answerAfterRecord: true})}
	ctx := context.Background()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	launch := func(td *testDaemon) time.Duration {
		waitFor(b, "a spare shim", func() bool { return td.spareShim() != 0 })
		time.Sleep(20 * time.Millisecond) // the last launch's settlement's leftovers
		t0 := time.Now()
		resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "true", Path: "/bin/true", Workspace: td.work})
		if err != nil {
			b.Fatal(err)
		}
		code, err := console.Attach(resp.ShimSocket, null, null, null, console.AttachOptions{NoSignals: true})
		if err != nil || code != 0 {
			b.Fatalf("attach: %d, %v", code, err)
		}
		if _, err := td.c.WaitEnded(ctx, resp.ID); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for _, td := range tds { // warm: the first launch makes the daemon's caches
		launch(td)
	}
	var ds [2][]time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var round [2]time.Duration
		for k := range tds {
			j := (i + k) % len(tds)
			round[j] = launch(tds[j])
		}
		ds[0], ds[1] = append(ds[0], round[0]), append(ds[1], round[1])
		ratios = append(ratios, float64(round[0])/float64(round[1]))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	slices.Sort(ratios)
	b.ReportMetric(med(ds[0]), "before-ms")
	b.ReportMetric(med(ds[1]), "after-ms")
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
