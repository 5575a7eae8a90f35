package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
)

const benchSize = 100 << 20

// directClient reaches the outside without the proxy, resolving its names from the same map.
func (r *rig) directClient() *http.Client {
	hosts := Hosts(r.out.Hosts())
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h, p, _ := net.SplitHostPort(addr)
			as, err := hosts.LookupNetIP(ctx, "ip", h)
			if err != nil {
				return nil, err
			}
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(as[0].String(), p))
		},
		TLSClientConfig:   &tls.Config{RootCAs: r.out.Pool},
		DisableKeepAlives: true,
	}}
}

func benchGet(b *testing.B, c *http.Client, url string, want int64) {
	b.Helper()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != want || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d, %d bytes, %v", url, resp.StatusCode, n, err)
	}
}

// BenchmarkDownload compares a 100 MB download from the same outside server directly and
// through the proxy: over TLS through a CONNECT tunnel, and plain http:// forwarded.
func BenchmarkDownload(b *testing.B) {
	r := newRig(b)
	r.proxy.Logf = func(string, ...any) {}
	r.proxy.Audit = nil
	path := "/bytes/" + strconv.Itoa(benchSize)
	for _, tc := range []struct {
		name string
		c    *http.Client
		url  string
	}{
		{"https/direct", r.directClient(), r.out.URL(path)},
		{"https/proxy", r.client(r.pairing1), r.out.URL(path)},
		{"http/direct", r.directClient(), r.out.HTTPURL(path)},
		{"http/proxy", r.client(r.pairing1), r.out.HTTPURL(path)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				benchGet(b, tc.c, tc.url, benchSize)
			}
		})
	}
}

// BenchmarkConnect measures a new connection and a small request: TCP (+ CONNECT) + TLS
// handshake + GET, directly and through the proxy. The difference is the added latency.
func BenchmarkConnect(b *testing.B) {
	r := newRig(b)
	r.proxy.Logf = func(string, ...any) {}
	r.proxy.Audit = nil
	want := int64(len("hello from the outside (host " + hostOf(r.out.URL("/")) + ")\n"))
	for _, tc := range []struct {
		name string
		c    *http.Client
	}{
		{"direct", r.directClient()},
		{"proxy", r.client(r.pairing1)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				benchGet(b, tc.c, r.out.URL("/hello"), want)
			}
		})
	}
}

func hostOf(u string) string {
	// https://host[:port]/
	u = u[len("https://"):]
	return u[:len(u)-1]
}

var _ = netip.Addr{}
