package harnessstate

import (
	"os"
	"strings"
	"testing"
)

// TestMain runs the test binary as the helper when the tests start it so (helperExe is the
// test binary, as it is the daemon's own binary in the daemon).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ScrubCommand {
		os.Exit(ScrubMain(os.Args[2:]))
	}
	if w := os.Getenv(openCodeWriterEnv); w != "" {
		path, mode, _ := strings.Cut(w, " ")
		os.Exit(openCodeWriter(path, mode))
	}
	os.Exit(m.Run())
}
