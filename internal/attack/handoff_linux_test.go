package attack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/session"
	"golang.org/x/sys/unix"
)

// aimHandoff points the handoff attempts at sock, with relayURL as the in-box relay port and
// pairing as the box's, for the rest of the test.
func aimHandoff(t *testing.T, sock, relayURL, pairing string, wait time.Duration) {
	t.Helper()
	oldSock, oldWait := relaySocketPath, handoffWait
	relaySocketPath, handoffWait = sock, wait
	t.Cleanup(func() { relaySocketPath, handoffWait = oldSock, oldWait })
	t.Setenv("AGENTBOX_RELAY_URL", relayURL)
	t.Setenv("AGENTBOX_PAIRING", pairing)
}

// TestHandoffAttemptsHold runs the handoff attempts outside a box against the daemon's own
// relay channel (relay.Serve on a unix socket, a launch-scoped relay.Handler) and a port that
// hands its connections over as box-init does: every attempt holds. The end-to-end suite runs
// them from a real box against a real daemon (TestAttack/handoff-…).
func TestHandoffAttemptsHold(t *testing.T) {
	reg, err := session.Open(context.Background(), session.Config{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	_, pairing, err := reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "generic", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go relay.Serve(ln, &relay.Handler{Sessions: reg, Scope: session.Scope{LaunchID: "L1"}, Logf: t.Logf})

	// box-init's side of the relay port.
	port, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	go func() {
		for {
			c, err := port.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("unix", sock)
			if err == nil {
				err = handoff.Send(u.(*net.UnixConn), c.(*net.TCPConn))
				u.Close()
			}
			if err != nil {
				t.Errorf("hand over: %v", err)
			}
			c.Close()
		}
	}()
	aimHandoff(t, sock, "http://"+port.Addr().String(), pairing.Reveal(), 10*time.Second)

	for _, a := range handoffAttempts {
		t.Run(a.Name, func(t *testing.T) {
			o := a.Run(&Context{Targets: Targets{Workspace: t.TempDir()}})
			o.Attempt = a.Name
			for _, ev := range o.Evidence {
				t.Log(ev)
			}
			if err := a.Verdict(nil, o); err != nil {
				t.Error(err)
			}
			if a.Check != nil {
				if err := a.Check(nil, o); err != nil {
					t.Errorf("host-side check: %v", err)
				}
			}
		})
	}
}

// TestHandoffAttemptsSeeABreach aims the handoff attempts at a careless daemon that uses
// whatever descriptor it is handed (reads it, writes into it, accepts on it) and keeps it,
// and answers garbage with 200 on a connection it leaves open: every attempt reports the
// breach, each by the check written for it. An attempt that could not fail would prove
// nothing.
func TestHandoffAttemptsSeeABreach(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "relay.sock")
	takingDaemon(t, sock)
	port, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(notFound)}
	go srv.Serve(port)
	t.Cleanup(func() { srv.Close() })
	aimHandoff(t, sock, "http://"+port.Addr().String(), "abp_test", 300*time.Millisecond)

	want := map[string][]string{
		"handoff-pipe":         {"the daemon wrote", "the daemon read the rest", "SUCCEEDED"},
		"handoff-unix-socket":  {"the daemon read the rest", "the daemon wrote"},
		"handoff-file":         {"offset is", "changed after the handover"},
		"handoff-tcp-listener": {"once the box closed its listener", "SUCCEEDED"},
		"handoff-garbage":      {"binary garbage: the connection was still open", "the handover message without a descriptor: the connection was still open"},
	}
	for _, a := range handoffAttempts {
		t.Run(a.Name, func(t *testing.T) {
			o := a.Run(&Context{Targets: Targets{Workspace: t.TempDir()}})
			o.Attempt = a.Name
			for _, e := range o.Evidence {
				t.Log(e)
			}
			ev := strings.Join(o.Evidence, "\n")
			if o.Blocked {
				t.Fatalf("the attempt saw no breach:\n%s", ev)
			}
			if !strings.Contains(ev, "the relay answered a request with the box's pairing") {
				t.Errorf("the relay control did not pass, so the breach may be its:\n%s", ev)
			}
			for _, w := range want[a.Name] {
				if !strings.Contains(ev, w) {
					t.Errorf("evidence lacks %q:\n%s", w, ev)
				}
			}
			if a.Check != nil {
				if err := a.Check(nil, o); err == nil {
					t.Errorf("the host-side check found nothing")
				}
			}
		})
	}
}

// notFound answers as the relay does for a route no broker serves.
func notFound(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	w.Write(relay.ErrorJSON(api.CodeNotFound, "no relay route"))
}

// takingDaemon serves sock as a careless daemon would: it closes a handover's connection as
// the real one does, but first uses the descriptor (one read, one write, or accepting on a
// listener) and keeps it. A client of its own with a request gets the relay's 404; one with
// anything else gets 200 and a connection left open.
func takingDaemon(t *testing.T, sock string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kept []io.Closer
	keep := func(c io.Closer) {
		mu.Lock()
		kept = append(kept, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range kept {
			c.Close()
		}
	})
	take := func(fd int) {
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err == nil && v == 1 {
			f := os.NewFile(uintptr(fd), "taken")
			keep(f)
			l, err := net.FileListener(f)
			if err != nil {
				return
			}
			keep(l)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					keep(c)
				}
			}()
			return
		}
		keep(os.NewFile(uintptr(fd), "taken"))
		unix.Read(fd, make([]byte, 4096))
		unix.Write(fd, []byte("HTTP/1.1 200 OK\r\n\r\nserved by a careless daemon\n"))
	}
	serve := func(u *net.UnixConn) {
		buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4*4))
		n, oobn, _, _, err := u.ReadMsgUnix(buf, oob)
		if err != nil {
			u.Close()
			return
		}
		var fds []int
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			got, _ := unix.ParseUnixRights(&m)
			fds = append(fds, got...)
		}
		if len(fds) > 0 {
			for _, fd := range fds {
				take(fd)
			}
			u.Close()
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(buf[:n]), u)))
		if err != nil {
			io.WriteString(u, "HTTP/1.1 200 OK\r\n\r\n")
			keep(u)
			return
		}
		req.Body.Close()
		body := relay.ErrorJSON(api.CodeNotFound, "no relay route")
		fmt.Fprintf(u, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		u.Close()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c.(*net.UnixConn))
		}
	}()
}
