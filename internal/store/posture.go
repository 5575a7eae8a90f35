package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
)

// migrationPosture adds the managed posture a launch started under (api.Posture as JSON; NULL
// for launches that record none, such as programs other than Claude Code).
const migrationPosture = `ALTER TABLE launches ADD COLUMN posture TEXT CHECK (posture IS NULL OR json_valid(posture));`

// postureJSON returns p as the posture column's value.
func postureJSON(p *api.Posture) (sql.NullString, error) {
	if p == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// attachPosture fills Posture of ls.
func (s *Store) attachPosture(ctx context.Context, ls []*Launch) error {
	if len(ls) == 0 {
		return nil
	}
	byID := make(map[string]*Launch, len(ls))
	args := make([]any, 0, len(ls))
	for _, l := range ls {
		byID[l.ID] = l
		args = append(args, l.ID)
	}
	for start := 0; start < len(args); start += 500 {
		end := min(start+500, len(args))
		q := `SELECT id, posture FROM launches WHERE posture IS NOT NULL AND id IN (?` + strings.Repeat(", ?", end-start-1) + `)`
		rows, err := s.db.QueryContext(ctx, q, args[start:end]...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id, raw string
			if err := rows.Scan(&id, &raw); err != nil {
				rows.Close()
				return err
			}
			p := &api.Posture{}
			if err := json.Unmarshal([]byte(raw), p); err != nil {
				rows.Close()
				return fmt.Errorf("launch %s: posture: %w", id, err)
			}
			byID[id].Posture = p
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}
