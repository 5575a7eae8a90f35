package broker

import "sync"

// Launches is what a broker holds for each launch it serves, by launch id: what its Prepare or
// Resume started (a socket, a proxy, a watch), put there once started and taken back by its
// End, so that an End finds what to release once and a second End finds nothing. The zero
// value is empty and ready to use; it is safe for concurrent use.
type Launches[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// Put records v for launch id. It returns what was held for id before (a Resume over what a
// Prepare or an earlier Resume started), which the caller releases; ok is false when nothing
// was.
func (ls *Launches[T]) Put(id string, v T) (old T, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]T{}
	}
	old, ok = ls.m[id]
	ls.m[id] = v
	return old, ok
}

// Get returns what is held for launch id; ok is false when nothing is.
func (ls *Launches[T]) Get(id string) (v T, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	v, ok = ls.m[id]
	return v, ok
}

// Take removes what is held for launch id and returns it, for the caller to release; ok is
// false when nothing was held (never prepared, or taken already).
func (ls *Launches[T]) Take(id string) (v T, ok bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	v, ok = ls.m[id]
	delete(ls.m, id)
	return v, ok
}

// All returns what is held for every launch, in no particular order: a copy, which the caller
// may use after the table changed.
func (ls *Launches[T]) All() []T {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]T, 0, len(ls.m))
	for _, v := range ls.m {
		out = append(out, v)
	}
	return out
}
