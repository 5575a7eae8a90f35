package session

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// MemPersister is an in-memory Persister for tests. Its zero value is ready to use.
type MemPersister struct {
	mu   sync.Mutex
	recs map[string]Record
	// Fail, when set, is returned by every call instead of doing it (fault injection).
	Fail error
}

var _ Persister = (*MemPersister)(nil)

// SaveSession stores r, replacing the record with the same id.
func (m *MemPersister) SaveSession(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	if m.recs == nil {
		m.recs = map[string]Record{}
	}
	m.recs[r.ID] = r
	return nil
}

// DeleteSession removes the record id; a missing record is not an error.
func (m *MemPersister) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	delete(m.recs, id)
	return nil
}

// LoadSessions returns every record, sorted by id.
func (m *MemPersister) LoadSessions(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return nil, m.Fail
	}
	out := make([]Record, 0, len(m.recs))
	for _, r := range m.recs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
