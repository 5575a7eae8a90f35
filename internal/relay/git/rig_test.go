package git_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/relay"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
	"github.com/agentbox/agentbox/internal/relay/session"
)

const (
	remoteUser   = "robot"
	remoteSecret = "ghp_remoteS3cretToken0123456789"
)

// gitPaths returns the git program and git-http-backend, or skips the test.
func gitPaths(t testing.TB) (gitBin, backend string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: install the git package")
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	return gitBin, backend
}

// hostEnv is the environment of git commands the test runs host-side (setting up remotes):
// no user or system configuration.
func hostEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Remote Author", "GIT_AUTHOR_EMAIL=remote@example.com",
		"GIT_COMMITTER_NAME=Remote Author", "GIT_COMMITTER_EMAIL=remote@example.com",
	}
}

func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// request is what the remote saw of one request.
type request struct {
	Method, Path, Query string
	Auth                string
	GitProtocol         string
	ContentEncoding     string
	Chunked             bool
	BodyBytes           int64
	Header              http.Header
}

// remote is a real git smart-HTTP server: git http-backend under net/http/cgi, requiring
// basic auth, serving bare repositories the test creates.
type remote struct {
	t       testing.TB
	git     string
	root    string
	home    string
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	noAuth  bool
	wrap    func(http.ResponseWriter, *http.Request) http.ResponseWriter
	handler http.Handler // in front of the backend (redirects); nil means none
	backend http.Handler // git http-backend, after authentication
}

func newRemote(t testing.TB, tlsServer bool) *remote {
	t.Helper()
	gitBin, backend := gitPaths(t)
	rm := &remote{t: t, git: gitBin, root: t.TempDir(), home: t.TempDir()}
	cgiH := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + rm.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"HOME=" + rm.home,
		},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rq := request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), GitProtocol: r.Header.Get("Git-Protocol"),
			ContentEncoding: r.Header.Get("Content-Encoding"), Chunked: r.ContentLength < 0,
			Header: r.Header.Clone()}
		cb := &countBody{ReadCloser: r.Body}
		r.Body = cb
		defer func() {
			rq.BodyBytes = cb.n
			rm.mu.Lock()
			rm.reqs = append(rm.reqs, rq)
			rm.mu.Unlock()
		}()
		if !rm.noAuth {
			if u, p, ok := r.BasicAuth(); !ok || u != remoteUser || p != remoteSecret {
				w.Header().Set("WWW-Authenticate", `Basic realm="remote"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		if rm.handler != nil {
			rm.handler.ServeHTTP(w, r)
			return
		}
		rm.backend.ServeHTTP(w, r)
	})
	rm.backend = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rm.mu.Lock()
		wrap := rm.wrap
		rm.mu.Unlock()
		if wrap != nil {
			w = wrap(w, r)
		}
		if r.ContentLength < 0 {
			// net/http/cgi refuses chunked bodies; git http-backend itself would read to EOF.
			// The test remote spools them (the relay under test still streams).
			f, err := os.CreateTemp(rm.home, "body")
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer os.Remove(f.Name())
			defer f.Close()
			n, err := io.Copy(f, r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			f.Seek(0, io.SeekStart)
			r.Body, r.ContentLength, r.TransferEncoding = f, n, nil
		}
		cgiH.ServeHTTP(w, r)
	})
	if tlsServer {
		rm.srv = httptest.NewTLSServer(h)
	} else {
		rm.srv = httptest.NewServer(h)
	}
	t.Cleanup(rm.srv.Close)
	return rm
}

type countBody struct {
	io.ReadCloser
	n int64
}

func (b *countBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// hostport is the remote's host:port as it appears in URLs.
func (rm *remote) hostport() string {
	return strings.TrimPrefix(strings.TrimPrefix(rm.srv.URL, "http://"), "https://")
}

// url returns the remote's own URL of a repository.
func (rm *remote) url(repo string) string { return rm.srv.URL + "/" + repo }

func (rm *remote) requests() []request {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return append([]request(nil), rm.reqs...)
}

// setWrap installs a wrapper of the backend's ResponseWriter.
func (rm *remote) setWrap(f func(http.ResponseWriter, *http.Request) http.ResponseWriter) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.wrap = f
}

func (rm *remote) reset() {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.reqs = nil
}

// bare creates a bare repository that accepts pushes and returns its directory.
func (rm *remote) bare(repo string) string {
	dir := filepath.Join(rm.root, repo)
	run(rm.t, rm.root, hostEnv(rm.home), rm.git, "init", "--quiet", "--bare", "--initial-branch=main", dir)
	run(rm.t, dir, hostEnv(rm.home), rm.git, "config", "http.receivepack", "true")
	return dir
}

// commit adds files to repository repo on the remote side (through a scratch clone over the
// file system, not through HTTP) and returns the new head.
func (rm *remote) commit(repo string, files map[string][]byte) string {
	rm.t.Helper()
	work := rm.t.TempDir()
	env := hostEnv(rm.home)
	bare := filepath.Join(rm.root, repo)
	run(rm.t, work, env, rm.git, "clone", "--quiet", bare, "w")
	w := filepath.Join(work, "w")
	for name, data := range files {
		p := filepath.Join(w, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			rm.t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			rm.t.Fatal(err)
		}
	}
	run(rm.t, w, env, rm.git, "add", "-A")
	run(rm.t, w, env, rm.git, "commit", "--quiet", "-m", fmt.Sprintf("commit %d files", len(files)))
	run(rm.t, w, env, rm.git, "push", "--quiet", "origin", "HEAD:main")
	return strings.TrimSpace(run(rm.t, w, env, rm.git, "rev-parse", "HEAD"))
}

// refs returns the bytes of every file under the repository's refs and its packed-refs:
// a push refused before any pack leaves them byte-for-byte unchanged.
func (rm *remote) refs(repo string) string {
	rm.t.Helper()
	var b strings.Builder
	dir := filepath.Join(rm.root, repo)
	for _, p := range []string{"packed-refs", "HEAD"} {
		data, _ := os.ReadFile(filepath.Join(dir, p))
		fmt.Fprintf(&b, "%s=%q\n", p, data)
	}
	filepath.Walk(filepath.Join(dir, "refs"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s=%q\n", strings.TrimPrefix(p, dir), data)
		}
		return nil
	})
	return b.String()
}

// rig is a launch's relay end to end: real git in a client "box" (the generated gitconfig,
// nothing else) → relay.Handler (pairing, routing) → git relay → remote(s).
type rig struct {
	t       testing.TB
	gitBin  string
	reg     *session.Registry
	sess    *session.Session
	pairing session.Pairing
	relay   *httptest.Server
	cfgPath string
	home    string
	events  chan gitrelay.Event
	records chan relay.Record
	logs    *syncBuffer
}

type rigOptions struct {
	cfg       gitrelay.Config
	transport http.RoundTripper
	sshHosts  []string
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	gitBin, _ := gitPaths(t)
	tr := o.transport
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	r := &rig{t: t, gitBin: gitBin, home: t.TempDir(), events: make(chan gitrelay.Event, 1024),
		records: make(chan relay.Record, 1024), logs: &syncBuffer{}}
	rl, err := gitrelay.New(o.cfg, gitrelay.Options{
		Transport: tr,
		Logf:      r.logs.logf,
		Audit: func(ev gitrelay.Event) {
			select {
			case r.events <- ev:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.reg, err = session.Open(context.Background(), session.Config{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r.sess, r.pairing, err = r.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	r.relay = httptest.NewServer(&relay.Handler{
		Sessions: r.reg,
		Scope:    session.Scope{LaunchID: "L1"},
		Git:      rl,
		Logf:     r.logs.logf,
		Audit: func(rec relay.Record) {
			select {
			case r.records <- rec:
			default:
			}
		},
	})
	t.Cleanup(r.relay.Close)
	gc, err := gitrelay.Gitconfig{
		RelayURL: r.relay.URL,
		Pairing:  r.pairing,
		Allow:    o.cfg.Allow,
		SSHHosts: o.sshHosts,
		Identity: gitrelay.Identity{"user.name": "Box User", "user.email": "box@example.com"},
	}.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	r.cfgPath = filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(r.cfgPath, gc, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l := r.logs.String()
		if strings.Contains(l, r.pairing.Reveal()) || strings.Contains(l, remoteSecret) {
			t.Errorf("log holds a secret:\n%s", l)
		}
		if strings.Contains(string(gc), remoteSecret) {
			t.Errorf("the box's gitconfig holds the remote's credential")
		}
	})
	return r
}

// env is the box's environment for git: the generated gitconfig and nothing of the host's,
// with a proxy set that would break any request not going straight to the relay.
func (r *rig) env() []string {
	env := append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
	}, gitrelay.Env(r.cfgPath)...)
	return env
}

// git runs git as the box would and returns its combined output and error.
func (r *rig) git(dir string, args ...string) (string, error) {
	return r.gitCtx(context.Background(), dir, args...)
}

func (r *rig) gitCtx(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, r.gitBin, args...)
	cmd.Dir, cmd.Env = dir, r.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *rig) mustGit(dir string, args ...string) string {
	r.t.Helper()
	out, err := r.git(dir, args...)
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// awaitEvents returns the events recorded until done holds for them (or 10 s passed): the
// relay records a request when its handler returns, which can be after git, having read the
// whole answer, has exited.
func (r *rig) awaitEvents(done func([]gitrelay.Event) bool) []gitrelay.Event {
	out := r.drainEvents()
	timeout := time.After(10 * time.Second)
	for !done(out) {
		select {
		case ev := <-r.events:
			out = append(out, ev)
		case <-timeout:
			return out
		}
	}
	return out
}

// drainEvents returns the events recorded so far.
func (r *rig) drainEvents() []gitrelay.Event {
	var out []gitrelay.Event
	for {
		select {
		case ev := <-r.events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func (r *rig) drainRecords() []relay.Record {
	var out []relay.Record
	for {
		select {
		case rec := <-r.records:
			out = append(out, rec)
		default:
			return out
		}
	}
}

// credFile writes the remote's secret to a 0600 file.
func credFile(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(remoteSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// trusting returns a transport that trusts the certificates of the given TLS test servers.
func trusting(srvs ...*httptest.Server) *http.Transport {
	pool := x509.NewCertPool()
	for _, s := range srvs {
		pool.AddCert(s.Certificate())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return tr
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.buf, format+"\n", args...)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
