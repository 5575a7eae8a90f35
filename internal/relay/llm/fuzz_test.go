package llm_test

import (
	"encoding/json"
	"net/http"
	"net/url"
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
		"/sandbox/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent",
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
	f.Add("x-goog-api-key", "abp_x", "x-goog-api-client", "google-genai-sdk/1.30.0")
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
	for _, c := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization", "Cookie", session.HeaderName} {
		if strings.EqualFold(k, c) {
			return true
		}
	}
	return false
}

// FuzzStripQueryCredentials checks that no credential parameter (key, access_token) survives
// in the query sent upstream, however its name is spelled or encoded and whatever a server
// takes for a separator ('&' or ';'), and that every other parameter is kept as sent.
func FuzzStripQueryCredentials(f *testing.F) {
	for _, s := range []string{"alt=sse&key=abp_x", "%6Bey=abp_x", "alt=sse;KEY=abp_x", "+key=x&a=%zz", "access_token=t&b=2", "a=1&&b=2", "key"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := llm.StripQueryCredentials(q)
		for p := range strings.SplitSeq(out, "&") {
			for sub := range strings.SplitSeq(p, ";") {
				name, _, _ := strings.Cut(sub, "=")
				if n, err := url.QueryUnescape(name); err == nil {
					name = n
				}
				if n := strings.TrimSpace(name); strings.EqualFold(n, "key") || strings.EqualFold(n, "access_token") {
					t.Fatalf("StripQueryCredentials(%q) = %q keeps %q", q, out, sub)
				}
			}
		}
		// What is kept is the input's parameters, in order, byte for byte.
		in := strings.Split(q, "&")
		for p := range strings.SplitSeq(out, "&") {
			if out == "" {
				break
			}
			i := 0
			for i < len(in) && in[i] != p {
				i++
			}
			if i == len(in) {
				t.Fatalf("StripQueryCredentials(%q) = %q: %q is not one of the input's parameters", q, out, p)
			}
			in = in[i+1:]
		}
	})
}

// FuzzServerTools: any body is read or refused, never a panic (the daemon serves every box),
// and a body the check reads is valid JSON: what it could not parse, a gateway could read
// otherwise.
func FuzzServerTools(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"type":"web_fetch_20250910"}]}`, `{"tools":[{"type":"namespace","tools":[{"type":"mcp"}]}]}`,
		`{"tools":[{"google_search":{}}]}`, `{"mcp_servers":[{"url":"x"}]}`, `{"tools":[],"tools":[]}`, `{"a":1} x`, `[`, `{"tools":{"type":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range []string{llm.Anthropic, llm.OpenAI, llm.Gemini} {
			if _, err := llm.ServerTools(p, []byte(body)); err == nil && !json.Valid([]byte(body)) {
				t.Fatalf("%s: %q read as a model call, but it is not JSON", p, body)
			}
		}
	})
}
