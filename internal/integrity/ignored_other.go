//go:build !linux

package integrity

func (s *State) changedFiles(string, string, int64, *int, *[]string) error { return ErrNotSupported }

func (s *State) oldFolders(string, string, int64, *int, map[string]uint64) error {
	return ErrNotSupported
}
