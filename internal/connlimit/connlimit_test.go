package connlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestListenBounds: a listener admits Max connections, answers the next through Refuse with
// the bound that refused it, admits again once one closes, and a shared Budget binds across
// listeners.
func TestListenBounds(t *testing.T) {
	budget := NewBudget(3)
	refused := make(chan Refusal, 8)
	listen := func(max int) net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := Listen(ln, Config{Max: max, Budget: budget, Refuse: func(c net.Conn, why Refusal) {
			c.Write([]byte("no\n"))
			refused <- why
		}})
		held := make(chan net.Conn, 8)
		t.Cleanup(func() {
			l.Close()
			for {
				select {
				case c := <-held:
					c.Close()
				default:
					return
				}
			}
		})
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				held <- c
			}
		}()
		return &heldListener{l, held}
	}
	a, b := listen(2), listen(0)
	dial := func(l net.Listener) net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	answer := func(c net.Conn) string {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(c)
		return string(got)
	}
	dial(a)
	dial(a)
	if got, why := answer(dial(a)), <-refused; got != "no\n" || why != ListenerFull {
		t.Errorf("third connection to a listener of 2: %q %v, want the refusal (ListenerFull)", got, why)
	}
	dial(b) // the budget's third
	if got, why := answer(dial(b)), <-refused; got != "no\n" || why != BudgetFull {
		t.Errorf("fourth connection against a budget of 3: %q %v, want the refusal (BudgetFull)", got, why)
	}
	if budget.Used() != 3 {
		t.Errorf("budget used %d, want 3", budget.Used())
	}
	c := <-a.(*heldListener).held
	c.Close()
	c.Close() // a second close releases nothing more
	if budget.Used() != 2 {
		t.Errorf("budget used %d after one close, want 2", budget.Used())
	}
	dial(a)
	select {
	case why := <-refused:
		t.Errorf("a connection after a close was refused (%v)", why)
	case <-a.(*heldListener).held:
	}
}

type heldListener struct {
	net.Listener
	held chan net.Conn
}
