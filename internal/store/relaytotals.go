package store

import (
	"context"
	"fmt"
)

// RelayTotals are a launch's relay counters summed from its audit rows of kind "relay" (the
// LLM relay's access records: internal/daemon's relay broker writes one per request, or one
// summary row with a count for the requests its rate limit held back).
type RelayTotals struct {
	Requests     int
	LastStatus   int // the status of the last request recorded
	Canceled     int
	InputTokens  int64
	OutputTokens int64
}

// RelayTotals sums the relay audit rows of launchID, or of every launch that has any when
// launchID is "", by launch. It is how a daemon knows the relay activity of launches that ran
// under an earlier daemon.
func (s *Store) RelayTotals(ctx context.Context, launchID string) (map[string]RelayTotals, error) {
	// The status is a bare column next to MAX(seq): SQLite takes it from the row with the
	// largest seq of each group, the launch's last request.
	// A summary row of requests a rate limit held back counts as many (auditCount).
	q := `SELECT launch_id, SUM(` + auditCount + `),
		COALESCE(SUM((json_extract(detail, '$.outcome') = 'canceled') * ` + auditCount + `), 0),
		COALESCE(SUM(json_extract(detail, '$.usage.inputTokens')), 0),
		COALESCE(SUM(json_extract(detail, '$.usage.outputTokens')), 0),
		MAX(seq), COALESCE(json_extract(detail, '$.status'), 0)
		FROM audit WHERE kind = 'relay'`
	var args []any
	if launchID != "" {
		q, args = q+` AND launch_id = ?`, append(args, launchID)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY launch_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: relay totals: %w", err)
	}
	defer rows.Close()
	out := map[string]RelayTotals{}
	for rows.Next() {
		var id string
		var t RelayTotals
		var maxSeq int64
		if err := rows.Scan(&id, &t.Requests, &t.Canceled, &t.InputTokens, &t.OutputTokens, &maxSeq, &t.LastStatus); err != nil {
			return nil, fmt.Errorf("store: relay totals: %w", err)
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: relay totals: %w", err)
	}
	return out, nil
}
