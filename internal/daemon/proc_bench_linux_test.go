package daemon

import "testing"

// BenchmarkRootOnlyPaths is the walk of /etc a root daemon makes at each launch's plan stage
// (docs/benchmarks.md, issue #23).
func BenchmarkRootOnlyPaths(b *testing.B) {
	n := 0
	for b.Loop() {
		ps, err := rootOnlyPaths(rootOnlyDirs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(ps)
	}
	b.ReportMetric(float64(n), "paths")
}
