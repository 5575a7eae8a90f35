//go:build !linux

package integrity

func (s *State) changedFiles(string, string, int64, *int, *[]string) error { return ErrNotSupported }
