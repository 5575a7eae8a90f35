// Command agentbox-daemon is agentbox's daemon binary: the per-user daemon, and everything the
// CLI (cmd/agentbox) leaves out so that it starts quickly — SQLite, the relays, the brokers,
// the engines. It has the CLI's commands too; `agentbox daemon` runs it in its own place, and
// `agentbox doctor` for a probe. It is installed beside agentbox (or in ../libexec/agentbox/)
// and is not run by hand.
package main

import (
	"os"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/daemonmain"
)

func main() {
	if len(os.Args) > 1 {
		if entry, ok := daemonmain.Entries()[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	daemonmain.Install()
	os.Exit(cli.Execute())
}
