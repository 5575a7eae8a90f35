package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// UserSuitesEnv names the variable scripts/test.sh sets to 1 when, run as root, it runs the
// box suites again as an ordinary user after the root pass.
const UserSuitesEnv = "AGENTBOX_TEST_USER_SUITES"

// AgentsDirEnv names the folder scripts/install-agents.sh installed the real agent CLIs in;
// unset, DefaultAgentsDir (where .ci/run installs them).
const AgentsDirEnv = "AGENTBOX_AGENTS_DIR"

// AgentsRequiredEnv names the variable .ci/run sets to 1: a real agent's test then skips only
// when scripts/install-agents.sh recorded that the package registry did not give its CLI
// (DIR/NAME.unavailable), and fails when the CLI is missing for any other reason.
const AgentsRequiredEnv = "AGENTBOX_AGENTS_REQUIRED"

// DefaultAgentsDir is where .ci/run installs the real agent CLIs.
const DefaultAgentsDir = "/opt/agentbox-ci-agents"

// AgentCLI returns the path of the real agent CLI name (claude, codex, …) that
// scripts/install-agents.sh installed, or skips the test when there is none. As root, when the
// suites run again as an ordinary user (UserSuitesEnv=1), it skips: the agents' CLIs run as the
// user who starts them, agentbox is deployed for an ordinary user, and their tests (tens of CPU
// seconds each for Gemini CLI and OpenCode) run in that pass only; the kernel paths that differ
// for root are the other tests' (uid maps, capabilities, root-owned files).
func AgentCLI(t testing.TB, name string) string {
	t.Helper()
	if os.Geteuid() == 0 && os.Getenv(UserSuitesEnv) == "1" {
		t.Skipf("the real agent CLIs are tested in this run as the ordinary user (%s=1)", UserSuitesEnv)
	}
	return InstalledAgentCLI(t, name)
}

// InstalledAgentCLI is AgentCLI for a suite that runs in the root pass only (no box: a
// profile's wiring of the CLI, run unboxed): it skips only when the CLI is not installed.
func InstalledAgentCLI(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv(AgentsDirEnv)
	if dir == "" {
		dir = DefaultAgentsDir
	}
	bin := filepath.Join(dir, "bin", name)
	if st, err := os.Stat(bin); err != nil || st.Mode().Perm()&0o111 == 0 {
		if why, rerr := os.ReadFile(filepath.Join(dir, name+".unavailable")); rerr == nil {
			t.Skipf("no %s in %s: scripts/install-agents.sh could not fetch it from the package registry (%s)", name, dir, bytes.TrimSpace(why))
		}
		if os.Getenv(AgentsRequiredEnv) == "1" {
			t.Fatalf("no %s in %s, and scripts/install-agents.sh recorded no registry failure for it (%s=1: only that may skip the real agents' tests): %v", name, dir, AgentsRequiredEnv, err)
		}
		t.Skipf("no %s in %s (install the real agent CLIs with scripts/install-agents.sh DIR and set %s=DIR): %v", name, dir, AgentsDirEnv, err)
	}
	return bin
}

// RequireTool fails the test when a tool a real agent's test needs (node for Gemini CLI) is
// missing where AgentsRequiredEnv is 1, and skips it, saying why, elsewhere.
func RequireTool(t testing.TB, why string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv(AgentsRequiredEnv) == "1" {
		t.Fatalf("%s (%s=1): %v", why, AgentsRequiredEnv, err)
	}
	t.Skipf("%s: %v", why, err)
}
