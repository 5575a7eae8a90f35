package integrity

import (
	"fmt"
	"os"
	"sort"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// readDirNames returns the sorted names in dir.
func readDirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}
