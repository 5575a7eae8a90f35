//go:build !unix

package config

import "io/fs"

func fileOwner(fs.FileInfo) (int, error) { return 0, ErrNotSupported }
