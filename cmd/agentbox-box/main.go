// Command agentbox-box is agentbox's box helper: the daemon starts each box's shim from it, and
// the shim starts box-init from it. It holds only what builds and runs a box, so that the
// processes of a launch start in a fraction of the time the full agentbox binary takes. It is
// installed beside agentbox (or in ../libexec/agentbox/) and is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/agentbox/agentbox/internal/boxmain"
)

func main() {
	if len(os.Args) > 1 {
		if entry, ok := boxmain.Entries[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	fmt.Fprintln(os.Stderr, "agentbox-box is agentbox's box helper, started by the agentbox daemon; it is not run by hand (see `agentbox --help`).")
	os.Exit(2)
}
