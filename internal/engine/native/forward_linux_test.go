package native_test

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestForwardsHandoff: a forward whose server takes connections handed over gets the box's
// TCP connection itself (box-init copies nothing) and talks to the client in the box on it.
func TestForwardsHandoff(t *testing.T) {
	t.Parallel()
	const port = 4712
	p, d := probePlan(t, []string{"forward", fmt.Sprintf("127.0.0.1:%d", port)}, nil)
	p.Network.Forwards = []plan.Forward{{Port: port, Socket: "/run/agentbox/echo.sock", Handoff: true}}
	ln, err := net.Listen("unix", filepath.Join(d.RunDir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hl := handoff.Listener(ln)
	handed := make(chan bool, 1)
	go func() {
		c, err := hl.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		_, tcp := c.RemoteAddr().(*net.TCPAddr)
		handed <- tcp
		c.Write([]byte("pong:" + string(b)))
	}()
	var got string
	runProbe(t, p, enginetest.Options{}, &got)
	if got != "pong:ping" {
		t.Errorf("through the forward: %q, want %q", got, "pong:ping")
	}
	if !<-handed {
		t.Error("the server was not handed the box's TCP connection")
	}
}
