//go:build !linux

package enginetest

import (
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
)

// Run skips: the conformance suite runs real boxes, on Linux only.
func Run(t *testing.T, factory func() engine.Engine) {
	t.Skip("the engine conformance suite runs on Linux only")
}
