package testenv

import (
	"fmt"
	"os"
	"testing"
)

// AllowNoBoxesEnv names the variable that lets the box suites skip on a host that cannot build
// boxes (no user namespaces, no tmpfs mount, …). Unset, such a host fails them: `make test` must
// never pass on a machine where nothing it claims was exercised.
const AllowNoBoxesEnv = "AGENTBOX_TEST_ALLOW_NO_BOXES"

// NoBoxes reports that this host cannot build what the test needs to build a box. It fails the
// test, naming the reason and the opt-out, unless AllowNoBoxesEnv is set to 1, when it skips.
func NoBoxes(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv(AllowNoBoxesEnv) == "1" {
		t.Skipf("%s (%s=1)", why, AllowNoBoxesEnv)
	}
	t.Fatalf("%s; boxes cannot be built on this host (run `agentbox doctor`), or set %s=1 to skip the box suites deliberately", why, AllowNoBoxesEnv)
}
