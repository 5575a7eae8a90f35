package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestLaunches: a launch's entry is put, replaced (the old one returned for release), read and
// taken once; All copies what is held.
func TestLaunches(t *testing.T) {
	var ls Launches[int]
	if _, ok := ls.Get("a"); ok {
		t.Fatal("the zero table holds a")
	}
	if _, ok := ls.Take("a"); ok {
		t.Fatal("the zero table gave a")
	}
	if len(ls.All()) != 0 {
		t.Fatal("the zero table lists entries")
	}
	if _, ok := ls.Put("a", 1); ok {
		t.Fatal("a first put returned an old entry")
	}
	if old, ok := ls.Put("a", 2); !ok || old != 1 {
		t.Fatalf("a second put returned %d, %v; want 1, true", old, ok)
	}
	ls.Put("b", 3)
	if v, ok := ls.Get("a"); !ok || v != 2 {
		t.Fatalf("get a: %d, %v", v, ok)
	}
	all := ls.All()
	slices.Sort(all)
	if !slices.Equal(all, []int{2, 3}) {
		t.Fatalf("all: %v", all)
	}
	if v, ok := ls.Take("a"); !ok || v != 2 {
		t.Fatalf("take a: %d, %v", v, ok)
	}
	if _, ok := ls.Take("a"); ok {
		t.Fatal("a taken twice")
	}
	if _, ok := ls.Get("a"); ok {
		t.Fatal("a held after its take")
	}
}

// TestLaunchesConcurrentTake: launches put and taken from many goroutines at once (-race);
// each is taken exactly once, as concurrent Ends of one launch must find it once.
func TestLaunchesConcurrentTake(t *testing.T) {
	var ls Launches[string]
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ls.Put(fmt.Sprint(i), fmt.Sprint(i)) })
	}
	wg.Wait()
	var mu sync.Mutex
	taken := map[string]int{}
	for range 4 {
		for i := range n {
			wg.Go(func() {
				_ = ls.All()
				if v, ok := ls.Take(fmt.Sprint(i)); ok {
					mu.Lock()
					taken[v]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(taken) != n {
		t.Fatalf("%d launches taken, want %d", len(taken), n)
	}
	for id, c := range taken {
		if c != 1 {
			t.Errorf("launch %s taken %d times", id, c)
		}
	}
}
