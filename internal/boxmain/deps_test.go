package boxmain

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHelperStaysSmall guards what the box helper (cmd/agentbox-box) links: each process of a
// launch starts from it, and Go's start-up cost grows with the binary, so the daemon's,
// the CLI's and the relay's dependencies must not creep in through a shared package.
func TestHelperStaysSmall(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/agentbox/agentbox/cmd/agentbox-box").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	for _, banned := range []string{
		"net/http", "crypto/tls", "database/sql", "modernc.org/sqlite", "github.com/spf13/cobra",
		"github.com/goccy/go-yaml", "golang.org/x/crypto/ssh",
		"github.com/agentbox/agentbox/internal/daemon", "github.com/agentbox/agentbox/internal/store",
		"github.com/agentbox/agentbox/internal/relay", "github.com/agentbox/agentbox/internal/config",
	} {
		if deps[banned] {
			t.Errorf("the box helper links %s", banned)
		}
	}
	if !deps["github.com/agentbox/agentbox/internal/shim"] || !deps["github.com/agentbox/agentbox/internal/engine/native"] {
		t.Errorf("the box helper lacks the shim or the native engine:\n%s", out)
	}
}
