package sshbroker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Leg is one configured host's path out of the box: box-init listens on BoxPort on the box's
// loopback and forwards each connection to Socket, where the daemon dials the host.
type Leg struct {
	Host    Host
	BoxPort int    // in-box loopback port
	Socket  string // host path of the unix socket, in the run directory
}

// legServer serves one leg's socket.
type legServer struct {
	leg     Leg
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout time.Duration
	done    <-chan struct{} // revocation
	quit    <-chan struct{} // the launch's broker is closing
	log     *recorder
	conns   *budget
}

func (s *legServer) serve(ln net.Listener, wg *sync.WaitGroup) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if err := checkPeer(c); err != nil {
			s.log.write(line{level: slog.LevelWarn, msg: "ssh leg: connection refused", key: []any{"host", s.leg.Host.String()}, rest: []any{"err", err}})
			c.Close()
			continue
		}
		if isDone(s.done) {
			s.log.info("ssh leg", "host", s.leg.Host.String(), "decision", "revoked")
			c.Close()
			continue
		}
		if !s.conns.acquire() {
			s.log.warn("ssh leg: connection refused: connection budget exhausted", "host", s.leg.Host.String(), "max", s.conns.max)
			refuse(c, s.refusal, fmt.Sprintf("the box holds %d connections to it at once, the most allowed; retry when one ends", s.conns.max))
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

// serveConn dials the host and copies both ways until either side ends, the session is
// revoked or the broker closes; one log line tells how it ended.
func (s *legServer) serveConn(box net.Conn) {
	defer box.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outcome := make(chan string, 1)
	go func() {
		select {
		case <-s.done:
			outcome <- "canceled"
		case <-s.quit:
			outcome <- "closed"
		case <-ctx.Done():
			return
		}
		cancel()
		box.Close()
	}()
	ended := func(def string) string {
		select {
		case o := <-outcome:
			return o
		default:
			return def
		}
	}
	host := s.leg.Host.String()
	start := time.Now()
	dctx, dcancel := context.WithTimeout(ctx, s.timeout)
	remote, err := s.dial(dctx, "tcp", s.leg.Host.Addr())
	dcancel()
	if err != nil {
		s.log.write(line{level: slog.LevelWarn, msg: "ssh leg", key: []any{"host", host, "decision", "allow", "outcome", ended("dial_failed")}, rest: []any{"err", err}, allowed: true})
		return
	}
	defer remote.Close()
	context.AfterFunc(ctx, func() { remote.Close() })
	var up int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		up = copyClose(remote, box)
	}()
	down := copyClose(box, remote)
	wg.Wait()
	s.log.write(line{level: slog.LevelInfo, msg: "ssh leg", key: []any{"host", host, "decision", "allow", "outcome", ended("done")},
		rest: []any{"bytes_out", up, "bytes_in", down, "duration", time.Since(start).Round(time.Millisecond)}, out: up, in: down, allowed: true})
}
