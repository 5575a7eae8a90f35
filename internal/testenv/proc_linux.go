package testenv

import "github.com/agentbox/agentbox/internal/linux/proc"

// IsZombie reports whether process pid has exited (a zombie, or no longer listed in /proc).
func IsZombie(pid int) bool {
	st, err := proc.State(pid)
	return err != nil || st == 'Z'
}
