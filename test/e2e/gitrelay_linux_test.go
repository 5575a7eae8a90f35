//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
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
)

// The git remote's basic-auth credential. It lives host-side only: in a 0600 file named by
// git.credentials; the box must never see it.
const (
	gitRemoteUser   = "robot"
	gitRemoteSecret = "ghp_e2eRemoteS3cret0123456789abcdef"
)

// gitRequest is what the remote saw of one request.
type gitRequest struct {
	Method, Path, Query string
	Authorized          bool
	BodyBytes           int64
	Canceled            bool // the request's context ended before the handler finished
}

// gitRemote is a real git smart-HTTP server: `git http-backend` under net/http/cgi, requiring
// basic auth, serving the bare repositories under root. A gate can hold the pack of one
// repository's upload-pack answer after its first bytes.
type gitRemote struct {
	t    testing.TB
	root string
	home string
	srv  *httptest.Server

	mu   sync.Mutex
	reqs []gitRequest
	gate *packGate
}

// packGate holds the upload-pack answer of repo once `after` bytes are written, until released
// or the request is cancelled.
type packGate struct {
	repo     string
	after    int64
	started  chan struct{} // closed when the answer is held
	release  chan struct{}
	canceled chan struct{} // closed when the held request's context ends
	once     sync.Once
}

func gitTools(t testing.TB) (backend string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	return backend
}

// gitHostEnv is the environment of host-side git commands: no user or system configuration.
func gitHostEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Remote Author", "GIT_AUTHOR_EMAIL=remote@example.com",
		"GIT_COMMITTER_NAME=Remote Author", "GIT_COMMITTER_EMAIL=remote@example.com",
	}
}

func newGitRemote(t testing.TB) *gitRemote {
	t.Helper()
	backend := gitTools(t)
	root, err := os.MkdirTemp("", "abgit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	rm := &gitRemote{t: t, root: filepath.Join(root, "repos"), home: filepath.Join(root, "home")}
	os.MkdirAll(rm.root, 0o755)
	os.MkdirAll(rm.home, 0o755)
	cgiH := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env: []string{"GIT_PROJECT_ROOT=" + rm.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + rm.home},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	rm.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		rq := gitRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Authorized: ok && u == gitRemoteUser && p == gitRemoteSecret}
		cb := &countingBody{ReadCloser: r.Body}
		r.Body = cb
		defer func() {
			rq.BodyBytes = cb.n
			rq.Canceled = r.Context().Err() != nil
			rm.mu.Lock()
			rm.reqs = append(rm.reqs, rq)
			rm.mu.Unlock()
		}()
		if !rq.Authorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="remote"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		rm.mu.Lock()
		g := rm.gate
		rm.mu.Unlock()
		if g != nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/"+g.repo+"/git-upload-pack") {
			w = &gatedWriter{ResponseWriter: w, g: g, ctx: r.Context()}
		}
		if r.ContentLength < 0 {
			// net/http/cgi refuses chunked bodies: spool them (the relay still streams).
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
	}))
	t.Cleanup(rm.srv.Close)
	return rm
}

type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

type gatedWriter struct {
	http.ResponseWriter
	g       *packGate
	ctx     context.Context
	written int64
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	if err == nil && w.written >= w.g.after {
		w.g.once.Do(func() {
			http.NewResponseController(w.ResponseWriter).Flush()
			close(w.g.started)
			select {
			case <-w.g.release:
			case <-w.ctx.Done():
				close(w.g.canceled)
			}
		})
	}
	return n, err
}

func (w *gatedWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// holdPack installs a gate on repo's upload-pack answer.
func (rm *gitRemote) holdPack(repo string, after int64) *packGate {
	g := &packGate{repo: repo, after: after, started: make(chan struct{}), release: make(chan struct{}), canceled: make(chan struct{})}
	rm.mu.Lock()
	rm.gate = g
	rm.mu.Unlock()
	return g
}

func (rm *gitRemote) requests() []gitRequest {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return append([]gitRequest(nil), rm.reqs...)
}

// base is the remote's URL, http://127.0.0.1:PORT.
func (rm *gitRemote) base() string { return rm.srv.URL }

// url is a repository's URL on the remote.
func (rm *gitRemote) url(repo string) string { return rm.srv.URL + "/" + repo }

func (rm *gitRemote) git(dir string, args ...string) string {
	rm.t.Helper()
	return gitRun(rm.t, dir, gitHostEnv(rm.home), nil, args...)
}

func gitRun(t testing.TB, dir string, env []string, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepo makes a bare repository with a README commit on main.
func (rm *gitRemote) newRepo(name string) string {
	rm.t.Helper()
	bare := filepath.Join(rm.root, name)
	rm.git(rm.root, "init", "-q", "--bare", "-b", "main", bare)
	// http-backend serves receive-pack only to authenticated users (REMOTE_USER), which the
	// CGI environment does not carry: the test remote authenticates in front of it.
	rm.git(bare, "config", "http.receivepack", "true")
	rm.commit(name, "README", "hello from "+name+"\n")
	return bare
}

// commit adds a commit to main of a bare repository, host-side.
func (rm *gitRemote) commit(repo, file, content string) {
	rm.t.Helper()
	wt, err := os.MkdirTemp(rm.home, "wt")
	if err != nil {
		rm.t.Fatal(err)
	}
	defer os.RemoveAll(wt)
	bare := filepath.Join(rm.root, repo)
	rm.git(wt, "clone", "-q", bare, ".")
	if err := os.WriteFile(filepath.Join(wt, file), []byte(content), 0o644); err != nil {
		rm.t.Fatal(err)
	}
	rm.git(wt, "add", file)
	rm.git(wt, "commit", "-q", "-m", "update "+file)
	rm.git(wt, "push", "-q", "origin", "HEAD:main")
}

// bigRepo makes a bare repository of about size bytes of incompressible blobs with git
// fast-import, in a few commits.
func (rm *gitRemote) bigRepo(name string, size int) string {
	rm.t.Helper()
	bare := filepath.Join(rm.root, name)
	rm.git(rm.root, "init", "-q", "--bare", "-b", "main", bare)
	gitRun(rm.t, bare, gitHostEnv(rm.home), bytes.NewReader(fastImportStream(size)), "fast-import", "--quiet")
	return bare
}

// fastImportStream is a fast-import stream of files of 1 MiB random bytes, 8 per commit, that
// add up to about size bytes.
func fastImportStream(size int) []byte {
	const blob = 1 << 20
	var buf bytes.Buffer
	data := make([]byte, blob)
	n := (size + blob - 1) / blob
	for i := range n {
		rand.Read(data)
		fmt.Fprintf(&buf, "blob\nmark :%d\ndata %d\n", i+1, blob)
		buf.Write(data)
		buf.WriteByte('\n')
	}
	for c := 0; c*8 < n; c++ {
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(&buf, "commit refs/heads/main\ncommitter Gen <gen@example.com> %d +0000\ndata %d\n%s\n", 1700000000+c, len(msg), msg)
		for i := c * 8; i < min(n, c*8+8); i++ {
			fmt.Fprintf(&buf, "M 100644 :%d data/f%03d.bin\n", i+1, i)
		}
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// gitEnv is an environment whose git relay allows the remote's repositories in allow, may
// push to those in push, and attaches the remote's credential from a 0600 file.
func gitEnv(t *testing.T, rm *gitRemote, allow, push []string) *Env {
	t.Helper()
	e := NewEnv(t)
	credFile := filepath.Join(e.Home, "git-token")
	if err := os.WriteFile(credFile, []byte(gitRemoteSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("git:\n  allow:\n")
	for _, a := range allow {
		fmt.Fprintf(&y, "    - %s\n", rm.url(a))
	}
	if len(push) > 0 {
		y.WriteString("  pushAllow:\n")
		for _, p := range push {
			fmt.Fprintf(&y, "    - %s\n", rm.url(p))
		}
	}
	fmt.Fprintf(&y, "  credentials:\n    - prefix: %s\n      username: %s\n      file: %s\n", rm.base(), gitRemoteUser, credFile)
	writeConfig(t, e, y.String())
	logDaemonOnFailure(t, e)
	return e
}

// logDaemonOnFailure logs the relay's lines of the daemon log when the test fails. It is
// registered after NewEnv, so it runs before the environment is removed.
func logDaemonOnFailure(t *testing.T, e *Env) {
	t.Cleanup(func() {
		if t.Failed() {
			e.logDaemonTail(80, func(line string) bool {
				return strings.Contains(line, "relay") || strings.Contains(line, "git") || strings.Contains(line, "session")
			})
		}
	})
}

// boxGit is the preamble of box scripts that run git: an identity for commits and no pager.
const boxGit = `export GIT_AUTHOR_NAME=Box GIT_AUTHOR_EMAIL=box@example.com GIT_COMMITTER_NAME=Box GIT_COMMITTER_EMAIL=box@example.com GIT_PAGER=cat; `

func mustBox(t *testing.T, e *Env, script string) Result {
	t.Helper()
	r := e.Box(boxGit + script)
	if r.Code != 0 {
		t.Fatalf("box script failed: exit %d\nscript: %s\nstdout:\n%s\nstderr:\n%s", r.Code, script, r.Stdout, r.Stderr)
	}
	return r
}

func (rm *gitRemote) refs(repo string) string {
	rm.t.Helper()
	return rm.git(filepath.Join(rm.root, repo), "for-each-ref")
}

// objects is the bare repository's object count (loose and packed), and its pack files.
func (rm *gitRemote) objects(repo string) string {
	rm.t.Helper()
	bare := filepath.Join(rm.root, repo)
	out := rm.git(bare, "count-objects", "-v")
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "*"))
	return out + strings.Join(packs, "\n")
}

// TestGitRelay: git in a box with egress deny clones, fetches and pulls an allowed repository
// through the relay, the credential attached host-side; a repository outside git.allow is
// refused with a message git shows; a push outside git.pushAllow is refused before any pack is
// sent and the remote is unchanged; a push inside git.pushAllow lands.
func TestGitRelay(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	rm := newGitRemote(t)
	rm.newRepo("allowed.git")
	rm.newRepo("scratch.git")
	rm.newRepo("other.git")
	e := gitEnv(t, rm, []string{"allowed.git", "scratch.git"}, []string{"scratch.git"})

	t.Run("clone fetch pull", func(t *testing.T) {
		r := mustBox(t, e, `git clone -q `+rm.url("allowed.git")+` allowed && cat allowed/README && git -C allowed config remote.origin.url`)
		if !strings.Contains(r.Stdout, "hello from allowed.git") {
			t.Fatalf("clone: README not there:\n%s", r.Stdout)
		}
		// The remote keeps its real URL: the rewrite to the relay lives in the generated gitconfig.
		if !strings.Contains(r.Stdout, rm.url("allowed.git")) {
			t.Errorf("origin is not the remote's own URL:\n%s", r.Stdout)
		}
		rm.commit("allowed.git", "NEWS", "fetched\n")
		r = mustBox(t, e, `cd allowed && git fetch -q origin && git log --format=%s origin/main | head -1`)
		if strings.TrimSpace(r.Stdout) != "update NEWS" {
			t.Fatalf("fetch: origin/main is at %q", r.Stdout)
		}
		rm.commit("allowed.git", "PULLED", "pulled\n")
		r = mustBox(t, e, `cd allowed && git pull -q --ff-only && cat NEWS PULLED`)
		if r.Stdout != "fetched\npulled\n" {
			t.Fatalf("pull: worktree has %q", r.Stdout)
		}
		for _, rq := range rm.requests() {
			if !rq.Authorized {
				t.Errorf("the remote got a request without the credential: %+v", rq)
			}
		}
	})

	t.Run("the box has no credential", func(t *testing.T) {
		r := e.Box(`env; ls -la /run/agentbox; for f in /run/agentbox/*; do echo "== $f"; cat "$f"; done; grep -rs . /run/agentbox; cat allowed/.git/config; git config --list --show-origin`)
		out := r.Stdout + r.Stderr
		if strings.Contains(out, gitRemoteSecret) || strings.Contains(out, "git-token") {
			t.Fatalf("the git credential (or its file) is visible in the box:\n%s", out)
		}
		if !strings.Contains(out, "X-Agentbox-Pairing") {
			t.Errorf("the generated gitconfig was not seen (is the check blind?):\n%s", out)
		}
	})

	t.Run("not allowlisted", func(t *testing.T) {
		n := len(rm.requests())
		r := e.Box(boxGit + `git clone ` + rm.url("other.git") + ` other; echo "exit=$?"`)
		out := r.Stdout + r.Stderr
		if !strings.Contains(out, "exit=128") || !strings.Contains(out, "remote error:") ||
			!strings.Contains(out, "not in git.allow") || !strings.Contains(out, "git_not_allowed") {
			t.Fatalf("clone of a repository outside git.allow: want a remote error naming git.allow:\n%s", out)
		}
		for _, rq := range rm.requests()[n:] {
			t.Errorf("the remote was contacted for a refused repository: %+v", rq)
		}
	})

	t.Run("push outside pushAllow", func(t *testing.T) {
		mustBox(t, e, `cd allowed && echo local > LOCAL && git add LOCAL && git commit -q -m local`)
		refsBefore, objsBefore := rm.refs("allowed.git"), rm.objects("allowed.git")
		n := len(rm.requests())
		r := e.Box(boxGit + `cd allowed && git push origin HEAD:main; echo "exit=$?"; git push origin HEAD:refs/heads/sneaky; echo "exit=$?"`)
		out := r.Stdout + r.Stderr
		if strings.Count(out, "exit=128") != 2 || strings.Count(out, "remote error:") != 2 || !strings.Contains(out, "git_push_not_allowed") {
			t.Fatalf("push outside git.pushAllow: want two refusals with remote error:\n%s", out)
		}
		if got := rm.refs("allowed.git"); got != refsBefore {
			t.Errorf("the remote's refs changed:\nbefore:\n%s\nafter:\n%s", refsBefore, got)
		}
		if got := rm.objects("allowed.git"); got != objsBefore {
			t.Errorf("objects reached the remote:\nbefore:\n%s\nafter:\n%s", objsBefore, got)
		}
		for _, rq := range rm.requests()[n:] {
			if strings.Contains(rq.Path+rq.Query, "receive-pack") {
				t.Errorf("a receive-pack request reached the remote: %+v", rq)
			}
		}
	})

	t.Run("push inside pushAllow", func(t *testing.T) {
		before := rm.refs("scratch.git")
		r := mustBox(t, e, `git clone -q `+rm.url("scratch.git")+` scratch && cd scratch && echo pushed > PUSHED && git add PUSHED && git commit -q -m "from the box" && git push -q origin HEAD:main && git rev-parse HEAD`)
		head := strings.TrimSpace(r.Stdout)
		after := rm.refs("scratch.git")
		if after == before || !strings.Contains(after, head+" commit\trefs/heads/main") {
			t.Fatalf("push did not land: box HEAD %s, remote refs:\n%s", head, after)
		}
		if got := rm.git(filepath.Join(rm.root, "scratch.git"), "show", "main:PUSHED"); got != "pushed\n" {
			t.Fatalf("remote main:PUSHED = %q", got)
		}
		var packBytes int64
		for _, rq := range rm.requests() {
			if rq.Method == http.MethodPost && strings.HasSuffix(rq.Path, "/scratch.git/git-receive-pack") {
				packBytes += rq.BodyBytes
			}
		}
		if packBytes == 0 {
			t.Errorf("the remote saw no receive-pack body")
		}
	})
}

// TestGitRelayRevoke: revoking the launch while a clone of a larger repository is in flight
// cancels the transfer (the clone fails, the remote's request is cancelled), and the box's next
// git command is refused with 403 (pairing_invalid).
func TestGitRelayRevoke(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	rm := newGitRemote(t)
	rm.bigRepo("big.git", 24<<20)
	rm.newRepo("small.git")
	e := gitEnv(t, rm, []string{"big.git", "small.git"}, nil)
	// Hold the pack after its first 256 KiB, so that revocation deterministically meets a
	// transfer in flight.
	g := rm.holdPack("big.git", 256<<10)
	script := boxGit + `git clone --progress ` + rm.url("big.git") + ` big > clone.out 2>&1; echo "exit=$?" >> clone.out; touch cloned; ` +
		`while [ ! -e go ]; do sleep 0.05; done; ` +
		`git ls-remote ` + rm.url("small.git") + ` > next.out 2>&1; echo "exit=$?" >> next.out; ` +
		`curl -sS -H "X-Agentbox-Pairing: $AGENTBOX_PAIRING" "$AGENTBOX_RELAY_URL/git/` + strings.TrimPrefix(rm.base(), "http://") + `/small.git/info/refs?service=git-upload-pack" >> next.out 2>&1; touch done`
	id := e.Detach("sh", "--", "-c", script)
	eventually(t, "the pack in flight", func() bool {
		select {
		case <-g.started:
			return true
		default:
			return false
		}
	})
	if r := e.Run("", "revoke", id); r.Code != 0 {
		t.Fatalf("revoke: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	eventually(t, "the clone to end", func() bool { _, err := os.Stat(filepath.Join(e.Work, "cloned")); return err == nil })
	close(g.release)
	clone, _ := os.ReadFile(filepath.Join(e.Work, "clone.out"))
	if strings.Contains(string(clone), "exit=0") {
		t.Fatalf("the clone finished despite the revocation:\n%s", clone)
	}
	select {
	case <-g.canceled:
	default:
		t.Errorf("the remote's upload-pack request was not cancelled by the revocation")
	}
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next git command", func() bool { _, err := os.Stat(filepath.Join(e.Work, "done")); return err == nil })
	next, _ := os.ReadFile(filepath.Join(e.Work, "next.out"))
	if !strings.Contains(string(next), "exit=128") || !strings.Contains(string(next), "403") || !strings.Contains(string(next), "pairing_invalid") {
		t.Fatalf("after revocation: want git to fail with 403 and the relay to say pairing_invalid:\n%s", next)
	}
	t.Logf("clone after revocation:\n%s\nnext:\n%s", clone, next)
}
