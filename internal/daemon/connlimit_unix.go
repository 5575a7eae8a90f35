//go:build unix

package daemon

import (
	"syscall"

	"github.com/agentbox/agentbox/internal/connlimit"
)

// processConnBudget is connBudget for this process's soft descriptor limit (Go raises it to
// the hard limit at start).
func processConnBudget() *connlimit.Budget {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return connBudget(1024)
	}
	return connBudget(rl.Cur)
}
