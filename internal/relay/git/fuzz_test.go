package git_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// recordingRemote is an upstream transport that records every request the relay sends and
// answers as a smart-HTTP remote would; its first answer may be a redirect to loc.
type recordingRemote struct {
	mu   sync.Mutex
	loc  string
	code int
	seen []*http.Request
}

func (rr *recordingRemote) RoundTrip(req *http.Request) (*http.Response, error) {
	rr.mu.Lock()
	first := len(rr.seen) == 0
	rr.seen = append(rr.seen, req)
	rr.mu.Unlock()
	if req.Body != nil {
		req.Body.Close()
	}
	h := http.Header{}
	code := http.StatusOK
	if first && rr.loc != "" {
		code = rr.code
		h.Set("Location", rr.loc)
	} else if svc := req.URL.Query().Get("service"); svc != "" {
		h.Set("Content-Type", "application/x-"+svc+"-advertisement")
	} else {
		h.Set("Content-Type", "application/x-"+path.Base(req.URL.Path)+"-result")
	}
	return &http.Response{StatusCode: code, Header: h, Body: http.NoBody, Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// FuzzUpstreamPath checks the property the git relay's policy rests on, whatever the relay
// path the box sends and whatever Location the remote redirects to: every request that
// reaches a remote is for an allowed host, its path lies within an allowed prefix (within a
// pushAllow one for a push) both as sent and after the remote decodes it once more, and it is
// a smart-HTTP route. A relay that decoded twice sent /org/push/../../victim.git upstream for
// /org/push/%252e%252e/%252e%252e/victim.git.
func FuzzUpstreamPath(f *testing.F) {
	for _, s := range []struct {
		p    string
		post bool
		loc  string
	}{
		{"/git/remote.example/org/repo.git/info/refs?service=git-upload-pack", false, ""},
		{"/git/remote.example/org/push/repo.git/git-receive-pack", true, ""},
		{"/git/remote.example/org/push/%252e%252e/%252e%252e/victim.git/info/refs?service=git-receive-pack", false, ""},
		{"/git/remote.example/org/push/%252e%252e/%252e%252e/victim.git/git-receive-pack", true, ""},
		{"/git/remote.example/org/repo%2523/info/refs?service=git-upload-pack", false, ""},
		{"/git/remote.example/org/repo%23/x/info/refs?service=git-upload-pack", false, ""},
		{"/git/remote.example/org/%2e%2e/x/git-upload-pack", true, ""},
		{"/git/remote.example/org//x/git-upload-pack", true, ""},
		{"/git/remote.example/org/a%3Fb/git-upload-pack", true, ""},
		{"/git/remote.example/org/a%2Fb/git-upload-pack", true, ""},
		{"/git/remote.example/org/repo.git/info/refs?service=git-upload-pack", false, "/org/moved.git/info/refs?service=git-upload-pack"},
		{"/git/remote.example/org/repo.git/info/refs?service=git-upload-pack", false, "/org/%252e%252e/victim.git/info/refs"},
		{"/git/remote.example/org/repo.git/info/refs?service=git-upload-pack", false, "https://remote.example/org/x%23/info/refs"},
	} {
		f.Add(s.p, s.post, s.loc)
	}
	allow := []string{"https://remote.example/org"}
	push := []string{"https://remote.example/org/push"}
	f.Fuzz(func(t *testing.T, target string, post bool, loc string) {
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: relay\r\nContent-Length: 4\r\n\r\n0000")))
		if err != nil {
			return
		}
		rr := &recordingRemote{loc: loc, code: http.StatusTemporaryRedirect}
		rl, err := gitrelay.New(gitrelay.Config{Allow: allow, PushAllow: push}, gitrelay.Options{Transport: rr, Logf: func(string, ...any) {}})
		if err != nil {
			t.Fatal(err)
		}
		s := fuzzSession(t)
		rl.ServeHTTP(httptest.NewRecorder(), req.WithContext(session.NewContext(context.Background(), s)))

		for _, up := range rr.seen {
			u := up.URL
			if u.Scheme != "https" || u.Host != "remote.example:443" && u.Host != "remote.example" {
				t.Fatalf("%s %q (Location %q) reached %s", method, target, loc, u)
			}
			wire := u.EscapedPath()
			once, err := url.PathUnescape(wire)
			if err != nil || once != u.Path {
				t.Fatalf("%s %q: upstream path %q does not decode to %q (%v)", method, target, wire, u.Path, err)
			}
			if strings.ContainsAny(once, "%#?\\") || path.Clean(once) != once {
				t.Fatalf("%s %q (Location %q): upstream path %q reads as another path to a remote that decodes or cleans it", method, target, loc, once)
			}
			var svc string
			switch {
			case up.Method == http.MethodGet && strings.HasSuffix(once, "/info/refs"):
				svc = u.Query().Get("service")
				if u.RawQuery != "service="+svc || (svc != gitrelay.UploadPack && svc != gitrelay.ReceivePack) {
					t.Fatalf("%s %q: info/refs upstream with query %q", method, target, u.RawQuery)
				}
			case up.Method == http.MethodPost && strings.HasSuffix(once, "/"+gitrelay.UploadPack):
				svc = gitrelay.UploadPack
			case up.Method == http.MethodPost && strings.HasSuffix(once, "/"+gitrelay.ReceivePack):
				svc = gitrelay.ReceivePack
			default:
				t.Fatalf("%s %q: %s %s upstream is not a smart-HTTP route", method, target, up.Method, u)
			}
			prefix := "/org/"
			if svc == gitrelay.ReceivePack {
				prefix = "/org/push/"
			}
			if !strings.HasPrefix(once, prefix) {
				t.Fatalf("%s %q (Location %q): upstream %s path %q is outside %s", method, target, loc, svc, once, prefix)
			}
		}
	})
}

var fuzzReg struct {
	once sync.Once
	reg  *session.Registry
	err  error
}

// fuzzSession returns a live session of one registry shared by the fuzz iterations.
func fuzzSession(t *testing.T) *session.Session {
	fuzzReg.once.Do(func() {
		fuzzReg.reg, fuzzReg.err = session.Open(context.Background(), session.Config{Logf: func(string, ...any) {}})
	})
	if fuzzReg.err != nil {
		t.Fatal(fuzzReg.err)
	}
	s, _, err := fuzzReg.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fuzzReg.reg.End(context.Background(), s.ID()) })
	return s
}
