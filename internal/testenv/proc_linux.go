package testenv

import (
	"os"
	"strconv"
	"strings"
)

// IsZombie reports whether process pid has exited (a zombie, or no longer listed in /proc).
func IsZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
