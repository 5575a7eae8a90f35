//go:build unix

package plan

import (
	"os"
	"syscall"
)

// links returns the number of hard links of the file fi describes (st_nlink); 1 when unknown.
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
