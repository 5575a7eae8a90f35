package daemon

import (
	"os"
	"testing"
)

// TestMain removes the binaries agentboxBinaries built, when it built them.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
