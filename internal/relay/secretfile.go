package relay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ReadSecretFile reads a host-side secret (a gateway or git credential) from path, refusing a
// file that is not regular, not owned by uid, or open to group or others, and one longer than
// max bytes. Its errors read as the end of a sentence that names the file ("does not exist",
// "has mode 0644, …"), for the caller to prefix with the config key and path.
func ReadSecretFile(path string, uid, max int) ([]byte, error) {
	b, _, err := ReadSecretFileInfo(path, uid, max)
	return b, err
}

// ReadSecretFileInfo is ReadSecretFile, and also returns what the open file's stat said when
// it was checked.
func ReadSecretFileInfo(path string, uid, max int) ([]byte, fs.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errors.New("does not exist")
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if err := CheckSecretFile(fi, uid); err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, nil, err
	}
	if len(b) > max {
		return nil, nil, fmt.Errorf("holds more than %d bytes", max)
	}
	return b, fi, nil
}

// CleanSecret returns the one-line secret in b (a credential file's content or a credential
// command's output) with surrounding white space trimmed. It refuses more than max bytes, an
// empty secret and control characters; its errors read as the end of a sentence naming the
// secret's source ("gives an empty secret").
func CleanSecret(b []byte, max int) (string, error) {
	if len(b) > max {
		return "", fmt.Errorf("gives more than %d bytes", max)
	}
	v := string(bytes.TrimSpace(b))
	if v == "" {
		return "", errors.New("gives an empty secret")
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", errors.New("gives a secret with control characters (one line expected)")
	}
	return v, nil
}

// checkFileMode refuses what is not a regular file or is open to group or others.
func checkFileMode(fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("is not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("has mode %04o, which lets other users read it: run chmod 600 on it", perm)
	}
	return nil
}
