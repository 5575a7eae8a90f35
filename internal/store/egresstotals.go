package store

import (
	"context"
	"fmt"
)

// EgressTotals are a launch's egress proxy counters summed from its audit rows of kind
// "egress" (internal/daemon's egress broker writes one per tunnel or request, and one summary
// row, with a count, for the requests the proxy's rate limit held back).
type EgressTotals struct {
	Allowed, Refused, Failed int64
	BytesUp, BytesDown       int64
	// LastRefused and LastRefusedReason are the target and reason of the latest refusal by the
	// allowlist (refusals of a bad pairing or a malformed request are not the allowlist's).
	LastRefused, LastRefusedReason string
}

// auditCount is the number of requests an audit row stands for: 1, or its count when it is
// the summary of the requests a rate limit held back (internal/recordlimit).
const auditCount = `COALESCE(json_extract(detail, '$.count'), 1)`

// EgressTotals sums the egress audit rows of launchID, or of every launch that has any when
// launchID is "", by launch.
func (s *Store) EgressTotals(ctx context.Context, launchID string) (map[string]EgressTotals, error) {
	where, args := `kind = 'egress'`, []any{}
	if launchID != "" {
		where, args = where+` AND launch_id = ?`, append(args, launchID)
	}
	out := map[string]EgressTotals{}
	rows, err := s.db.QueryContext(ctx, `SELECT launch_id,
		COALESCE(SUM((json_extract(detail, '$.decision') = 'allow') * `+auditCount+`), 0),
		COALESCE(SUM((json_extract(detail, '$.decision') = 'refuse') * `+auditCount+`), 0),
		COALESCE(SUM((COALESCE(json_extract(detail, '$.decision'), '') NOT IN ('allow', 'refuse')) * `+auditCount+`), 0),
		COALESCE(SUM(json_extract(detail, '$.bytesUp')), 0),
		COALESCE(SUM(json_extract(detail, '$.bytesDown')), 0)
		FROM audit WHERE `+where+` GROUP BY launch_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: egress totals: %w", err)
	}
	for rows.Next() {
		var id string
		var t EgressTotals
		if err := rows.Scan(&id, &t.Allowed, &t.Refused, &t.Failed, &t.BytesUp, &t.BytesDown); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: egress totals: %w", err)
		}
		out[id] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: egress totals: %w", err)
	}
	// The latest refusal by the allowlist: bare columns next to MAX(seq) come from that row.
	rows, err = s.db.QueryContext(ctx, `SELECT launch_id, MAX(seq), json_extract(detail, '$.target'), COALESCE(json_extract(detail, '$.reason'), '')
		FROM audit WHERE `+where+` AND json_extract(detail, '$.decision') = 'refuse'
		AND COALESCE(json_extract(detail, '$.target'), '') != ''
		AND COALESCE(json_extract(detail, '$.reason'), '') NOT IN ('pairing', 'bad_request')
		GROUP BY launch_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: egress totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, target, reason string
		var seq int64
		if err := rows.Scan(&id, &seq, &target, &reason); err != nil {
			return nil, fmt.Errorf("store: egress totals: %w", err)
		}
		t := out[id]
		t.LastRefused, t.LastRefusedReason = target, reason
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: egress totals: %w", err)
	}
	return out, nil
}
