//go:build !linux

package integrity

func depIdentity(string) (DepFolder, error) { return DepFolder{}, ErrNotSupported }

func emptyDir(string) bool { return false }

func changedWithin(string, int64, *int) (string, error) { return "", ErrNotSupported }
