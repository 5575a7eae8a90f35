package heavy

import (
	"testing"

	"github.com/agentbox/agentbox/internal/cli"
)

// TestCommandsMatchStubs: the CLI lists the heavy commands (and hands them over) by
// cli.HeavyCommands; every command here is in it, in its order, with the same one-line help,
// so that `agentbox --help` of both binaries is the same.
func TestCommandsMatchStubs(t *testing.T) {
	cmds := Commands()
	if len(cmds) != len(cli.HeavyCommands) {
		t.Fatalf("%d heavy commands, cli.HeavyCommands lists %d", len(cmds), len(cli.HeavyCommands))
	}
	for i, c := range cmds {
		h := cli.HeavyCommands[i]
		if c.Name() != h.Name || c.Short != h.Short {
			t.Errorf("command %d: %q %q, cli.HeavyCommands has %q %q", i, c.Name(), c.Short, h.Name, h.Short)
		}
	}
}
