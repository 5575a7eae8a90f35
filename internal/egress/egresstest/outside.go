// Package egresstest runs the "outside" of egress proxy tests: TLS and plain HTTP servers with
// their own certificate authority and DNS names, serving a git repository (git http-backend),
// a minimal npm registry, a minimal pip index and byte streams. As root it lives in its own
// network namespace behind a veth pair, at documentation addresses that exist only inside
// that pair; otherwise on host loopback.
package egresstest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Names the outside answers to; a test's resolver maps them.
const (
	PkgHost    = "pkg.outside.test"  // the public-looking server
	LANHost    = "lan.outside.test"  // the same server at a private address (netns only)
	LoopHost   = "loop.outside.test" // host loopback
	MetaHost   = "meta.outside.test" // cloud metadata address
	NPMPackage = "agentbox-egress-demo"
	PipPackage = "agentbox-egress-demo"
)

// Outside is a running outside.
type Outside struct {
	// Netns is true when the servers run in their own network namespace.
	Netns bool
	// Addr is the servers' public-looking address; LAN a private one of the same servers
	// (invalid without a netns).
	Addr, LAN netip.Addr
	// Ports: HTTPS (TLS), HTTP (plain), Alt (TLS, on no default port), Echo (raw TCP echo).
	HTTPS, HTTP, Alt, Echo int
	// CAFile is the PEM of the CA that signed the servers' certificate; Pool holds it.
	CAFile string
	Pool   *x509.CertPool
	// Repo is the path of the served repository: https://PkgHost/git/repo.git.
	RepoURL string
	Mux     *http.ServeMux
}

// Start starts an outside and stops it when the test ends.
func Start(t testing.TB) *Outside {
	t.Helper()
	o := &Outside{Mux: http.NewServeMux()}
	dir := t.TempDir()
	listen := net.Listen
	host := "127.0.0.1"
	if os.Geteuid() == 0 {
		if ns, err := newNetns(t); err != nil {
			t.Logf("no network namespace for the outside (%v): serving on host loopback", err)
		} else {
			o.Netns, o.Addr, o.LAN = true, ns.addr, ns.lan
			listen = ns.listen
			host = "0.0.0.0"
		}
	}
	if !o.Netns {
		o.Addr = netip.MustParseAddr("127.0.0.1")
	}
	cert, caPEM := makeCert(t, o.Addr)
	o.CAFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(o.CAFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Pool = x509.NewCertPool()
	o.Pool.AppendCertsFromPEM(caPEM)
	ports := map[string]int{"https": 443, "http": 80, "alt": 8443, "echo": 7000}
	lns := map[string]net.Listener{}
	for _, name := range []string{"https", "http", "alt", "echo"} {
		port := 0
		if o.Netns {
			port = ports[name]
		}
		ln, err := listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("outside listen %s: %v", name, err)
		}
		lns[name] = ln
		t.Cleanup(func() { ln.Close() })
	}
	o.HTTPS, o.HTTP = lns["https"].Addr().(*net.TCPAddr).Port, lns["http"].Addr().(*net.TCPAddr).Port
	o.Alt, o.Echo = lns["alt"].Addr().(*net.TCPAddr).Port, lns["echo"].Addr().(*net.TCPAddr).Port

	o.routes(t, dir)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	for _, name := range []string{"https", "alt"} {
		// A config of its own each: ServeTLS adds HTTP/2 to the server's config (a shared one raced).
		srv := &http.Server{Handler: o.Mux, TLSConfig: tlsCfg.Clone(), ReadHeaderTimeout: 30 * time.Second}
		go srv.ServeTLS(lns[name], "", "")
		t.Cleanup(func() { srv.Close() })
	}
	plain := &http.Server{Handler: o.Mux, ReadHeaderTimeout: 30 * time.Second}
	go plain.Serve(lns["http"])
	t.Cleanup(func() { plain.Close() })
	go serveEcho(lns["echo"])
	return o
}

// URL returns https://PkgHost[:port]/path.
func (o *Outside) URL(path string) string {
	return "https://" + o.hostPort(PkgHost, o.HTTPS, 443) + path
}

// AddrURL returns https://<address>[:port]/path: the server by address, for a daemon that
// resolves names with the host's resolver (the certificate names the address too).
func (o *Outside) AddrURL(path string) string {
	h := o.Addr.String()
	if o.HTTPS != 443 {
		h = net.JoinHostPort(h, strconv.Itoa(o.HTTPS))
	}
	return "https://" + h + path
}

// AddrAllow returns the allowlist entry naming the server's address and HTTPS port.
func (o *Outside) AddrAllow() string {
	if o.HTTPS == 443 {
		return o.Addr.String()
	}
	return net.JoinHostPort(o.Addr.String(), strconv.Itoa(o.HTTPS))
}

// HTTPURL returns http://PkgHost[:port]/path.
func (o *Outside) HTTPURL(path string) string {
	return "http://" + o.hostPort(PkgHost, o.HTTP, 80) + path
}

func (o *Outside) hostPort(h string, port, def int) string {
	if port == def {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(port))
}

// Allow returns allowlist entries that allow PkgHost's HTTPS and HTTP servers: the bare name
// with a netns (default ports), and with loopback the name and the address 127.0.0.1 at each
// port (a loopback server needs its address named explicitly).
func (o *Outside) Allow() []string {
	if o.Netns {
		return []string{PkgHost}
	}
	var out []string
	for _, p := range []int{o.HTTPS, o.HTTP} {
		out = append(out, fmt.Sprintf("%s:%d", PkgHost, p), fmt.Sprintf("127.0.0.1:%d", p))
	}
	return out
}

// Hosts returns the name → address map of the outside.
func (o *Outside) Hosts() map[string][]netip.Addr {
	h := map[string][]netip.Addr{
		PkgHost:  {o.Addr},
		LoopHost: {netip.MustParseAddr("127.0.0.1")},
		MetaHost: {netip.MustParseAddr("169.254.169.254")},
	}
	if o.LAN.IsValid() {
		h[LANHost] = []netip.Addr{o.LAN}
	}
	return h
}

func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

func (o *Outside) routes(t testing.TB, dir string) {
	// /bytes/N streams N bytes.
	o.Mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	o.Mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the outside (host %s)\n", r.Host)
	})
	// /slow writes a line every 100ms for a minute: a long download to cut.
	o.Mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		f, _ := w.(http.Flusher)
		for i := range 600 {
			if _, err := fmt.Fprintf(w, "chunk %d\n", i); err != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	o.Mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d\n", n)
	})
	o.gitRoutes(t, dir)
	o.npmRoutes(t)
	o.pipRoutes(t)
}

func (o *Outside) gitRoutes(t testing.TB, dir string) {
	git, err := exec.LookPath("git")
	if err != nil {
		return
	}
	execPath, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		return
	}
	root := filepath.Join(dir, "git")
	work := filepath.Join(dir, "work")
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test")
	run := func(d string, args ...string) {
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = d, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(work, 0o755)
	os.MkdirAll(root, 0o755)
	run(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte("cloned through the egress proxy\n"), 0o644)
	run(work, "add", "README")
	run(work, "commit", "-q", "-m", "first")
	run(root, "clone", "-q", "--bare", work, "repo.git")
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Root: "/git",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + dir},
	}
	o.Mux.Handle("/git/", h)
	o.RepoURL = o.URL("/git/repo.git")
}

// npmRoutes serves a one-package registry: the packument and its tarball.
func (o *Outside) npmRoutes(t testing.TB) {
	tgz := npmTarball(t)
	sha1sum := sha1.Sum(tgz)
	sha512sum := sha512.Sum512(tgz)
	tarURL := o.URL("/" + NPMPackage + "/-/" + NPMPackage + "-1.0.0.tgz")
	packument := map[string]any{
		"name":      NPMPackage,
		"dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": NPMPackage, "version": "1.0.0", "description": "installed through the agentbox egress proxy",
			"dist": map[string]any{
				"tarball":   tarURL,
				"shasum":    hex.EncodeToString(sha1sum[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
			},
		}},
	}
	body, _ := json.Marshal(packument)
	o.Mux.HandleFunc("/"+NPMPackage, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	o.Mux.HandleFunc("/"+NPMPackage+"/-/"+NPMPackage+"-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tgz)
	})
}

func npmTarball(t testing.TB) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	files := map[string]string{
		"package/package.json": `{"name":"` + NPMPackage + `","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     "module.exports = 'egress ok';\n",
	}
	for _, name := range []string{"package/package.json", "package/index.js"} {
		c := files[name]
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg})
		tw.Write([]byte(c))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// pipRoutes serves a PEP 503 simple index with one wheel.
func (o *Outside) pipRoutes(t testing.TB) {
	whl := pipWheel(t)
	sum := sha256.Sum256(whl)
	name := "agentbox_egress_demo-1.0.0-py3-none-any.whl"
	o.Mux.HandleFunc("/simple/"+PipPackage+"/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", name, hex.EncodeToString(sum[:]), name)
	})
	o.Mux.HandleFunc("/files/"+name, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(whl)
	})
}

func pipWheel(t testing.TB) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	di := "agentbox_egress_demo-1.0.0.dist-info/"
	files := []struct{ name, body string }{
		{"agentbox_egress_demo/__init__.py", "VALUE = 'egress ok'\n"},
		{di + "METADATA", "Metadata-Version: 2.1\nName: agentbox-egress-demo\nVersion: 1.0.0\n"},
		{di + "WHEEL", "Wheel-Version: 1.0\nGenerator: agentbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		w, _ := zw.Create(f.name)
		w.Write([]byte(f.body))
		s := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(s[:]), len(f.body))
	}
	record.WriteString(di + "RECORD,,\n")
	w, _ := zw.Create(di + "RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makeCert makes a CA and a server certificate for the outside's names and addresses.
func makeCert(t testing.TB, addr netip.Addr) (tls.Certificate, []byte) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentbox egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: PkgHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames:    []string{PkgHost, LANHost, LoopHost, MetaHost},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IP(addr.AsSlice())},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}
