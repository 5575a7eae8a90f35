package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestSessionRevokeChecksID: `agentbox session revoke ""` (an empty argument) (and ids that are no session id)
// are refused before any client is built, with an error naming the argument and what a
// session id looks like. Before, the empty id went to the daemon as DELETE /v0/sessions/.
func TestSessionRevokeChecksID(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // no daemon here: a check that passed would fail otherwise
	for _, id := range []string{"", "s_", "../..", "s_0123456789abcdeF", "s_0123456789abcde/", "0123456789abcdef01"} {
		root := Command()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs([]string{"session", "revoke", id})
		err := root.Execute()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(ae.Message, "SESSION") || !strings.Contains(ae.Message, "session id") {
			t.Errorf("session revoke %q: %v; want a bad_request naming SESSION and what a session id is", id, err)
		}
	}
	if err := api.CheckSessionID("s_0123456789abcdef"); err != nil {
		t.Errorf("a well-formed session id: %v", err)
	}
}
