package sshbroker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// upstreamTimeout bounds the dial of the user's agent (a local socket: it answers at once or
// not at all).
const upstreamTimeout = 5 * time.Second

// agentServer serves the filtered agent on a launch's agent socket.
type agentServer struct {
	keys     []string
	upstream func() (net.Conn, error) // dials the user's agent
	done     <-chan struct{}          // revocation
	quit     <-chan struct{}          // the launch's broker is closing
	log      *recorder
	conns    *budget
}

// serve accepts connections until ln closes.
func (s *agentServer) serve(ln net.Listener, wg *sync.WaitGroup) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if err := checkPeer(c); err != nil {
			s.log.write(line{level: slog.LevelWarn, msg: "ssh agent: connection refused", rest: []any{"err", err}})
			c.Close()
			continue
		}
		if isDone(s.done) {
			s.log.info("ssh agent", "op", "connect", "decision", "revoked")
			c.Close()
			continue
		}
		if !s.conns.acquire() {
			s.log.warn("ssh agent: connection refused: connection budget exhausted", "max", s.conns.max)
			refuse(c, s.refusal, fmt.Sprintf("the box holds %d agent connections at once, the most allowed", s.conns.max))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.conns.release()
			s.serveConn(c)
		}()
	}
}

// serveConn answers the requests of one box connection. Revocation closes the connection and
// the upstream one at once, so an in-flight request ends in EOF.
func (s *agentServer) serveConn(c net.Conn) {
	up := &upstream{dial: s.upstream}
	var cut atomic.Value // the decision logged for a request cut in flight
	stop := make(chan struct{})
	go func() {
		select {
		case <-s.done:
			cut.Store("canceled")
		case <-s.quit:
			cut.Store("closed")
		case <-stop:
			return
		}
		c.Close()
		up.close()
	}()
	defer func() {
		close(stop)
		c.Close()
		up.close()
	}()
	f := &Filter{Agent: up, Keys: s.keys}
	for {
		body, err := readFrame(c)
		if err != nil {
			var fe *errFrameSize
			if errors.As(err, &fe) {
				s.log.write(line{level: slog.LevelWarn, msg: "ssh agent: connection closed", rest: []any{"reason", fe.Error()}})
			}
			// A truncated frame or a closed connection ends quietly.
			return
		}
		req, perr := parseRequest(body)
		fp := ""
		if req.op == msgSignRequest && perr == nil {
			fp = fingerprintBlob(req.key)
		}
		if isDone(s.done) {
			s.log.write(line{level: slog.LevelInfo, msg: "ssh agent", key: []any{"op", opName(req.op), "decision", "revoked"}, rest: []any{"key", fp}, target: fp})
			return
		}
		reply, decision := s.handle(f, req, perr)
		if d, ok := cut.Load().(string); ok {
			s.log.write(line{level: slog.LevelInfo, msg: "ssh agent", key: []any{"op", opName(req.op), "decision", d}, rest: []any{"key", fp}, target: fp})
			return
		}
		s.log.write(line{level: slog.LevelInfo, msg: "ssh agent", key: []any{"op", opName(req.op), "decision", decision}, rest: []any{"key", fp}, target: fp, allowed: decision == "allow"})
		if _, err := c.Write(frame(reply)); err != nil {
			return
		}
	}
}

// handle answers one request: list and sign go through the filter, everything else is
// refused here without touching the user's agent.
func (s *agentServer) handle(f *Filter, req request, perr error) (reply []byte, decision string) {
	if perr != nil {
		return failure, "malformed"
	}
	switch req.op {
	case msgRequestIDs:
		keys, err := f.List()
		if err != nil {
			return failure, "upstream_unreachable"
		}
		return identitiesAnswer(keys), "allow"
	case msgSignRequest:
		key, err := ssh.ParsePublicKey(req.key)
		if err != nil {
			return failure, "deny"
		}
		sig, err := f.SignWithFlags(key, req.data, req.flags)
		switch {
		case errors.Is(err, ErrKeyNotGranted):
			return failure, "deny"
		case errors.Is(err, errAgentFailure):
			return failure, "upstream_failure"
		case err != nil:
			return failure, "upstream_unreachable"
		}
		return signResponse(sig), "allow"
	}
	return failure, "refuse"
}

// errAgentFailure is the user's agent answering SSH_AGENT_FAILURE (as opposed to not
// answering at all).
var errAgentFailure = errors.New("agent answered failure")

// maxUpstreamFrame bounds the user's agent's replies (as x/crypto's client does).
const maxUpstreamFrame = 16 << 20

// upstream is the user's agent for one box connection, dialled on first use and again after
// a failure (the user may restart their agent). Only List and SignWithFlags reach it; it
// speaks the protocol itself so that the agent's SSH_AGENT_FAILURE is told apart from a
// broken connection.
type upstream struct {
	dial func() (net.Conn, error)

	mu sync.Mutex // held for a whole call: one request at a time, as the box sends them

	cmu    sync.Mutex // guards conn and closed; never held during I/O
	conn   net.Conn
	closed bool
}

var _ agent.ExtendedAgent = (*upstream)(nil)

// call sends one request and returns the reply body.
func (u *upstream) call(req []byte) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, err := u.connect()
	if err != nil {
		return nil, err
	}
	reply, err := roundTrip(c, req)
	if err != nil {
		c.Close()
		u.cmu.Lock()
		if u.conn == c {
			u.conn = nil
		}
		u.cmu.Unlock()
	}
	return reply, err
}

// connect returns the connection, dialling it if needed.
func (u *upstream) connect() (net.Conn, error) {
	u.cmu.Lock()
	c, closed := u.conn, u.closed
	u.cmu.Unlock()
	switch {
	case closed:
		return nil, net.ErrClosed
	case c != nil:
		return c, nil
	case u.dial == nil:
		return nil, errors.New("no agent socket (SSH_AUTH_SOCK is not set)")
	}
	c, err := u.dial()
	if err != nil {
		return nil, err
	}
	u.cmu.Lock()
	defer u.cmu.Unlock()
	if u.closed { // closed while dialling
		c.Close()
		return nil, net.ErrClosed
	}
	u.conn = c
	return c, nil
}

func roundTrip(c net.Conn, req []byte) ([]byte, error) {
	if _, err := c.Write(frame(req)); err != nil {
		return nil, err
	}
	return readFrameMax(c, maxUpstreamFrame)
}

// close ends the connection, interrupting a call in flight; later calls fail.
func (u *upstream) close() {
	u.cmu.Lock()
	defer u.cmu.Unlock()
	u.closed = true
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
}

func (u *upstream) List() ([]*agent.Key, error) {
	reply, err := u.call([]byte{msgRequestIDs})
	if err != nil {
		return nil, err
	}
	switch {
	case len(reply) > 0 && reply[0] == msgFailure:
		return nil, errAgentFailure
	case len(reply) == 0 || reply[0] != msgIdentitiesAnswer:
		return nil, errors.New("unexpected reply to list")
	}
	return parseIdentities(reply[1:])
}

func (u *upstream) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	req := appendString([]byte{msgSignRequest}, key.Marshal())
	req = appendString(req, data)
	req = binary.BigEndian.AppendUint32(req, uint32(flags))
	reply, err := u.call(req)
	if err != nil {
		return nil, err
	}
	switch {
	case len(reply) > 0 && reply[0] == msgFailure:
		return nil, errAgentFailure
	case len(reply) == 0 || reply[0] != msgSignResponse:
		return nil, errors.New("unexpected reply to sign")
	}
	blob, rest, ok := parseString(reply[1:])
	if !ok || len(rest) != 0 {
		return nil, errors.New("malformed sign response")
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(blob, &sig); err != nil {
		return nil, err
	}
	return &sig, nil
}

func (u *upstream) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	return u.SignWithFlags(key, data, 0)
}

// The operations below are never forwarded.

func (u *upstream) Add(agent.AddedKey) error                 { return ErrRefused }
func (u *upstream) Remove(ssh.PublicKey) error               { return ErrRefused }
func (u *upstream) RemoveAll() error                         { return ErrRefused }
func (u *upstream) Lock([]byte) error                        { return ErrRefused }
func (u *upstream) Unlock([]byte) error                      { return ErrRefused }
func (u *upstream) Signers() ([]ssh.Signer, error)           { return nil, ErrRefused }
func (u *upstream) Extension(string, []byte) ([]byte, error) { return nil, ErrRefused }

// budget bounds concurrent connections.
type budget struct {
	max int
	n   atomic.Int64
}

func (b *budget) acquire() bool {
	if b.n.Add(1) > int64(b.max) {
		b.n.Add(-1)
		return false
	}
	return true
}

func (b *budget) release() { b.n.Add(-1) }

func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// copyClose copies src to dst and then half-closes dst's write side (or closes it).
func copyClose(dst, src net.Conn) int64 {
	n, _ := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
	return n
}
