//go:build !linux

package safesocket

import (
	"io/fs"
	"net"
	"os"
)

func fileOwner(fs.FileInfo) (int, error) { return 0, ErrNotSupported }

// PeerCred needs Linux (SO_PEERCRED); elsewhere it returns ErrNotSupported.
func PeerCred(*net.UnixConn) (pid, uid, gid int, err error) { return 0, 0, 0, ErrNotSupported }

// ConnInSameUserNS needs Linux; elsewhere it returns ErrNotSupported.
func ConnInSameUserNS(*net.UnixConn) (bool, error) { return false, ErrNotSupported }

// PeerInSameUserNS needs Linux; elsewhere it returns ErrNotSupported.
func PeerInSameUserNS(int) (bool, error) { return false, ErrNotSupported }

func openLockFile(string) (*os.File, error) { return nil, ErrNotSupported }

func flock(*os.File, bool) error { return ErrNotSupported }

func unflock(*os.File) {}
