package relay

import (
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/session"
)

// FuzzRoute checks that every path the router hands to a broker is clean and really under
// that broker's prefix once cleaned, so that no upstream can read it as another route.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		"/sandbox/anthropic/v1/messages", "/git/github.com/o/r.git/info/refs", "/sandbox/../git/x",
		"/sandbox//x", "/sandbox/./x", "/sandbox/x/", "/git/", "", "sandbox/x", "/sandbox/a\x00b",
		"/sandbox/a\\..\\b", "/SANDBOX/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		b := Route(p)
		if b == "" {
			return
		}
		if !strings.HasPrefix(p, "/"+b+"/") {
			t.Fatalf("Route(%q) = %q without its prefix", p, b)
		}
		clean := path.Clean(p)
		if !strings.HasPrefix(clean+"/", "/"+b+"/") {
			t.Fatalf("Route(%q) = %q but it cleans to %q", p, b, clean)
		}
		for _, seg := range strings.Split(p, "/") {
			if seg == ".." || seg == "." {
				t.Fatalf("Route(%q) admitted a dot segment", p)
			}
		}
		if strings.ContainsAny(p, "\x00\r\n\\") {
			t.Fatalf("Route(%q) admitted a control character or backslash", p)
		}
	})
}

// FuzzPairingCandidates checks the pairing extraction on arbitrary header values: it is
// bounded, never panics, and only yields trimmed, non-empty values.
func FuzzPairingCandidates(f *testing.F) {
	f.Add("abp_x", "Bearer abp_y", "abp_z", "")
	f.Add("", "Basic Zm9vOmJhcg==", "", "abp_g")
	f.Add("  ", "Bearer", "\t", " ")
	f.Add("k", "bearer  abp_two spaces", "v", "abp_goog")
	f.Fuzz(func(t *testing.T, apiKey, authz, pairing, googKey string) {
		h := http.Header{}
		h.Add("X-Api-Key", apiKey)
		h.Add("X-Goog-Api-Key", googKey)
		h.Add("Authorization", authz)
		h.Add(session.HeaderName, pairing)
		h.Add(session.HeaderName, pairing)
		got := pairingCandidates(h)
		if len(got) > maxPairingCandidates {
			t.Fatalf("%d candidates", len(got))
		}
		for _, c := range got {
			if c == "" || c != strings.TrimSpace(c) {
				t.Fatalf("candidate %q", c)
			}
		}
		if len(got) > 0 && strings.TrimSpace(pairing) != "" && got[0] != strings.TrimSpace(pairing) {
			t.Fatalf("X-Agentbox-Pairing not tried first: %q", got)
		}
		if g := strings.TrimSpace(googKey); g != "" && len(got) < maxPairingCandidates && !slices.Contains(got, g) {
			t.Fatalf("x-goog-api-key %q not tried: %q", g, got)
		}
	})
}
