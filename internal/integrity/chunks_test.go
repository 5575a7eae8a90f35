package integrity

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestInChunks: every index of [0, n) is in exactly one range, the ranges are contiguous and
// non-empty, and no more of them run at once than inChunks' bound.
func TestInChunks(t *testing.T) {
	bound := min(runtime.GOMAXPROCS(0), maxCheckWorkers)
	for _, n := range []int{0, 1, minChunk, minChunk + 1, 1000, 10007} {
		seen := make([]int32, n)
		var running, most atomic.Int32
		var mu sync.Mutex
		ranges := 0
		inChunks(n, func(lo, hi int) {
			r := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if r <= m || most.CompareAndSwap(m, r) {
					break
				}
			}
			if lo < 0 || hi > n || lo >= hi {
				t.Errorf("n=%d: range [%d, %d)", n, lo, hi)
				return
			}
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&seen[i], 1)
			}
			mu.Lock()
			ranges++
			mu.Unlock()
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: index %d covered %d times", n, i, c)
			}
		}
		if int(most.Load()) > max(bound, 1) {
			t.Errorf("n=%d: %d ranges ran at once, bound %d", n, most.Load(), bound)
		}
		if n <= minChunk && ranges > 1 {
			t.Errorf("n=%d: %d ranges, want one", n, ranges)
		}
	}
}
