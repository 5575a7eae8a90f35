package integrity

import (
	"runtime"
	"sync"
)

// maxWorkers bounds the goroutines inParallel runs.
const maxWorkers = 8

// inParallel calls the function worker returns for each i in [0, n), on up to GOMAXPROCS
// goroutines (at most maxWorkers), each with a function of its own from worker (for what it
// reuses from one call to the next: a zlib reader, hashes), and returns once every call has.
// The check at exit reads and hashes every file and object a box wrote (5,000 of each after
// bench/filework's workload), on the launch's path: one core did it in turn
// (docs/benchmarks.md, "Work in the box").
func inParallel(n int, worker func() func(i int)) {
	w := min(runtime.GOMAXPROCS(0), maxWorkers, n)
	if w <= 1 {
		if n > 0 {
			each := worker()
			for i := range n {
				each(i)
			}
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range w {
		each := worker()
		wg.Go(func() {
			for i := range next {
				each(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
