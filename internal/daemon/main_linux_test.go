package daemon

import (
	"os"
	"testing"

	_ "github.com/agentbox/agentbox/internal/engine/builtins" // the engines, as the daemon binary registers them (daemonmain)
)

// TestMain removes the binaries agentboxBinaries built, when it built them.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
