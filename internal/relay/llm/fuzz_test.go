package llm_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// FuzzSplitPath checks that the path forwarded upstream is exactly what follows
// /sandbox/<provider>, and that the provider is one path segment.
func FuzzSplitPath(f *testing.F) {
	for _, s := range []string{
		"/sandbox/anthropic/v1/messages", "/sandbox/openai/v1/chat/completions", "/sandbox/anthropic",
		"/sandbox/anthropic/", "/sandbox//v1", "/sandbox/", "/git/x", "/sandbox/a/b/../c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		provider, rest, ok := llm.SplitPath(p)
		if !ok {
			return
		}
		if provider == "" || strings.Contains(provider, "/") {
			t.Fatalf("SplitPath(%q) provider %q", p, provider)
		}
		if rest != "" && rest[0] != '/' {
			t.Fatalf("SplitPath(%q) rest %q", p, rest)
		}
		if "/sandbox/"+provider+rest != p {
			t.Fatalf("SplitPath(%q) = %q, %q: does not rebuild the path", p, provider, rest)
		}
	})
}

// FuzzStripCredentials checks that no client credential header survives, whatever the
// spelling of its name, and that other headers are kept.
func FuzzStripCredentials(f *testing.F) {
	f.Add("x-api-key", "abp_x", "anthropic-version", "2023-06-01")
	f.Add("AUTHORIZATION", "Bearer abp_x", "Cookie", "a=b")
	f.Add("x-agentbox-pairing", "abp_x", "Proxy-Authorization", "Basic Zm9v")
	f.Add("X-Api-Key ", "v", "anthropic-beta", "tools-2024-04-04")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := http.Header{}
		h[k1] = []string{v1} // raw keys: not every spelling is canonical
		h.Add(k2, v2)
		kept := map[string]bool{}
		for k := range h {
			kept[k] = !isCredential(k)
		}
		llm.StripCredentials(h)
		for k := range h {
			if isCredential(k) {
				t.Fatalf("%q survived", k)
			}
		}
		for k, keep := range kept {
			if _, ok := h[k]; ok != keep {
				t.Fatalf("header %q kept=%v, want %v", k, ok, keep)
			}
		}
	})
}

func isCredential(k string) bool {
	for _, c := range []string{"Authorization", "X-Api-Key", "Proxy-Authorization", "Cookie", session.HeaderName} {
		if strings.EqualFold(k, c) {
			return true
		}
	}
	return false
}
