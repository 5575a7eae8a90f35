package engine

import (
	"encoding/json"
	"errors"
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

// RecvEvent reads one event and any fds attached to it. It returns ErrControlClosed once the
// other side is gone and every event it sent has been read.
//
// A peer that closed its end with a message of ours unread (box-init failing to build the box
// after the shim sent EventGo) makes the kernel report ECONNRESET once, before the events the
// peer sent and that are still queued (sock_error is checked ahead of the receive queue): that
// report is passed over, so the peer's last event — its EventError — is still read.
func RecvEvent(f *os.File) (Event, []int, error) {
	buf := make([]byte, 64*1024)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var n, oobn int
	var err error
	for reset := false; ; {
		n, oobn, _, _, err = unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) || (errors.Is(err, unix.ECONNRESET) && !reset) {
			reset = reset || errors.Is(err, unix.ECONNRESET)
			continue
		}
		break
	}
	if errors.Is(err, unix.ECONNRESET) {
		return Event{}, nil, ErrControlClosed
	}
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
