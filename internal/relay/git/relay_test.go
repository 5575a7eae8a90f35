package git_test

import (
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
)

// allowedRig is a remote with org/repo.git and a relay allowing org/ on it, with the remote's
// credential configured host-side.
func allowedRig(t *testing.T, mod func(*gitrelay.Config)) (*remote, *rig) {
	t.Helper()
	rm := newRemote(t, false)
	rm.bare("org/repo.git")
	rm.commit("org/repo.git", map[string][]byte{"README": []byte("hello\n")})
	cfg := gitrelay.Config{
		Allow: []string{"http://" + rm.hostport() + "/org"},
		Credentials: []gitrelay.Credential{{
			Prefix: "http://" + rm.hostport() + "/org", Username: remoteUser, File: credFile(t),
		}},
	}
	if mod != nil {
		mod(&cfg)
	}
	return rm, newRig(t, rigOptions{cfg: cfg})
}

func TestCloneFetchPull(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	work := t.TempDir()

	// The remote requires the credential: without the relay, git gets nowhere.
	direct := exec.Command(r.gitBin, "ls-remote", rm.url("org/repo.git"))
	direct.Env = hostEnv(t.TempDir())
	if out, err := direct.CombinedOutput(); err == nil || !strings.Contains(string(out), "could not read Username") {
		t.Fatalf("the remote answered without a credential (%v):\n%s", err, out)
	}
	rm.reset()

	r.mustGit(work, "clone", rm.url("org/repo.git"), "c")
	clone := filepath.Join(work, "c")
	if b, err := os.ReadFile(filepath.Join(clone, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("README = %q, %v", b, err)
	}
	// The box's clone names the remote by its own URL: the rewrite is in the gitconfig only.
	if got := strings.TrimSpace(r.mustGit(clone, "config", "remote.origin.url")); got != rm.url("org/repo.git") {
		t.Errorf("origin = %q", got)
	}
	reqs := rm.requests()
	if len(reqs) == 0 {
		t.Fatal("the remote saw no request")
	}
	for _, q := range reqs {
		if q.Auth == "" || !strings.HasPrefix(q.Auth, "Basic ") {
			t.Errorf("%s %s reached the remote without the injected credential", q.Method, q.Path)
		}
		for k := range q.Header {
			if strings.EqualFold(k, "X-Agentbox-Pairing") || strings.EqualFold(k, "Cookie") {
				t.Errorf("%s %s carried %s to the remote", q.Method, q.Path, k)
			}
		}
	}

	head := rm.commit("org/repo.git", map[string][]byte{"second": []byte("2\n")})
	r.mustGit(clone, "fetch", "origin")
	if got := strings.TrimSpace(r.mustGit(clone, "rev-parse", "origin/main")); got != head {
		t.Errorf("after fetch origin/main = %s, want %s", got, head)
	}
	head = rm.commit("org/repo.git", map[string][]byte{"third": []byte("3\n")})
	r.mustGit(clone, "pull", "--ff-only")
	if got := strings.TrimSpace(r.mustGit(clone, "rev-parse", "HEAD")); got != head {
		t.Errorf("after pull HEAD = %s, want %s", got, head)
	}

	evs := r.drainEvents()
	if len(evs) == 0 {
		t.Fatal("no audit events")
	}
	for _, ev := range evs {
		if ev.Decision != gitrelay.DecisionAllow || ev.Host != rm.hostport() || ev.Path != "org/repo.git" ||
			ev.Service != gitrelay.UploadPack || ev.SessionID != r.sess.ID() || ev.Outcome != "ok" {
			t.Errorf("event %+v", ev)
		}
	}
	if !strings.Contains(r.logs.String(), "decision=allow") {
		t.Errorf("log lacks the decision:\n%s", r.logs)
	}
}

func TestRefusedRemotes(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	rm.bare("other/repo.git")
	rm.commit("other/repo.git", map[string][]byte{"x": []byte("x")})
	relayURL := r.relay.URL + "/git/"
	for _, tc := range []struct {
		name, url, want string
	}{
		// Rewritten by the gitconfig (same host), refused by the relay.
		{"repo-not-allowed", rm.url("other/repo.git"), "remote error: agentbox: " + rm.hostport() + "/other/repo.git is not in git.allow"},
		// A prefix matches whole path elements only.
		{"partial-element", rm.url("organisation/repo.git"), "is not in git.allow"},
		// The path is case-sensitive.
		{"path-case", rm.url("Org/repo.git"), "is not in git.allow"},
		// A host the gitconfig does not rewrite, asked of the relay directly.
		{"host-not-allowed", relayURL + "evil.example/org/repo.git", "evil.example/org/repo.git is not in git.allow"},
		// Same host, other port.
		{"port-not-allowed", relayURL + "127.0.0.1:1/org/repo.git", "is not in git.allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm.reset()
			out, err := r.git(t.TempDir(), "ls-remote", tc.url)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("err=%v, want output with %q:\n%s", err, tc.want, out)
			}
			if reqs := rm.requests(); len(reqs) != 0 {
				t.Errorf("the remote saw %d requests", len(reqs))
			}
		})
	}
	// The refusals are in the audit trail, with the host and the decision.
	countRefused := func(evs []gitrelay.Event) (refused int) {
		for _, ev := range evs {
			if ev.Decision == gitrelay.DecisionRefuse && ev.Code != "" && ev.Host != "" {
				refused++
			}
		}
		return refused
	}
	if refused := countRefused(r.awaitEvents(func(evs []gitrelay.Event) bool { return countRefused(evs) >= 5 })); refused < 5 {
		t.Errorf("%d refusals recorded, want 5", refused)
	}
}

// TestSSHFormRefusalMessage checks the ssh-form rewrite of the gitconfig (git@host:path) ends
// at the relay's explanation, not at a network error.
func TestSSHFormRefusalMessage(t *testing.T) {
	_, r := allowedRig(t, func(c *gitrelay.Config) { c.Allow = append(c.Allow, "github.com/org") })
	out, err := r.git(t.TempDir(), "ls-remote", "git@github.com:org/repo.git")
	if err == nil || !strings.Contains(out, "remote error: agentbox: git over ssh to github.com is not available") ||
		!strings.Contains(out, "https://github.com/org/repo.git") {
		t.Fatalf("err=%v:\n%s", err, out)
	}
}

func TestDumbProtocolRefused(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	for _, p := range []string{
		"/org/repo.git/info/refs",                 // no service: the dumb protocol
		"/org/repo.git/info/refs?service=git-foo", // unknown service
		"/org/repo.git/objects/info/packs",
		"/org/repo.git/HEAD",
	} {
		t.Run(p, func(t *testing.T) {
			rm.reset()
			req, _ := http.NewRequest(http.MethodGet, r.relay.URL+"/git/"+rm.hostport()+p, nil)
			req.Header.Set("X-Agentbox-Pairing", r.pairing.Reveal())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "smart HTTP protocol only") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if n := len(rm.requests()); n != 0 {
				t.Errorf("the remote saw %d requests", n)
			}
		})
	}
}

// TestPairingFirst: without a live pairing every request gets the same answer, whether or not
// its route, remote or protocol would be allowed.
func TestPairingFirst(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, nil)
	var bodies []string
	for _, p := range []string{
		"/git/" + rm.hostport() + "/org/repo.git/info/refs?service=git-upload-pack",
		"/git/evil.example/x/info/refs?service=git-upload-pack",
		"/git/" + rm.hostport() + "/org/repo.git/objects/info/packs",
	} {
		for _, pairing := range []string{"", "abp_" + strings.Repeat("A", 43)} {
			req, _ := http.NewRequest(http.MethodGet, r.relay.URL+p, nil)
			if pairing != "" {
				req.Header.Set("X-Agentbox-Pairing", pairing)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "pairing_invalid") {
				t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
			}
			bodies = append(bodies, string(b))
		}
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("answers differ: %q vs %q", b, bodies[0])
		}
	}
	if n := len(rm.requests()); n != 0 {
		t.Errorf("the remote saw %d requests", n)
	}

	// The git relay alone (not behind relay.Handler) fails closed the same way.
	rl, err := gitrelay.New(gitrelay.Config{Allow: []string{"http://" + rm.hostport()}}, gitrelay.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	rl.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/git/"+rm.hostport()+"/org/repo.git/info/refs?service=git-upload-pack", nil))
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "pairing_invalid") {
		t.Fatalf("bare git relay: %d %s", w.Code, w.Body)
	}
}

func TestPushOutsidePushAllow(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, func(c *gitrelay.Config) {
		c.PushAllow = []string{"http://" + strings.TrimPrefix(c.Allow[0], "http://") + "/other"}
	})
	work := t.TempDir()
	r.mustGit(work, "clone", rm.url("org/repo.git"), "c")
	clone := filepath.Join(work, "c")
	if err := os.WriteFile(filepath.Join(clone, "big"), randomBytes(t, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	r.mustGit(clone, "add", "big")
	r.mustGit(clone, "commit", "-q", "-m", "would be pushed")
	before := rm.refs("org/repo.git")
	rm.reset()

	out, err := r.git(clone, "push", "origin", "HEAD:main")
	if err == nil || !strings.Contains(out, "remote error: agentbox: pushing to "+rm.hostport()+"/org/repo.git is not allowed") {
		t.Fatalf("push: err=%v\n%s", err, out)
	}
	if after := rm.refs("org/repo.git"); after != before {
		t.Errorf("the remote's refs changed:\nbefore %s\nafter %s", before, after)
	}
	var received int64
	for _, q := range rm.requests() {
		received += q.BodyBytes
		if strings.Contains(q.Path, "receive-pack") || strings.Contains(q.Query, "receive-pack") {
			t.Errorf("the remote saw %s %s?%s", q.Method, q.Path, q.Query)
		}
	}
	if received != 0 {
		t.Errorf("the remote received %d bytes", received)
	}
	refusedPush := func(evs []gitrelay.Event) bool {
		return slices.ContainsFunc(evs, func(ev gitrelay.Event) bool {
			return ev.Service == gitrelay.ReceivePack && ev.Decision == gitrelay.DecisionRefuse && ev.Code == api.CodeGitPushNotAllowed
		})
	}
	if !refusedPush(r.awaitEvents(refusedPush)) {
		t.Error("no refused receive-pack event")
	}

	// The second gate: a POST straight to git-receive-pack is refused too.
	req, _ := http.NewRequest(http.MethodPost, r.relay.URL+"/git/"+rm.hostport()+"/org/repo.git/git-receive-pack", strings.NewReader("0000"))
	req.Header.Set("X-Agentbox-Pairing", r.pairing.Reveal())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(rm.requests()) != 0 {
		t.Errorf("POST git-receive-pack: %d, remote saw %d requests", resp.StatusCode, len(rm.requests()))
	}
}

func TestPushInsidePushAllow(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, func(c *gitrelay.Config) { c.PushAllow = c.Allow })
	work := t.TempDir()
	r.mustGit(work, "clone", rm.url("org/repo.git"), "c")
	clone := filepath.Join(work, "c")
	// Bigger than git's http.postBuffer (1 MiB): the pack goes chunked, streamed through.
	if err := os.WriteFile(filepath.Join(clone, "big"), randomBytes(t, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	r.mustGit(clone, "add", "big")
	r.mustGit(clone, "commit", "-q", "-m", "pushed through the relay")
	head := strings.TrimSpace(r.mustGit(clone, "rev-parse", "HEAD"))
	rm.reset()
	if out, err := r.git(clone, "push", "origin", "HEAD:main"); err != nil {
		t.Fatalf("push: %v\n%s\nrelay log:\n%s\nremote saw: %+v", err, out, r.logs, rm.requests())
	}

	got := strings.TrimSpace(run(t, rm.root, hostEnv(rm.home), rm.git, "--git-dir", filepath.Join(rm.root, "org/repo.git"), "rev-parse", "main"))
	if got != head {
		t.Fatalf("remote main = %s, want %s", got, head)
	}
	chunked := false
	for _, q := range rm.requests() {
		if q.Path == "/org/repo.git/git-receive-pack" && q.Chunked && q.BodyBytes > 3<<20 {
			chunked = true
		}
	}
	if !chunked {
		t.Errorf("no chunked receive-pack request of the pack's size reached the remote: %+v", rm.requests())
	}
	// Bytes in the audit trail.
	bytesIn := func(evs []gitrelay.Event) (in int64) {
		for _, ev := range evs {
			if ev.Service == gitrelay.ReceivePack && !strings.HasSuffix(ev.Method, "GET") {
				in += ev.BytesIn
			}
		}
		return in
	}
	if in := bytesIn(r.awaitEvents(func(evs []gitrelay.Event) bool { return bytesIn(evs) >= 3<<20 })); in < 3<<20 {
		t.Errorf("receive-pack events count %d bytes in", in)
	}
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCredentialProblemsShown: the box learns why, and what to do, when the host-side
// credential is unusable or missing.
func TestCredentialProblemsShown(t *testing.T) {
	t.Parallel()
	loose := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(loose, []byte(remoteSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*gitrelay.Config)
		want string
	}{
		{"loose-file", func(c *gitrelay.Config) { c.Credentials[0].File = loose }, "git.credentials[0].file"},
		{"none", func(c *gitrelay.Config) { c.Credentials = nil }, "asks for a credential"},
		{"wrong", func(c *gitrelay.Config) {
			c.Credentials[0].Command = []string{"echo", "wrong"}
			c.Credentials[0].File = ""
		}, "refused the credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm, r := allowedRig(t, tc.mod)
			out, err := r.git(t.TempDir(), "ls-remote", rm.url("org/repo.git"))
			if err == nil || !strings.Contains(out, "remote error: agentbox: ") || !strings.Contains(out, tc.want) {
				t.Fatalf("err=%v, want %q:\n%s", err, tc.want, out)
			}
			if strings.Contains(out, "Username") {
				t.Errorf("git tried to prompt:\n%s", out)
			}
		})
	}
}

// TestAttackEncodedPathElements guards the git relay's single decoding (issue 21, finding 1):
// a box pushed to …/org/pushok/%252e%252e/%252e%252e/victim.git and the remote received
// /org/pushok/../../victim.git/git-receive-pack with the credential attached; %23 cut the
// upstream URL short of its smart-HTTP suffix. Each of these is refused by the relay with its
// bad_request error, and the remote sees nothing.
func TestAttackEncodedPathElements(t *testing.T) {
	t.Parallel()
	rm, r := allowedRig(t, func(c *gitrelay.Config) {
		c.PushAllow = []string{c.Allow[0] + "/pushok"}
	})
	for _, tc := range []struct{ name, method, path string }{
		{"double-encoded-dots-push", http.MethodPost, "/org/pushok/%252e%252e/%252e%252e/victim.git/git-receive-pack"},
		{"double-encoded-dots-info-refs", http.MethodGet, "/org/pushok/%252e%252e/%252e%252e/victim.git/info/refs?service=git-receive-pack"},
		{"encoded-hash", http.MethodGet, "/org/repo.git%23/info/refs?service=git-upload-pack"},
		{"double-encoded-hash", http.MethodGet, "/org/repo.git%2523/info/refs?service=git-upload-pack"},
		{"encoded-question-mark", http.MethodPost, "/org/repo%3F.git/git-upload-pack"},
		{"encoded-dots", http.MethodPost, "/org/pushok/%2e%2e/victim.git/git-receive-pack"},
		{"empty-element", http.MethodPost, "/org//repo.git/git-upload-pack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm.reset()
			req, err := http.NewRequest(tc.method, r.relay.URL+"/git/"+rm.hostport()+tc.path, strings.NewReader("0000"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Agentbox-Pairing", r.pairing.Reveal())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The git relay answers info/refs with git's pkt-line ERR (HTTP 200, so that git
			// shows it) and a service request with HTTP 400; the router refuses dot segments
			// and empty elements before the git relay sees them.
			refused := resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "[bad_request]") ||
				resp.StatusCode == http.StatusOK && strings.Contains(string(b), "ERR agentbox: ") && strings.Contains(string(b), "[bad_request]") ||
				resp.StatusCode == http.StatusNotFound && strings.Contains(string(b), `"code":"not_found"`)
			if !refused {
				t.Errorf("%s %s: %d %s, want the relay's refusal", tc.method, tc.path, resp.StatusCode, b)
			}
			for _, q := range rm.requests() {
				t.Errorf("the remote saw %s %s?%s (credential attached: %v)", q.Method, q.Path, q.Query, q.Auth != "")
			}
		})
	}
}
