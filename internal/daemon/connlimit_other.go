//go:build !unix

package daemon

import "github.com/agentbox/agentbox/internal/connlimit"

// processConnBudget is connBudget for a descriptor limit of 1024 where there is no
// RLIMIT_NOFILE to read.
func processConnBudget() *connlimit.Budget { return connBudget(1024) }
