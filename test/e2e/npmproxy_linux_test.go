//go:build linux

package e2e

import (
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestNpmInstallThroughEgressProxy: a box's npm fills its cache from a registry through the
// launch's egress proxy, and a later box of the workspace installs from that cache with no
// network. The registry is the test's, on a loopback address outside the box's NO_PROXY
// (127.0.0.2), named in egressAllow by address and port (the daemon resolves names with the
// host's resolver, which knows no test names); the box reaches it only through the proxy.
// The first box installs the package (npm install, the tarball requested once, through the
// proxy: the launch's egress counters count it); the second box installs it with `npm ci
// --offline` from the box cache's npm layer (the registry is not asked again); the host's
// ~/.npm is unchanged. The other npm tests fill the host's cache from local tarballs.
func TestNpmInstallThroughEgressProxy(t *testing.T) {
	t.Parallel() // its own daemon and registry on a port of its own (parallelTests)
	if _, err := os.Stat("/usr/bin/npm"); err != nil {
		t.Skip("npm is not installed")
	}
	e := NewEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no loopback address 127.0.0.2: %v", err)
	}
	base := "http://" + ln.Addr().String()
	tgz := tarGz(t,
		"package/package.json", `{"name":"abnet","version":"1.0.0","main":"index.js"}`+"\n",
		"package/index.js", `module.exports = "fetched through the egress proxy";`+"\n")
	integrity := npmIntegrity(tgz)
	sum := sha1.Sum(tgz)
	tarball := base + "/abnet/-/abnet-1.0.0.tgz"
	packument := fmt.Sprintf(`{"name":"abnet","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"abnet","version":"1.0.0","main":"index.js",`+
		`"dist":{"tarball":%q,"integrity":%q,"shasum":%q}}}}`, tarball, integrity, hex.EncodeToString(sum[:]))
	var tarballs, requests atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/abnet":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, packument)
		case "/abnet/-/abnet-1.0.0.tgz":
			tarballs.Add(1)
			w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cfg := filepath.Join(e.Config, "agentbox", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("egress: deny\negressAllow:\n  - \""+ln.Addr().String()+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostNpm := filepath.Join(e.Home, ".npm")
	if err := os.MkdirAll(filepath.Join(hostNpm, "_cacache"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, hostNpm)

	app1, app2 := filepath.Join(e.Work, "app1"), filepath.Join(e.Work, "app2")
	if err := os.MkdirAll(app1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app1, "package.json"), []byte(`{"name":"app1","version":"1.0.0"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	npmProject(t, app2, "abnet", integrity)
	// npmProject's lockfile names the stand-in registry's host: point it at this one.
	lock := filepath.Join(app2, "package-lock.json")
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte(strings.ReplaceAll(string(b), "https://registry.example.org/abnet/-/abnet-1.0.0.tgz", tarball)), 0o644); err != nil {
		t.Fatal(err)
	}

	seen := map[string]bool{}
	for _, l := range e.Launches() {
		seen[l.ID] = true
	}
	// Both boxes are of one workspace (e.Work), whose box cache they share.
	r := e.runIn(e.Work, "run", "sh", "--", "-c", `cd app1 && npm install --no-audit --no-fund --no-update-notifier --registry `+base+`/ abnet && node -e 'console.log(require("abnet"))'`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "fetched through the egress proxy") {
		t.Fatalf("npm install through the egress proxy: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if tarballs.Load() != 1 {
		t.Errorf("the registry served the tarball %d times to the first box, want 1", tarballs.Load())
	}
	for _, l := range e.Launches() {
		if !seen[l.ID] && (l.Egress == nil || l.Egress.Allowed < 1) {
			t.Errorf("the first box's egress counters count no allowed request: %+v", l.Egress)
		}
	}

	asked := requests.Load()
	r = e.runIn(e.Work, "run", "sh", "--", "-c", "cd app2 && "+npmCI+` && node -e 'console.log(require("abnet"))'`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "fetched through the egress proxy") {
		t.Fatalf("npm ci --offline in a second box, from the box cache: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := requests.Load() - asked; n != 0 {
		t.Errorf("the second box asked the registry %d times, want none (the box cache has the package)", n)
	}
	if treeHash(t, hostNpm) != before {
		t.Errorf("the host's ~/.npm changed")
	}
}

// npmIntegrity is an npm package archive's integrity string (sha512-…).
func npmIntegrity(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}
