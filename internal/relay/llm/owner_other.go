//go:build !unix

package llm

import (
	"fmt"
	"io/fs"
)

// checkCredentialFile refuses every credential file: file ownership is only checked on unix.
func checkCredentialFile(fs.FileInfo, int) error {
	return fmt.Errorf("cannot be checked for ownership on this platform; use credential.command")
}
