// Command agentbox is the CLI of agentbox, which runs programs in a box. It links no daemon:
// `agentbox daemon`, and the commands that need the configuration's parsers (config,
// profiles, selftest, wrap), run the daemon binary (cmd/agentbox-daemon) in its place
// (internal/cli).
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
)

func main() { os.Exit(cli.Execute()) }
