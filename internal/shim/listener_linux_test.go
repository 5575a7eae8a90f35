package shim_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/shim"
)

// TestRelayListenerHeld: a shim holds the relay listener it is handed (HoldListener) while its
// box runs, so its port cannot be bound after the daemon closed its own copy; TakeListener
// gives back a working duplicate of the very socket; the box's processes do not inherit it;
// what is not a listening loopback TCP socket is refused; the port is free once the launch
// has ended.
func TestRelayListenerHeld(t *testing.T) {
	dir := launch(t, shim.Config{Detached: true}, sh(`while :; do sleep 0.05; done`))
	waitRunning(t, dir)
	var nf *console.ReplyError
	if _, err := shim.TakeListener(dir); !errors.As(err, &nf) || nf.Code != api.CodeNotFound {
		t.Fatalf("TakeListener from a shim that holds none = %v, want %s", err, api.CodeNotFound)
	}
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	if err := shim.HoldListener(dir, ul.(*net.UnixListener)); err == nil || !strings.Contains(err.Error(), "not a listening TCP socket") {
		t.Errorf("HoldListener of a unix listener = %v, want it refused", err)
	}
	wild, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer wild.Close()
	if err := shim.HoldListener(dir, wild.(*net.TCPListener)); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("HoldListener of a listener on every address = %v, want it refused", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := shim.HoldListener(dir, ln.(*net.TCPListener)); err != nil {
		t.Fatal(err)
	}
	ino := socketInode(t, ln.(*net.TCPListener))
	ln.Close() // the daemon's copy gone: the shim's holds the port
	if l2, err := net.Listen("tcp", addr); err == nil {
		l2.Close()
		t.Fatalf("%s could be bound again while the shim holds its listener", addr)
	}
	st, err := shim.Query(dir)
	if err != nil {
		t.Fatal(err)
	}
	if held := fdsOf(t, st.BoxPid, ino); held != "" {
		t.Errorf("the box's process %d holds the relay listener (%s)", st.BoxPid, held)
	}
	if held := fdsOf(t, st.ShimPid, ino); held == "" {
		t.Errorf("the shim (pid %d) does not hold the relay listener", st.ShimPid)
	}

	// A connection that came while no one accepted waits, and the taken copy accepts it.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("connect while only the shim holds the listener: %v", err)
	}
	defer c.Close()
	f, err := shim.TakeListener(dir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if back.Addr().String() != addr {
		t.Fatalf("taken back listener on %s, want %s", back.Addr(), addr)
	}
	if a, err := back.Accept(); err != nil {
		t.Fatalf("accept on the taken listener: %v", err)
	} else {
		a.Close()
	}
	back.Close()

	w, err := shim.Watch(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	drain(t, w)
	w.Close()
	waitFor(t, "the port free after the launch ended", func() bool {
		l3, err := net.Listen("tcp", addr)
		if err == nil {
			l3.Close()
		}
		return err == nil
	}, nil)
}

func socketInode(t *testing.T, ln *net.TCPListener) string {
	t.Helper()
	rc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ino uint64
	rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(fd), &st); err == nil {
			ino = st.Ino
		}
	})
	return fmt.Sprintf("socket:[%d]", ino)
}

// fdsOf returns the descriptor of pid that is link (its /proc/pid/fd entry), or "".
func fdsOf(t *testing.T, pid int, link string) string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == link {
			return fd.Name()
		}
	}
	return ""
}
