package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
)

// closeWriter is a connection that can half-close (TCP, unix).
type closeWriter interface{ CloseWrite() error }

// tunnel answers a CONNECT with 200 and copies bytes both ways, opaque, until both sides are
// done or life ends (revocation, proxy close), which closes both connections at once.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, up net.Conn, rec *Record, life context.Context) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		rec.Decision, rec.Reason = DecisionError, ReasonBadRequest
		writeError(w, rec, http.StatusInternalServerError, api.CodeBadRequest, "the egress proxy cannot tunnel over this connection: "+err.Error())
		return
	}
	rec.Status = http.StatusOK
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			c.Close()
			up.Close()
		})
	}
	defer closeBoth()
	stop := context.AfterFunc(life, closeBoth)
	defer stop()

	if _, err := brw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	// Bytes the client sent right behind the CONNECT (a pipelined TLS ClientHello) are in
	// the server's buffer, not in c.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		m, err := up.Write(b)
		rec.BytesUp += int64(m)
		if err != nil {
			return
		}
	}
	var upN atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		n, _ := io.Copy(up, c) // splices between sockets: no counting wrapper in the way
		upN.Store(n)
		halfClose(up)
	}()
	n, _ := io.Copy(c, up)
	rec.BytesDown += n
	halfClose(c)
	<-done
	rec.BytesUp += upN.Load()
}

// halfClose passes an end of stream on, or closes a connection that cannot half-close.
func halfClose(c net.Conn) {
	if cw, ok := c.(closeWriter); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// predialed hands the connection dialled to the checked address to the transport, once.
type predialed struct {
	target Target
	mu     sync.Mutex
	conn   net.Conn
}

type dialKey struct{}

func (pd *predialed) take() net.Conn {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	c := pd.conn
	pd.conn = nil
	return c
}

func forwardURL(t Target) *url.URL { return &url.URL{Scheme: "http", Host: t.String()} }

// forward relays an absolute-form http:// request over up (already dialled to the checked
// address) with httputil.ReverseProxy, and counts the bodies.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, up net.Conn, t Target, rec *Record, life context.Context) {
	pd := &predialed{target: t, conn: up}
	defer func() {
		if c := pd.take(); c != nil {
			c.Close() // the transport never took it
		}
	}()
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), dialKey{}, pd))
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	var body *relay.CountingBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &relay.CountingBody{ReadCloser: r.Body}
		r.Body = body
	}
	cw := &relay.CountingWriter{ResponseWriter: w}
	p.rp.ServeHTTP(cw, r.WithContext(ctx))
	if rec.Status == 0 {
		rec.Status = cw.Status
	}
	rec.BytesDown = cw.N
	if body != nil {
		rec.BytesUp = body.N.Load()
	}
	if rec.Code != "" {
		rec.Decision = DecisionError
	}
}
