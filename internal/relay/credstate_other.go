//go:build !linux

package relay

import (
	"io/fs"
	"time"
)

// fileState is what a stat says of a version of a file. Off Linux nothing is reused: the
// credential file is read at every request.
type fileState struct{}

func fileStateOf(fs.FileInfo) (fileState, bool) { return fileState{}, false }

func (fileState) changed() time.Time { return time.Time{} }
