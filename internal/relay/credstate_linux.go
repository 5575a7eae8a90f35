package relay

import (
	"io/fs"
	"syscall"
	"time"
)

// fileState is what a stat says of a version of a file (see CredentialSource.readFile).
type fileState struct {
	dev, ino       uint64
	mode, uid, gid uint32
	size           int64
	mtime, ctime   syscall.Timespec
}

func fileStateOf(fi fs.FileInfo) (fileState, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileState{}, false
	}
	return fileState{dev: uint64(st.Dev), ino: uint64(st.Ino), mode: uint32(st.Mode), uid: st.Uid, gid: st.Gid,
		size: int64(st.Size), mtime: st.Mtim, ctime: st.Ctim}, true
}

// changed is the file's change time (ctime).
func (f fileState) changed() time.Time { return time.Unix(f.ctime.Unix()) }
