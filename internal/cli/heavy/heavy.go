// Package heavy has the agentbox commands only the daemon binary (cmd/agentbox-daemon) links:
// `config`, `profiles`, `selftest` and `wrap`, which need the configuration's parsers and
// checks (two YAML libraries, the brokers' configuration types), the profiles or the attack
// battery. The CLI (cmd/agentbox), which every `agentbox run` starts, leaves them out so that
// it starts quickly, and runs the daemon binary in its place for them (cli.HeavyCommands).
package heavy

import "github.com/spf13/cobra"

// Commands returns the commands of cli.HeavyCommands, in its order.
func Commands() []*cobra.Command {
	return []*cobra.Command{newConfigCmd(), newProfilesCmd(), newSelftestCmd(), newWrapCmd()}
}
