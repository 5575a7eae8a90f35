//go:build !linux

package enginetest

import (
	"fmt"
	"os"
)

func probeMain(args []string) int {
	fmt.Fprintln(os.Stderr, "the enginetest probe runs on Linux only")
	return 2
}
