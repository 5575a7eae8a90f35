package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/egress/egresstest"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// rig is an outside, a pairing registry with two launches, and a proxy serving launch L1 on
// a loopback TCP port (real clients speak TCP to a proxy).
type rig struct {
	out      *egresstest.Outside
	proxy    *Proxy
	addr     string
	reg      *session.Registry
	s1       *session.Session
	pairing1 string // L1's pairing
	pairing2 string // another launch's pairing
	resolves int

	mu   sync.Mutex
	recs []Record
	seen chan Record
}

func newRig(t testing.TB, extra ...string) *rig {
	t.Helper()
	out := egresstest.Start(t)
	r := &rig{out: out, seen: make(chan Record, 1024)}
	var err error
	if r.reg, err = session.Open(context.Background(), session.Config{}); err != nil {
		t.Fatal(err)
	}
	s1, p1, err := r.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "test", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	_, p2, err := r.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "test", LaunchID: "L2"})
	if err != nil {
		t.Fatal(err)
	}
	r.s1, r.pairing1, r.pairing2 = s1, p1.Reveal(), p2.Reveal()
	allow, err := ParseAllowlist(append(out.Allow(), extra...))
	if err != nil {
		t.Fatal(err)
	}
	hosts := Hosts(out.Hosts())
	r.proxy = &Proxy{
		Allow:    allow,
		Sessions: r.reg,
		Scope:    session.Scope{LaunchID: "L1"},
		Resolver: resolverFunc(func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			r.mu.Lock()
			r.resolves++
			r.mu.Unlock()
			return hosts.LookupNetIP(ctx, network, host)
		}),
		Logf: t.Logf,
		Audit: func(rec Record) {
			r.mu.Lock()
			r.recs = append(r.recs, rec)
			r.mu.Unlock()
			select {
			case r.seen <- rec:
			default:
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	go Serve(ln, r.proxy)
	t.Cleanup(func() {
		ln.Close()
		r.proxy.Close()
	})
	if !out.Netns {
		t.Log("not root or no netns: the outside runs on host loopback, allowed by explicit 127.0.0.1 entries")
	}
	return r
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

// proxyURL is the proxy URL a box gets, with pairing embedded.
func (r *rig) proxyURL(pairing string) string {
	return "http://agentbox:" + pairing + "@" + r.addr
}

// lastRecord waits for the next record.
func (r *rig) nextRecord(t testing.TB) Record {
	t.Helper()
	select {
	case rec := <-r.seen:
		return rec
	case <-time.After(30 * time.Second):
		t.Fatal("no record")
	}
	return Record{}
}

func (r *rig) drain() {
	for {
		select {
		case <-r.seen:
		default:
			return
		}
	}
}

// client returns an HTTP client using the proxy with pairing, trusting the outside's CA.
func (r *rig) client(pairing string) *http.Client {
	pu, _ := url.Parse(r.proxyURL(pairing))
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(pu),
		TLSClientConfig:   &tls.Config{RootCAs: r.out.Pool},
		DisableKeepAlives: true,
	}, Timeout: 60 * time.Second}
}

// connect sends a CONNECT for target with the given Proxy-Authorization ("" for none) and
// returns the response and the connection (open when the status is 200).
func (r *rig) connect(t testing.TB, target, auth string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if auth != "" {
		fmt.Fprintf(c, "Proxy-Authorization: %s\r\n", auth)
	}
	fmt.Fprintf(c, "\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	t.Cleanup(func() { c.Close() })
	return resp, c, br
}

func basic(pairing string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("agentbox:"+pairing))
}
