package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/safesocket"
	"github.com/agentbox/agentbox/internal/warmup"
	"golang.org/x/sys/unix"
)

// Main is the entry point of `agentbox box-shim LAUNCHDIR`. It reports readiness on fd 3 (one
// line, "ready" or "error: …") and returns 0 once the launch has ended and its status is written.
func Main(args []string) int {
	lg := log.New(os.Stderr, fmt.Sprintf("box-shim[%d]: ", os.Getpid()), log.LstdFlags|log.Lmicroseconds)
	var ready *os.File
	if _, err := unix.FcntlInt(3, unix.F_GETFD, 0); err == nil {
		ready = os.NewFile(3, "ready")
	}
	report := func(err error) {
		if ready == nil {
			return
		}
		msg := "ready\n"
		if err != nil {
			msg = "error: " + oneLine(err.Error()) + "\n"
		}
		if _, werr := ready.WriteString(msg); werr != nil {
			lg.Printf("report readiness: %v", werr)
		}
		ready.Close()
		ready = nil
	}
	if os.Geteuid() == 0 {
		// Run by root, the box's processes are host root without capabilities, which would
		// read every root-only file of the system folders as their owner. The boxes this
		// thread starts (run keeps it for good, as Pdeathsig needs) see those folders through
		// idmapped mounts in which host root owns nothing, so that the kernel's own checks
		// keep root-only files closed (internal/linux/idmap). A view that cannot be made
		// refuses every launch of this shim.
		runtime.LockOSThread()
		if err := idmap.Enter(plan.DefaultSystemDirs); err != nil {
			report(err)
			lg.Print(err)
			return 1
		}
	}
	var pre *prestarted
	var stopSigs chan os.Signal
	var handed *os.File
	if len(args) == 1 && args[0] == spareArg {
		// A spare: start the default engine's default box ahead (on the thread that stays the
		// box's parent, as run keeps it), wait for the launch directory on fd 3, then log into
		// its shim.log.
		if ready == nil {
			return 2
		}
		runtime.LockOSThread()
		var perr error
		if pre, perr = prestart(engine.Default); perr != nil {
			pre = nil // the launch starts its box the ordinary way (and says why in its log)
		}
		// The signal dispositions run sets, set now: each costs a round trip to the runtime's
		// signal thread. SIGTERM and SIGINT end a spare that has no launch yet, as they would
		// without a handler.
		stopSigs = subscribeSignals()
		// And what it encodes and decodes for its launch: its configuration, its clients'
		// hellos and replies, the daemon's requests and events, the status and the exit frame.
		warmup.Do(&Config{}, &console.Hello{}, &console.Reply{}, &Request{}, &Event{}, &Status{}, &console.Exit{})
		type line struct {
			s   string
			ln  *os.File // the launch's socket, listening (Spare.Hand); nil from a caller that sends none
			err error
		}
		lc := make(chan line, 1)
		go func() {
			s, ln, err := readLaunch(ready)
			lc <- line{s, ln, err}
		}()
		var l line
		select {
		case l = <-lc:
		case <-stopSigs:
			l.err = errors.New("stopped")
		}
		if l.err != nil {
			if pre != nil {
				pre.box.Discard()
			}
			return 0 // closed or stopped without a launch: not needed
		}
		dir := strings.TrimSuffix(l.s, "\n")
		handed = l.ln
		logf, err := os.OpenFile(filepath.Join(dir, launchdir.ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			report(fmt.Errorf("open %s: %w", launchdir.ShimLogFile, err))
			return 1
		}
		if err := unix.Dup3(int(logf.Fd()), 2, 0); err != nil {
			report(fmt.Errorf("log to %s: %w", launchdir.ShimLogFile, err))
			return 1
		}
		logf.Close()
		args = []string{dir}
		if perr != nil {
			lg.Printf("prestart box-init: %v", perr)
		}
	}
	if len(args) != 1 {
		err := errors.New("usage: agentbox box-shim LAUNCHDIR")
		report(err)
		lg.Print(err)
		return 2
	}
	if stopSigs == nil {
		stopSigs = subscribeSignals()
	}
	if err := run(args[0], lg, report, pre, stopSigs, handed); err != nil {
		report(err)
		lg.Print(err)
		return 1
	}
	return 0
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// subscribeSignals sets the shim's signal dispositions and returns the channel of those that
// stop its box (SIGTERM, SIGINT). The shim has no terminal; SIGHUP must not kill it. SIGPIPE on
// sockets is an error return.
func subscribeSignals() chan os.Signal {
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	return sigs
}

// readLaunch reads what the daemon hands a spare (Spare.Hand) on its socket f: the launch
// directory, one line, and with it the launch's socket, listening (nil when none came). More
// than one descriptor, or a line longer than 4 KiB, is refused.
func readLaunch(f *os.File) (line string, ln *os.File, err error) {
	var buf []byte
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	b := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for len(buf) == 0 || buf[len(buf)-1] != '\n' {
		n, oobn, _, _, err := unix.Recvmsg(int(f.Fd()), b[:cap(b)-len(buf)], oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			return "", nil, err
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return "", nil, err
			}
			for _, m := range msgs {
				if r, err := unix.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
		if n == 0 {
			return "", nil, io.EOF
		}
		buf = append(buf, b[:n]...)
		if len(buf) >= cap(b) && buf[len(buf)-1] != '\n' {
			return "", nil, errors.New("launch line too long")
		}
	}
	switch len(fds) {
	case 0:
		return string(buf), nil, nil
	case 1:
		ln = os.NewFile(uintptr(fds[0]), launchdir.SocketFile)
		fds = nil
		return string(buf), ln, nil
	}
	return "", nil, fmt.Errorf("%d descriptors with the launch, want at most 1", len(fds))
}

// handedListener returns the listening socket f (readLaunch) as the shim's listener at sock,
// removed when it closes.
func handedListener(f *os.File, sock string) (*net.UnixListener, error) {
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("the launch's socket: %w", err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok || ul.Addr().String() != sock {
		l.Close()
		return nil, fmt.Errorf("the launch's socket is %s, want %s", l.Addr(), sock)
	}
	ul.SetUnlinkOnClose(true)
	return ul, nil
}

// refuseHanded ends a launch whose shim failed before it could serve it, on the socket handed
// over with it (ln; nil: err is returned as it is). The daemon gets the reason on the readiness
// line, and so does the client, which may be connected already: each connection is refused with
// it until an attaching client has been, or DefaultAttachTimeout has passed.
func refuseHanded(ln *net.UnixListener, lg *log.Logger, report func(error), err error) error {
	if ln == nil {
		return err
	}
	report(err)
	lg.Printf("refusing the launch's clients: %v", err)
	defer ln.Close()
	ln.SetDeadline(time.Now().Add(DefaultAttachTimeout))
	for {
		conn, aerr := ln.AcceptUnix()
		if aerr != nil {
			return err
		}
		if refuseStart(conn, lg, err) {
			return err
		}
	}
}

// refuseStart refuses conn with the launch's start-up failure cause and reports whether it was
// an attaching client's (a peer refused by the peer check gets only that).
func refuseStart(conn *net.UnixConn, lg *log.Logger, cause error) (attach bool) {
	if err := safesocket.CheckPeer(conn); err != nil {
		lg.Printf("refused connection: %v", err)
		refuseConn(conn, CodeForbidden, "refused: "+err.Error())
		return false
	}
	conn.SetReadDeadline(time.Now().Add(writeTimeout))
	line, err := console.ReadLine(bufio.NewReader(conn))
	var h console.Hello
	if err == nil {
		json.Unmarshal(line, &h)
	}
	refuseConn(conn, engine.CodeBoxSetupFailed, "start box shim: "+cause.Error())
	return h.Role == console.RoleAttach
}
