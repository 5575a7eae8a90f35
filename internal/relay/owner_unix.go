//go:build unix

package relay

import (
	"fmt"
	"io/fs"
	"syscall"
)

// CheckSecretFile refuses a secret file that is not a regular file owned by uid and
// closed to group and others.
func CheckSecretFile(fi fs.FileInfo, uid int) error {
	if err := checkFileMode(fi); err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("has no owner information")
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("is owned by uid %d, not by the daemon's user (uid %d): chown it to yourself", st.Uid, uid)
	}
	return nil
}
