package llm_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm"
)

// TestCredentialFileChanges guards the reuse of a credential file's content between requests:
// whatever changes the file — a rotation to a value of the same length, a chmod the checks
// refuse, a replacement — is seen by the next request.
func TestCredentialFileChanges(t *testing.T) {
	// Files written by the test are seconds old to the relay, so that their content is reused.
	defer llm.SetRacyNow(func() time.Time { return time.Now().Add(time.Hour) })()
	var path string
	r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) { path = g.Credential.File }})
	sent := func() string {
		t.Helper()
		reqs := r.up.Requests()
		if len(reqs) == 0 {
			t.Fatal("nothing reached the upstream")
		}
		return reqs[len(reqs)-1].Header.Get("X-Api-Key")
	}
	ok := func() {
		t.Helper()
		resp := r.do(r.request(context.Background(), r.defaultPath(), messageBody))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		r.record()
	}
	ok()
	ok()
	if got := sent(); got != r.hostCred {
		t.Fatalf("sent %q", got)
	}

	// Rotated in place, same length: the upstream gets the new value (and refuses it).
	rotated := strings.Repeat("r", len(r.hostCred))
	if err := os.WriteFile(path, []byte(rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
		http.StatusUnauthorized, api.CodeGatewayCredentialRejected)
	r.record()
	if got := sent(); got != rotated {
		t.Fatalf("after rotation sent %q", got)
	}

	// Replaced by rename with the right value again: used.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(r.hostCred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	ok()
	ok()
	if got := sent(); got != r.hostCred {
		t.Fatalf("after replacement sent %q", got)
	}

	// Opened to others: refused at once, although its content did not change.
	n := len(r.up.Requests())
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
		http.StatusUnauthorized, api.CodeGatewayCredentialMissing)
	r.record()
	if len(r.up.Requests()) != n {
		t.Fatal("request forwarded with a credential from a file open to others")
	}

	// Removed: refused.
	os.Chmod(path, 0o600)
	ok()
	os.Remove(path)
	expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
		http.StatusUnauthorized, api.CodeGatewayCredentialMissing)
	r.record()
}
