// Command agentbox runs programs in a box: the CLI, the daemon, and the hidden re-exec entry
// points of the box itself (box-shim, box-init, …; see internal/boxmain).
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
