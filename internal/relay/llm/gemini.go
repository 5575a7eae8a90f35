package llm

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
)

// queryCredentials are the query parameters through which Google's APIs take a credential
// (an API key, an OAuth access token). Whatever the box sends there is at most a pairing.
var queryCredentials = []string{"key", "access_token"}

// StripQueryCredentials returns the raw query q without its credential parameters (key=,
// access_token=), whatever the case or percent-encoding of their names; every other parameter
// is kept byte for byte, in order. A parameter counts as a credential when any of its
// ';'-separated parts is named like one, so that no server splitting on ';' can read one.
func StripQueryCredentials(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	kept := parts[:0]
	for _, p := range parts {
		if !isQueryCredential(p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "&")
}

func isQueryCredential(param string) bool {
	for sub := range strings.SplitSeq(param, ";") {
		name, _, _ := strings.Cut(sub, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		name = strings.TrimSpace(name)
		for _, c := range queryCredentials {
			if strings.EqualFold(name, c) {
				return true
			}
		}
	}
	return false
}

// maxErrorPeek bounds what is read of a Gemini 400 answer to tell a refused API key from any
// other bad request.
const maxErrorPeek = 64 << 10

// apiKeyInvalid reports whether resp, a 400 from a Gemini gateway, is Google's answer to an API
// key it does not accept (INVALID_ARGUMENT with reason API_KEY_INVALID). resp's body is left
// whole for whoever reads it next.
func apiKeyInvalid(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorPeek))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	var e struct {
		Error struct {
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return false
	}
	for _, d := range e.Error.Details {
		if d.Reason == "API_KEY_INVALID" {
			return true
		}
	}
	return false
}

// geminiRevokedEvent ends a Gemini stream whose session was revoked or ended: Gemini streams
// are data-only, and their errors Google's {"error":{"code","message","status"}}, here with
// the relay's code as the reason of its details.
var geminiRevokedEvent = func() string {
	b, err := json.Marshal(map[string]any{"error": map[string]any{
		"code":    http.StatusForbidden,
		"message": "the relay cancelled this stream: its session ended or was revoked",
		"status":  "PERMISSION_DENIED",
		"details": []any{map[string]any{
			"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": api.CodePairingInvalid,
			"domain": "agentbox",
		}},
	}})
	if err != nil {
		panic(err)
	}
	return "data: " + string(b) + "\n\n"
}()
