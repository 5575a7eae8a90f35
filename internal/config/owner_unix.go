//go:build unix

package config

import (
	"errors"
	"io/fs"
	"syscall"
)

func fileOwner(fi fs.FileInfo) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("no owner information")
	}
	return int(st.Uid), nil
}
