package llm

import (
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Endpoint is a request the relay forwards to a gateway: a method and a pattern for the path
// after /sandbox/<provider>, in path.Match syntax ("*" is any run of characters but "/").
type Endpoint struct {
	Method string
	Path   string
}

func (e Endpoint) String() string { return e.Method + " " + e.Path }

// matches reports whether a request of method to rest (SplitPath's rest) is e's.
func (e Endpoint) matches(method, rest string) bool {
	if method != e.Method {
		return false
	}
	ok, _ := path.Match(e.Path, rest)
	return ok
}

// endpointMethods are the methods an Endpoint may name.
var endpointMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// ParseEndpoint parses "METHOD /path" (gateway.<provider>.allow's entries): an upper-case
// method of endpointMethods, one space, and a path pattern that starts with "/", is a valid
// path.Match pattern, and holds no dot segment, empty element, "%", "?", "#" or backslash (the
// relay refuses such paths before it looks at the endpoints: checkRest).
func ParseEndpoint(s string) (Endpoint, error) {
	method, p, ok := strings.Cut(s, " ")
	if !ok {
		return Endpoint{}, fmt.Errorf("%q: want \"METHOD /path\", e.g. \"POST /v1/embeddings\"", s)
	}
	known := false
	for _, m := range endpointMethods {
		known = known || m == method
	}
	if !known {
		return Endpoint{}, fmt.Errorf("%q: method %q is not one of %s", s, method, strings.Join(endpointMethods, ", "))
	}
	if !strings.HasPrefix(p, "/") {
		return Endpoint{}, fmt.Errorf("%q: the path must start with /", s)
	}
	if _, err := path.Match(p, ""); err != nil {
		return Endpoint{}, fmt.Errorf("%q: the path is not a valid pattern (* is any run of characters but /): %v", s, err)
	}
	if err := checkRest(strings.ReplaceAll(p, "*", "x")); err != nil {
		return Endpoint{}, fmt.Errorf("%q: %v", s, err)
	}
	if strings.ContainsAny(p, "[]") {
		return Endpoint{}, fmt.Errorf("%q: the path may not hold [ or ] (only * is a wildcard)", s)
	}
	return Endpoint{Method: method, Path: p}, nil
}

// DefaultEndpoints are the requests the relay forwards for each provider, before the user's
// gateway.<provider>.allow: the inference endpoints the profiles' programs call (Claude Code,
// OpenCode and Copilot CLI on anthropic; Codex, OpenCode and Copilot CLI on openai; Gemini CLI
// on gemini), and the model lists. Everything else a key reaches — the account's files,
// batches, fine-tunes, vector stores, stored responses, admin keys — is refused with 403
// gateway_path_refused: a box wields the user's credential for model calls only (review 14,
// F8).
var DefaultEndpoints = map[string][]Endpoint{
	Anthropic: {
		{http.MethodPost, "/v1/messages"},
		{http.MethodPost, "/v1/messages/count_tokens"},
		{http.MethodGet, "/v1/models"},
		{http.MethodGet, "/v1/models/*"},
		// Claude Code's connectivity check (seen from 2.1 in TestInteractiveClaude).
		{http.MethodHead, "/api/hello"},
	},
	OpenAI: {
		{http.MethodPost, "/v1/responses"},
		{http.MethodPost, "/v1/responses/compact"},
		{http.MethodPost, "/v1/chat/completions"},
		{http.MethodGet, "/v1/models"},
		{http.MethodGet, "/v1/models/*"},
	},
	Gemini: geminiEndpoints("/v1beta", "/v1"),
}

func geminiEndpoints(versions ...string) []Endpoint {
	var out []Endpoint
	for _, v := range versions {
		out = append(out, Endpoint{http.MethodGet, v + "/models"}, Endpoint{http.MethodGet, v + "/models/*"})
		for _, m := range []string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"} {
			out = append(out, Endpoint{http.MethodPost, v + "/models/*:" + m})
		}
	}
	return out
}

// allowed reports whether g forwards a request of method to rest.
func (g *gateway) allowed(method, rest string) bool {
	for _, e := range g.endpoints {
		if e.matches(method, rest) {
			return true
		}
	}
	return false
}
