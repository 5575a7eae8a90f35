// Package connlimit bounds the connections the daemon's broker listeners hold open: each
// listener has a cap of its own (a launch's relay, egress or ssh socket), and every listener
// draws on one Budget, sized below the process's descriptor limit, so that a flood of idle
// connections leaves the daemon descriptors for its own work (launches, the store, integrity
// clean-up). A connection past either bound is refused at once: Refuse is called on it (an
// HTTP listener answers 503 with the reason), then it is closed.
package connlimit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a count of connections shared by listeners. The zero value admits nothing; a nil
// *Budget admits everything.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of n connections.
func NewBudget(n int) *Budget { return &Budget{max: int64(n)} }

func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	if b.used.Add(1) > b.max {
		b.used.Add(-1)
		return false
	}
	return true
}

func (b *Budget) give() {
	if b != nil {
		b.used.Add(-1)
	}
}

// Used returns the connections held against b.
func (b *Budget) Used() int {
	if b == nil {
		return 0
	}
	return int(b.used.Load())
}

// Refusal says which bound refused a connection.
type Refusal int

const (
	// ListenerFull: the listener holds Config.Max connections.
	ListenerFull Refusal = iota + 1
	// BudgetFull: the daemon's shared budget is spent.
	BudgetFull
)

// Config says how a Listener bounds its connections.
type Config struct {
	// Max is the most connections the listener holds open at once. Zero means no cap of its own.
	Max int
	// Budget is drawn on by every connection held; nil means none.
	Budget *Budget
	// Refuse, when set, is called with a connection that is refused, before it is closed, with
	// a write deadline of 100 ms set on c: it should write a short answer and never read. It
	// runs on a goroutine of its own after the client's first bytes were read (or 50 ms
	// passed): a connection handed over by box-init (package handoff) is known only then.
	Refuse func(c net.Conn, why Refusal)
}

// Listen returns ln bounded by cfg. Accept returns only admitted connections; closing one
// releases its place (once, however often it is closed).
func Listen(ln net.Listener, cfg Config) net.Listener {
	return &listener{Listener: ln, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg  Config
	open atomic.Int64
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		why := Refusal(0)
		if n := l.open.Add(1); l.cfg.Max > 0 && n > int64(l.cfg.Max) {
			why = ListenerFull
		} else if !l.cfg.Budget.take() {
			why = BudgetFull
		}
		if why == 0 {
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		if l.cfg.Refuse == nil {
			c.Close()
			continue
		}
		Refuse(c, func(c net.Conn) { l.cfg.Refuse(c, why) })
	}
}

// refusing bounds the refused connections held open at once (in all listeners) while they are
// answered and what their clients sent is read and dropped: closing a socket with unread data
// resets it, and the client may then lose the answer before it reads it. Past the bound a
// refused connection is closed at once, unanswered, so that a flood holds at most this many
// descriptors beyond the bounds.
var refusing = make(chan struct{}, 64)

// lingerFor is how long a refused connection is read from, after its answer, before it is
// closed.
const lingerFor = time.Second

// Refuse answers a refused connection with answer (nil: none) and closes it, on a goroutine of
// its own: it reads the client's first bytes (which decides a handed-over connection; up to
// 50 ms), answers (with a write deadline of 100 ms), ends the writing side, then reads and
// drops what the client sends for up to lingerFor. Past the bound of refusals in progress (of
// every listener) the connection is closed at once, unanswered. Listeners bounded otherwise
// (the ssh broker's own caps) refuse through it too.
func Refuse(c net.Conn, answer func(net.Conn)) {
	select {
	case refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-refusing }()
		defer c.Close()
		buf := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		c.Read(buf)
		if answer != nil {
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			answer(c)
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(lingerFor))
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

type conn struct {
	net.Conn
	l    *listener
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.cfg.Budget.give()
	})
	return c.Conn.Close()
}

// Unwrap returns the connection admitted, for code that needs its concrete type.
func (c *conn) Unwrap() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when the admitted one can (net/http's server does so
// before it closes).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
