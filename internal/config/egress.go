package config

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/goccy/go-yaml/ast"
)

// validateEgressAllow parses every egressAllow entry with the proxy's own parser, so that a
// wildcard over a public suffix (*.com) or a malformed entry is refused at load, at its line.
func validateEgressAllow(file string, body ast.Node, c *Config) error {
	for i, s := range c.EgressAllow {
		if _, err := egress.ParseEntry(s); err != nil {
			path := []string{"egressAllow", "[" + strconv.Itoa(i) + "]"}
			msg := err.Error()
			var ee *egress.EntryError
			if errors.As(err, &ee) {
				msg = fmt.Sprintf("%q: %s", ee.Entry, ee.Reason)
			}
			return errorAt(file, nodeAt(body, path), joinField(path), msg)
		}
	}
	return nil
}
