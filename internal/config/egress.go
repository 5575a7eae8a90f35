package config

import (
	"errors"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/agentbox/agentbox/internal/egress"
)

// validateEgressAllow parses every egressAllow entry with the proxy's own parser, so that a
// wildcard over a public suffix (*.com) or a malformed entry is refused at load, at its line.
func validateEgressAllow(file string, body ast.Node, c *Config) error {
	for i, s := range c.EgressAllow {
		if _, err := egress.ParseEntry(s); err != nil {
			path := []string{"egressAllow", "[" + strconv.Itoa(i) + "]"}
			msg := strings.TrimPrefix(err.Error(), egress.ErrBadEntry.Error()+": ")
			if !errors.Is(err, egress.ErrBadEntry) {
				msg = err.Error()
			}
			return errorAt(file, nodeAt(body, path), joinField(path), msg)
		}
	}
	return nil
}
