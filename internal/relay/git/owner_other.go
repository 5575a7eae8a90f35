//go:build !unix

package git

import (
	"errors"
	"io/fs"
)

// checkSecretFile refuses every credential file: ownership is only checked on unix.
func checkSecretFile(fs.FileInfo, int) error {
	return errors.New("cannot be checked for ownership on this platform; use command")
}
