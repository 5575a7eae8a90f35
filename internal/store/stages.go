package store

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/internal/api"
)

// migrationStages adds the stages of a launch's start (api.Stage as a JSON array; NULL for
// launches recorded before stages were kept, and until the launch runs or fails).
const migrationStages = `ALTER TABLE launches ADD COLUMN stages TEXT CHECK (stages IS NULL OR json_valid(stages));`

// stagesJSON returns st as the stages column's value; nil is NULL.
func stagesJSON(st []api.Stage) (sql.NullString, error) {
	if st == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// parseStages reads the stages column of launch id.
func parseStages(id string, raw sql.NullString) ([]api.Stage, error) {
	if !raw.Valid {
		return nil, nil
	}
	var st []api.Stage
	if err := json.Unmarshal([]byte(raw.String), &st); err != nil {
		return nil, fmt.Errorf("launch %s: stages: %w", id, err)
	}
	return st, nil
}
