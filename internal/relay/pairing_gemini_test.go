package relay

import (
	"net/http"
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/session"
)

// TestPairingCandidatesGoogAPIKey: the Google GenAI SDK (Gemini CLI) sends its API key, the
// launch's pairing, in x-goog-api-key; it is tried after X-Agentbox-Pairing and x-api-key and
// before Authorization: Bearer.
func TestPairingCandidatesGoogAPIKey(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer abp_bearer")
	h.Set("X-Goog-Api-Key", " abp_goog ")
	if got := pairingCandidates(h); !slices.Equal(got, []string{"abp_goog", "abp_bearer"}) {
		t.Fatalf("candidates %q", got)
	}
	h.Set("x-api-key", "abp_x")
	h.Set(session.HeaderName, "abp_p")
	if got := pairingCandidates(h); !slices.Equal(got, []string{"abp_p", "abp_x", "abp_goog", "abp_bearer"}) {
		t.Fatalf("candidates %q", got)
	}
}
