package engine

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	linuxfds "github.com/agentbox/agentbox/internal/linux/fds"
)

// ControlPair returns a SOCK_SEQPACKET socketpair: the shim keeps shimEnd, the box inherits boxEnd.
func ControlPair() (shimEnd, boxEnd *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "control-shim"), os.NewFile(uintptr(fds[1]), "control-box"), nil
}

// SendEvent sends ev on the control socket, with fds attached as SCM_RIGHTS.
func SendEvent(f *os.File, ev Event, fds ...int) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(int(f.Fd()), b, oob, nil, 0); err != nil {
		return fmt.Errorf("send %s event: %w", ev.Kind, err)
	}
	return nil
}

// RecvEvent reads one event and any fds attached to it. It returns io.EOF-like errors
// (unix.ECONNRESET or a zero-length read reported as ErrControlClosed) when the box side is gone.
func RecvEvent(f *os.File) (Event, []int, error) {
	buf := make([]byte, 64*1024)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return Event{}, nil, fmt.Errorf("receive control event: %w", err)
	}
	if n == 0 && oobn == 0 {
		return Event{}, nil, ErrControlClosed
	}
	var fds []int
	if oobn > 0 {
		fds = linuxfds.Rights(oob[:oobn])
	}
	var ev Event
	if err := json.Unmarshal(buf[:n], &ev); err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return Event{}, nil, fmt.Errorf("decode control event: %w", err)
	}
	return ev, fds, nil
}
