package sshbroker

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/sshbroker/sshtest"
)

// Short names for the rig's parts.
type (
	sshKey    = sshtest.Key
	userAgent = sshtest.Agent
	gitServer = sshtest.Server
)

var (
	need         = sshtest.Need
	shortTempDir = sshtest.ShortTempDir
	run          = sshtest.Run
	runErr       = sshtest.RunErr
	waitFor      = sshtest.WaitFor
	keygen       = sshtest.Keygen
	startAgent   = sshtest.StartAgent
	startSSHD    = sshtest.StartSSHD
	gitIdentity  = sshtest.GitIdentity
	writeRandom  = sshtest.WriteRandom
	hashName     = sshtest.HashName
)

// logBuffer collects the broker's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines containing every one of subs.
func (l *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// boxForward stands in for box-init's forward: a loopback TCP port relayed to a leg socket.
// When gate is set, it pauses the box-to-host direction after gateAfter bytes, closes
// reached, and goes on once gate is closed.
type boxForward struct {
	port      int
	gateAfter int64
	reached   chan struct{}
	gate      chan struct{}
}

func startForward(t testing.TB, socket string, fw *boxForward) *boxForward {
	t.Helper()
	if fw == nil {
		fw = &boxForward{}
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fw.port = ln.Addr().(*net.TCPAddr).Port
	var once sync.Once
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(c, u)
					c.(*net.TCPConn).CloseWrite()
					close(done)
				}()
				var n int64
				buf := make([]byte, 32<<10)
				for {
					k, err := c.Read(buf)
					if k > 0 {
						if _, werr := u.Write(buf[:k]); werr != nil {
							break
						}
						n += int64(k)
						if fw.gate != nil && n >= fw.gateAfter {
							once.Do(func() { close(fw.reached); <-fw.gate })
						}
					}
					if err != nil {
						u.(*net.UnixConn).CloseWrite()
						break
					}
				}
				<-done
			}()
		}
	}()
	return fw
}

// sshCommand returns GIT_SSH_COMMAND for host-side use of a launch's generated ssh_config:
// the in-box paths and port are replaced on the command line (which wins over the file).
func sshCommand(runDir string, port int) string {
	return fmt.Sprintf("ssh -F %s -o Port=%d -o UserKnownHostsFile=%s -o IdentityAgent=%s",
		filepath.Join(runDir, SSHConfigName), port, filepath.Join(runDir, KnownHostsName), filepath.Join(runDir, AgentSocketName))
}
