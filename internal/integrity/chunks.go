package integrity

import (
	"runtime"
	"sync"
)

// maxCheckWorkers bounds the goroutines one check spreads its reading over (inChunks).
const maxCheckWorkers = 8

// minChunk is the fewest items a range of inChunks holds: fewer items are one range, read by
// the caller's goroutine.
const minChunk = 128

// inChunks calls f for contiguous ranges [lo, hi) that cover [0, n) once each, at most
// GOMAXPROCS (up to maxCheckWorkers) at a time, and returns when every call has returned. The
// check at exit reads and hashes every file and loose object a launch wrote (after a box wrote
// 5,000 files, three passes of 5,000 files each: the index's stat data, the changes git's
// views hide, the loose objects), one after the other on one CPU while the user's `agentbox
// run` waited; the box has ended by then, and the machine's other CPUs were idle. Each range
// is contiguous, so a caller that opens a folder once for the names in it that follow each
// other (an index lists a folder's files together) keeps doing so. f must only read: what a
// range finds goes into its own slots of a slice the caller made, and the caller acts on the
// findings afterwards, in order, on its own goroutine.
func inChunks(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), maxCheckWorkers)
	if n <= minChunk || workers < 2 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	// Four ranges a worker: a range whose files are larger does not hold up the others.
	size := max(minChunk, (n+4*workers-1)/(4*workers))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, (n+size-1)/size) {
		wg.Go(func() {
			for lo := range next {
				f(lo, min(lo+size, n))
			}
		})
	}
	for lo := 0; lo < n; lo += size {
		next <- lo
	}
	close(next)
	wg.Wait()
}
