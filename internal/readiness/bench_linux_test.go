package readiness_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/readiness"
)

// BenchmarkProbe measures one whole probe per engine (lock, reclaim scan, shim, box,
// attestation, teardown and its verification) and reports the median and p95.
func BenchmarkProbe(b *testing.B) {
	for _, engine := range []string{"native", "bwrap"} {
		b.Run(engine, func(b *testing.B) {
			if engine == "bwrap" {
				requireBwrap(b)
			}
			rt, home := testDirs(b)
			var ds []time.Duration
			for b.Loop() {
				res := readiness.Probe(context.Background(), readiness.ProbeOptions{Engine: engine, RuntimeDir: rt, Home: home})
				if !res.OK() {
					b.Fatalf("probe: %v", res.Err)
				}
				ds = append(ds, res.Duration)
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*95/100)].Microseconds())/1000, "p95-ms")
		})
	}
}

// BenchmarkAdmitWarm measures the admission of a launch with a warm positive cache: what a
// launch pays for readiness (a key comparison; no probe work).
func BenchmarkAdmitWarm(b *testing.B) {
	state := b.TempDir()
	f := &fakeProbe{results: []*readiness.Error{nil}}
	seed := readiness.NewManager(readiness.Options{RuntimeDir: b.TempDir(), StateDir: state, Probe: f.probe})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seed.Start(ctx)
	if _, err := seed.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessReady }); err != nil {
		b.Fatal(err)
	}
	never := &fakeProbe{results: []*readiness.Error{errUserNS}}
	m := readiness.NewManager(readiness.Options{RuntimeDir: b.TempDir(), StateDir: state, Probe: never.probe})
	m.Start(ctx)
	if _, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessReady }); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := m.Admit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if never.calls.Load() != 0 {
		b.Fatal("a warm admission probed")
	}
}
