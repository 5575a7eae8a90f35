//go:build !unix

package relay

import (
	"errors"
	"io/fs"
)

// CheckSecretFile refuses every credential file: ownership is only checked on unix.
func CheckSecretFile(fs.FileInfo, int) error {
	return errors.New("cannot be checked for ownership on this platform; use command")
}
