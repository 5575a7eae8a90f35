package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
)

// TestCredentialProgramsNotFound (review 19, F1): a credential helper that cannot be found
// refuses the launch (config_invalid), naming the key, the program and what to do, rather
// than leaving the relay to look it up at its first use; one named by an absolute path is
// compared as written even when absent.
func TestCredentialProgramsNotFound(t *testing.T) {
	var c config.Config
	c.Gateway.Anthropic.Credential.Command = []string{"/bin/sh", "-c", "echo k"}
	c.Git.Credentials = []gitrelay.Credential{{Prefix: "git.example.org/team", Username: "u", Command: []string{"/nonexistent/agentbox-test-helper"}}}
	progs, err := credentialPrograms(c)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeConfigInvalid {
		t.Fatalf("err = %v, want a config_invalid refusal", err)
	}
	for _, w := range []string{"git.credentials[0].command", "/nonexistent/agentbox-test-helper"} {
		if !strings.Contains(ae.Message, w) {
			t.Errorf("the refusal does not name %q: %s", w, ae.Message)
		}
	}
	if !strings.Contains(ae.Hint, "install it") {
		t.Errorf("the hint does not say what to do: %s", ae.Hint)
	}
	if !strings.Contains(strings.Join(progs, " "), "/bin/sh") || !strings.Contains(strings.Join(progs, " "), "/nonexistent/agentbox-test-helper") {
		t.Fatalf("programs = %q, want /bin/sh and the absent helper as written", progs)
	}
}

// TestCredentialProgramsUnreadableCommand (review 19b, finding 1): a credential command whose
// paths config.CommandPaths cannot read (refused at load by config.CheckCommand) is refused
// again at the launch, should a configuration reach the daemon unchecked: the workspace rule
// would compare none of its paths.
func TestCredentialProgramsUnreadableCommand(t *testing.T) {
	var c config.Config
	c.Gateway.OpenAI.Credential.Command = []string{"/bin/sh", "-c", "cd && exec ./proj/token"}
	_, err := credentialPrograms(c)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeConfigInvalid || !strings.Contains(ae.Message, "gateway.openai.credential.command") || !strings.Contains(ae.Hint, "absolute path") {
		t.Fatalf("err = %v, want a config_invalid refusal naming gateway.openai.credential.command, with the fix", err)
	}
}
