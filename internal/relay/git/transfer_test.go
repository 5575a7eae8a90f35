package git_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
)

// redirector answers /rN/<path> with a redirect to /r(N-1)/<path> and /r1/<path> and
// /jump/<path> with one to /<path>: 302 for GET, 307 for POST.
func redirector(rm *remote, backend http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		var next string
		switch {
		case strings.HasPrefix(p, "/jump/"):
			next = strings.TrimPrefix(p, "/jump")
		case strings.HasPrefix(p, "/r"):
			seg, rest, _ := strings.Cut(p[2:], "/")
			n, err := strconv.Atoi(seg)
			if err != nil {
				break
			}
			next = "/" + rest
			if n > 1 {
				next = fmt.Sprintf("/r%d/%s", n-1, rest)
			}
		}
		if next == "" {
			backend.ServeHTTP(w, r)
			return
		}
		u := *r.URL
		u.Path = next
		code := http.StatusFound
		if r.Method == http.MethodPost {
			code = http.StatusTemporaryRedirect
		}
		http.Redirect(w, r, u.String(), code)
	})
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	rm := newRemote(t, false)
	rm.bare("org/repo.git")
	rm.commit("org/repo.git", map[string][]byte{"README": []byte("redirected\n")})
	rm.handler = redirector(rm, rm.backend)

	hp := rm.hostport()
	creds := []gitrelay.Credential{{Prefix: "http://" + hp, Username: remoteUser, File: credFile(t)}}
	// One entry covers the whole host, so every hop of a chain stays within it.
	r := newRig(t, rigOptions{cfg: gitrelay.Config{Allow: []string{"http://" + hp}, Credentials: creds}})

	t.Run("three-hops", func(t *testing.T) {
		work := t.TempDir()
		if out, err := r.git(work, "clone", rm.url("r3/org/repo.git"), "c"); err != nil {
			t.Fatalf("clone: %v\n%s\n%s", err, out, r.logs)
		}
		if b, err := os.ReadFile(filepath.Join(work, "c", "README")); err != nil || string(b) != "redirected\n" {
			t.Fatalf("README = %q, %v", b, err)
		}
		maxHops := func(evs []gitrelay.Event) (hops int) {
			for _, ev := range evs {
				hops = max(hops, ev.Hops)
			}
			return hops
		}
		if hops := maxHops(r.awaitEvents(func(evs []gitrelay.Event) bool { return maxHops(evs) >= 3 })); hops != 3 {
			t.Errorf("max hops recorded = %d, want 3", hops)
		}
	})
	t.Run("four-hops", func(t *testing.T) {
		out, err := r.git(t.TempDir(), "ls-remote", rm.url("r4/org/repo.git"))
		if err == nil || !strings.Contains(out, "remote error: agentbox: "+hp+" redirected the request more than 3 times") {
			t.Fatalf("err=%v\n%s", err, out)
		}
	})
	t.Run("other-entry", func(t *testing.T) {
		r2 := newRig(t, rigOptions{cfg: gitrelay.Config{
			Allow:       []string{"http://" + hp + "/org", "http://" + hp + "/jump"},
			Credentials: creds,
		}})
		out, err := r2.git(t.TempDir(), "ls-remote", rm.url("jump/org/repo.git"))
		if err == nil || !strings.Contains(out, "outside the git.allow entry") {
			t.Fatalf("err=%v\n%s", err, out)
		}
		// The same repository asked for directly is fine: the refusal is about the hop.
		if out, err := r2.git(t.TempDir(), "ls-remote", rm.url("org/repo.git")); err != nil {
			t.Fatalf("ls-remote: %v\n%s", err, out)
		}
	})
}

func mustURL(t testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// egress is an L7 egress endpoint speaking the git relay's upstream contract:
// <egress>/<host[:port]>/<path> with X-Agentbox-Git-Remote naming the remote's origin.
type egress struct {
	srv    *httptest.Server
	mu     sync.Mutex
	seen   []request
	fail   int // answer this many requests 503 first
	remote http.RoundTripper
}

func newEgress(t testing.TB, remoteTransport http.RoundTripper) *egress {
	e := &egress{remote: remoteTransport}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.seen = append(e.seen, request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), GitProtocol: r.Host})
		fail := e.fail > 0
		if fail {
			e.fail--
		}
		e.mu.Unlock()
		if fail {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		origin, err := url.Parse(r.Header.Get(gitrelay.RemoteHeader))
		if err != nil || origin.Host == "" {
			http.Error(w, "no remote", http.StatusBadRequest)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/egress/"+origin.Host)
		if !ok {
			http.Error(w, "path does not name the remote", http.StatusBadRequest)
			return
		}
		(&httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Path, pr.Out.URL.RawPath = rest, ""
				pr.SetURL(origin)
				pr.Out.Header.Del(gitrelay.RemoteHeader)
			},
			Transport: e.remote,
		}).ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func TestEgressUpstream(t *testing.T) {
	t.Parallel()
	// An https remote (the default scheme), reached only through the egress endpoint.
	rm := newRemote(t, true)
	rm.bare("Org/Repo.git")
	rm.commit("Org/Repo.git", map[string][]byte{"README": []byte("via egress\n")})
	eg := newEgress(t, trusting(rm.srv))
	eg.fail = 1
	hp := rm.hostport()
	r := newRig(t, rigOptions{
		cfg: gitrelay.Config{
			Allow:          []string{hp + "/Org"},
			Credentials:    []gitrelay.Credential{{Prefix: hp + "/Org", Username: remoteUser, File: credFile(t)}},
			EgressUpstream: eg.srv.URL + "/egress/",
		},
		transport: trusting(eg.srv), // the relay trusts the egress endpoint, not the remote
	})
	work := t.TempDir()
	r.mustGit(work, "clone", rm.url("Org/Repo.git"), "c")
	if b, err := os.ReadFile(filepath.Join(work, "c", "README")); err != nil || string(b) != "via egress\n" {
		t.Fatalf("README = %q, %v", b, err)
	}
	eg.mu.Lock()
	seen := append([]request(nil), eg.seen...)
	eg.mu.Unlock()
	if len(seen) < 3 {
		t.Fatalf("the egress endpoint saw %d requests", len(seen))
	}
	egHost := strings.TrimPrefix(eg.srv.URL, "https://")
	wantAuth := "Basic " + basic(remoteUser, remoteSecret)
	if seen[0].Path != seen[1].Path {
		t.Errorf("the 503 was not retried with the same request: %q then %q", seen[0].Path, seen[1].Path)
	}
	for _, q := range seen {
		if q.GitProtocol != egHost { // GitProtocol holds r.Host here
			t.Errorf("Host %q, want the egress host %q", q.GitProtocol, egHost)
		}
		if !strings.HasPrefix(q.Path, "/egress/"+hp+"/Org/Repo.git/") {
			t.Errorf("path %q: want the remote's host and the path with its case", q.Path)
		}
		if q.Auth != wantAuth || len(q.Header.Values("Authorization")) != 1 {
			t.Errorf("Authorization %q, want the git credential only", q.Header.Values("Authorization"))
		}
		for k := range q.Header {
			if strings.EqualFold(k, "X-Agentbox-Pairing") || strings.EqualFold(k, "Proxy-Authorization") {
				t.Errorf("the egress endpoint saw %s", k)
			}
		}
	}
	for _, ev := range r.drainEvents() {
		if ev.Decision != gitrelay.DecisionUpstream {
			t.Errorf("event decision %q, want upstream", ev.Decision)
		}
	}
}

func basic(u, p string) string {
	req, _ := http.NewRequest("GET", "http://x", nil)
	req.SetBasicAuth(u, p)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// TestProtocolV2 fetches with protocol v2 and checks the Git-Protocol header reached the
// remote (git http-backend then speaks v2); and v0 still works.
func TestProtocolV2(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	for _, v := range []string{"2", "0"} {
		t.Run("v"+v, func(t *testing.T) {
			rm.reset()
			work := t.TempDir()
			out := r.mustGit(work, "-c", "protocol.version="+v, "-c", "trace2.eventTarget=", "clone", rm.url("org/repo.git"), "c")
			_ = out
			var sawV2 bool
			for _, q := range rm.requests() {
				if q.GitProtocol == "version=2" {
					sawV2 = true
				}
			}
			if sawV2 != (v == "2") {
				t.Errorf("Git-Protocol version=2 seen by the remote: %v (protocol.version=%s)", sawV2, v)
			}
		})
	}
}

// TestLargeCloneGzip clones a repository with many refs (git then gzips its want list) and
// some megabytes of content.
func TestLargeCloneGzip(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	files := map[string][]byte{}
	for i := range 8 {
		files[fmt.Sprintf("blob%d", i)] = randomBytes(t, 1<<20)
	}
	rm.commit("org/repo.git", files)
	bare := filepath.Join(rm.root, "org/repo.git")
	env := hostEnv(rm.home)
	// 300 branches at distinct commits: the fetch request carries 300 wants, over 1 KiB. Each
	// branch bI is a commit with main's tree whose parent is b(I-1)'s (b1's is main): made by
	// one git fast-import, not 600 processes (a commit-tree and a subshell per branch).
	var stream strings.Builder
	for i := 1; i <= 300; i++ {
		msg := fmt.Sprintf("b%d\n", i)
		fmt.Fprintf(&stream, "commit refs/heads/b%d\nmark :%d\ncommitter Remote Author <remote@example.com> %d +0000\ndata %d\n%s", i, i, 1700000000+i, len(msg), msg)
		if i == 1 {
			stream.WriteString("from refs/heads/main\n\n")
		} else {
			fmt.Fprintf(&stream, "from :%d\n\n", i-1)
		}
	}
	imp := exec.Command(rm.git, "fast-import", "--quiet")
	imp.Dir, imp.Env, imp.Stdin = bare, env, strings.NewReader(stream.String())
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	rm.reset()

	work := t.TempDir()
	r.mustGit(work, "clone", "-q", rm.url("org/repo.git"), "c")
	if n := strings.Count(r.mustGit(filepath.Join(work, "c"), "branch", "-r"), "\n"); n < 300 {
		t.Errorf("%d remote branches cloned", n)
	}
	gz := false
	for _, q := range rm.requests() {
		if q.Method == http.MethodPost && q.ContentEncoding == "gzip" {
			gz = true
		}
	}
	if !gz {
		t.Error("no gzip request body reached the remote")
	}
}

// slowWriter paces a response so that a transfer is still running when the test acts.
type slowWriter struct {
	http.ResponseWriter
	started chan struct{}
	once    sync.Once
}

func (w *slowWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		k := min(len(p), 16<<10)
		m, err := w.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		w.once.Do(func() { close(w.started) })
		p = p[k:]
		time.Sleep(5 * time.Millisecond)
	}
	return n, nil
}

func (w *slowWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func TestRevocationCancelsClone(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	rm.commit("org/repo.git", map[string][]byte{"big": randomBytes(t, 8<<20)})
	started := make(chan struct{})
	var once sync.Once
	rm.setWrap(func(w http.ResponseWriter, req *http.Request) http.ResponseWriter {
		if req.Method != http.MethodPost {
			return w
		}
		sw := &slowWriter{ResponseWriter: w, started: make(chan struct{})}
		go func() {
			<-sw.started
			once.Do(func() { close(started) })
		}()
		return sw
	})
	work := t.TempDir()
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = r.gitCtx(context.Background(), work, "clone", rm.url("org/repo.git"), "c")
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("clone ended before the pack was under way: %v\n%s", err, out)
	}
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatalf("the clone succeeded after revocation:\n%s", out)
	}
	canceled := func(evs []gitrelay.Event) bool {
		return slices.ContainsFunc(evs, func(ev gitrelay.Event) bool {
			return ev.Method == http.MethodPost && ev.Outcome == relay.OutcomeCanceled
		})
	}
	if !canceled(r.awaitEvents(canceled)) {
		t.Errorf("no canceled transfer recorded:\n%s", r.logs)
	}
	if !strings.Contains(r.logs.String(), "canceled") {
		t.Errorf("log lacks outcome canceled:\n%s", r.logs)
	}

	// The next git command is refused at the pairing.
	r.drainRecords()
	out2, err := r.git(t.TempDir(), "ls-remote", rm.url("org/repo.git"))
	if err == nil || !strings.Contains(out2, "403") {
		t.Fatalf("ls-remote after revocation: err=%v\n%s", err, out2)
	}
	recs := r.drainRecords()
	if len(recs) == 0 || recs[0].Code != api.CodePairingInvalid {
		t.Errorf("records after revocation: %+v", recs)
	}
}

// TestStreamedBodyCountedWhileSent: a remote that answers a streamed push before it has read
// the pack. The relay's handler returns, and reads the request body's byte count for its
// event, while the transport's own goroutine still reads that body to send it: the count must
// be safe to read then. Under go test -race (scripts/test.sh's race step) this fails when
// relay.CountingBody counts in a plain integer.
func TestStreamedBodyCountedWhileSent(t *testing.T) {
	t.Parallel()
	rm := newRemote(t, false)
	rm.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "pushes are closed", http.StatusForbidden)
	})
	hp := rm.hostport()
	r := newRig(t, rigOptions{cfg: gitrelay.Config{
		Allow:       []string{"http://" + hp + "/org"},
		PushAllow:   []string{"http://" + hp + "/org"},
		Credentials: []gitrelay.Credential{{Prefix: "http://" + hp + "/org", Username: remoteUser, File: credFile(t)}},
	}})

	// A pack git would stream (chunked, no length) and that goes on after the answer came.
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		chunk := make([]byte, 32<<10)
		for range 256 { // 8 MiB at most; the relay stops reading long before
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, r.relay.URL+"/git/"+hp+"/org/repo.git/"+gitrelay.ReceivePack, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Agentbox-Pairing", r.pairing.Reveal())
	req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "pushes are closed") {
		t.Fatalf("answer %d %q, want the remote's 403", resp.StatusCode, b)
	}
	ev := <-r.events
	if ev.Service != gitrelay.ReceivePack || ev.Status != http.StatusForbidden || ev.BytesIn <= 0 {
		t.Errorf("event %+v: want receive-pack, status 403 and the bytes read so far", ev)
	}
}
