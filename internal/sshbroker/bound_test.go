package sshbroker

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/connlimit"
)

// TestListenersDrawOnBound: every listener of a launch (its agent socket and each leg) is
// wrapped by Options.Bound, so the daemon's budget of broker connections (kept below its
// descriptor limit) counts the ssh broker's connections too: with a budget of one, a second
// connection to the agent socket is closed unanswered while the first is served, and served
// again once the first closes. Before, only the broker's own cap of DefaultMaxConns per socket
// bounded them, outside the daemon's budget.
func TestListenersDrawOnBound(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	budget := connlimit.NewBudget(1)
	var mu sync.Mutex
	var wrapped []string
	l, err := Start(Options{Config: Config{Hosts: []string{"example.com"}}, RunDir: dir,
		AgentSocket: filepath.Join(dir, "no-agent.sock"), KnownHosts: []string{}, Logger: (&logBuffer{}).logger(),
		Bound: func(ln net.Listener, what string, _ Refusal) net.Listener {
			mu.Lock()
			wrapped = append(wrapped, what)
			mu.Unlock()
			return connlimit.Listen(ln, connlimit.Config{Budget: budget})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mu.Lock()
	if !slices.Equal(wrapped, []string{"ssh agent", "ssh leg example.com"}) {
		t.Errorf("Bound wrapped %q, want the agent socket and the one leg", wrapped)
	}
	mu.Unlock()
	list := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(frame([]byte{msgRequestIDs})); err != nil {
			return err
		}
		_, err := readFrame(c)
		return err
	}
	first, err := net.Dial("unix", l.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	if err := list(first); err != nil {
		t.Fatalf("the first connection: %v", err)
	}
	second, err := net.Dial("unix", l.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := list(second); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection past the budget: %v, want it closed unanswered", err)
	}
	if budget.Used() != 1 {
		t.Errorf("the budget holds %d connections, want 1", budget.Used())
	}
	first.Close()
	waitFor(t, "the budget to free", func() bool {
		c, err := net.Dial("unix", l.AgentSocket())
		if err != nil {
			return false
		}
		defer c.Close()
		return list(c) == nil
	})
}
