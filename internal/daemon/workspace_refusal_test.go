package daemon

import (
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestWorkspaceRefusalFields: the refusal's reason and hint come from plan.WorkspaceError's
// fields, so a workspace whose path holds "; " is named whole and the hint is the hint. Split
// on "; " from the message, the path was cut in two and its rest led the hint.
func TestWorkspaceRefusalFields(t *testing.T) {
	ws := "/home/u/.ssh/keys; notes"
	err := plan.CheckWorkspace(ws, plan.WorkspaceFacts{Home: "/home/u"})
	if err == nil {
		t.Fatalf("CheckWorkspace(%q) = nil, want a refusal", ws)
	}
	why, hint := workspaceRefusal(err)
	if want := ws + " is inside /home/u/.ssh, which holds credentials or agent configuration"; why != want {
		t.Errorf("why = %q\nwant %q", why, want)
	}
	if want := "work on a project directory outside it"; hint != want {
		t.Errorf("hint = %q\nwant %q", hint, want)
	}
}
