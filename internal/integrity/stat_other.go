//go:build !linux

package integrity

import (
	"io/fs"
	"os"
)

func identity(fs.FileInfo) (dev, ino uint64, ctime int64) { return 0, 0, 0 }

func openNoFollow(string) (*os.File, error) { return nil, ErrNotSupported }

func searchable(path string) bool { _, err := os.Stat(path); return err == nil }
