// Command agentbox is the CLI of agentbox, which runs programs in a box. It links no daemon:
// `agentbox daemon` runs the daemon binary (cmd/agentbox-daemon) in its place (internal/cli).
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
)

func main() {
	if len(os.Args) > 1 {
		if entry, ok := hiddenEntries[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	os.Exit(cli.Execute())
}
