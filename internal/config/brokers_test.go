package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrokerKeysValidated(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"git allow pattern", "git:\n  allow:\n    - github.com/org/*\n", "config.yaml:3"},
		{"ssh key not a fingerprint", "git:\n  ssh:\n    hosts: [example.com]\n    keys: [notakey]\n", "git.ssh.keys"},
		{"gateway file and command", "gateway:\n  anthropic:\n    credential:\n      file: /x\n      command: [pass, show]\n", "gateway.anthropic.credential"},
		{"gateway header", "gateway:\n  openai:\n    credential:\n      header: Cookie\n", "gateway.openai.credential.header"},
		{"gemini header of another provider", "gateway:\n  gemini:\n    credential:\n      header: x-api-key\n", "gateway.gemini.credential.header"},
		{"anthropic header of gemini", "gateway:\n  anthropic:\n    credential:\n      header: x-goog-api-key\n", "gateway.anthropic.credential.header"},
		{"gemini url with a query", "gateway:\n  gemini:\n    url: https://gemini.example.com/?key=abc\n", "config.yaml:3:10: gateway.gemini.url"},
		{"gemini url not http", "gateway:\n  gemini:\n    url: generativelanguage.googleapis.com\n", "gateway.gemini.url"},
		{"gateway url with credentials", "gateway:\n  openai:\n    url: https://u:p@gw.example.com\n", "gateway.openai.url"},
		{"gemini file and command", "gateway:\n  gemini:\n    credential:\n      file: /x\n      command: [pass, show]\n", "gateway.gemini.credential"},
		// Issue 21, finding 7: no ~ expansion happens later, and a pushAllow entry outside
		// git.allow allows nothing.
		{"gateway credential file with ~", "gateway:\n  anthropic:\n    credential:\n      file: ~/.config/agentbox/anthropic.key\n", "gateway.anthropic.credential.file"},
		{"git credential file relative", "git:\n  allow: [github.com/org]\n  credentials:\n    - {prefix: github.com/org, username: x, file: token}\n", "git.credentials[0].file"},
		{"pushAllow outside allow", "git:\n  allow: [github.com/org]\n  pushAllow: [github.com/org/repo, github.com/other/repo]\n", "config.yaml:3: git.pushAllow[1]"},
		// Review 14, F8: the LLM relay's extra endpoints.
		{"gateway allow without a method", "gateway:\n  openai:\n    allow: [\"/v1/files\"]\n", "gateway.openai.allow[0]"},
		{"gateway allow dot segment", "gateway:\n  gemini:\n    allow: [\"POST /v1beta/models/x:generateContent\", \"GET /v1/../files\"]\n", "config.yaml:3:54: gateway.gemini.allow[1]"},
		{"pushAllow without allow", "git:\n  pushAllow: [github.com/org/repo]\n", "git.pushAllow[0]"},
		// Review 15, F12: the server-side tools a model call may declare.
		{"gateway serverTools not a name", "gateway:\n  anthropic:\n    serverTools: [web_search, \"web fetch\"]\n", "config.yaml:3:31: gateway.anthropic.serverTools[1]"},
		{"gateway serverTools empty", "gateway:\n  openai:\n    serverTools: [\"\"]\n", "gateway.openai.serverTools[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Validate(path)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
	ok := "gateway:\n  anthropic:\n    url: http://127.0.0.1:9\n    credential:\n      file: /tmp/key\n    serverTools: [web_search, mcp]\n" +
		"  gemini:\n    url: https://generativelanguage.googleapis.com\n    credential:\n      command: [pass, show, gemini]\n      header: x-goog-api-key\n" +
		"git:\n  allow: [github.com/org, \"http://127.0.0.1:8080/repos\"]\n  pushAllow: [github.com/org/repo]\n"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(ok), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(path); err != nil {
		t.Fatalf("valid broker config refused: %v", err)
	}
}

// TestBrokerErrorsAtTheirKey: a broker section's problem is reported at its own key, file,
// line and column, as the validators typed it (field.Error), not as a message taken apart.
// The git.egressUpstream case failed while config split the message on ": " (the field was
// `git.egressUpstream "http://egress.corp"` and the position that of `git:`).
func TestBrokerErrorsAtTheirKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field string
		line, col         int
		msg               string
	}{
		{"egressUpstream not https", "git:\n  allow: [github.com/org]\n  egressUpstream: http://egress.corp\n",
			"git.egressUpstream", 3, 19, `"http://egress.corp" must be an https URL`},
		{"credential username", "git:\n  allow: [github.com/org]\n  credentials:\n    - prefix: github.com/org\n      username: \"a:b\"\n      file: /x\n",
			"git.credentials[0].username", 5, 17, "must not contain a colon"},
		{"allow entry", "git:\n  allow:\n    - github.com/org\n    - git@github.com:org/repo\n",
			"git.allow[1]", 4, 7, `"git@github.com:org/repo" looks like an ssh remote`},
		{"ssh host again", "git:\n  ssh:\n    hosts: [example.com, \"example.com:2222\"]\n",
			"git.ssh.hosts[1]", 3, 26, `"example.com:2222" names host example.com again`},
		{"gateway header", "gateway:\n  openai:\n    credential:\n      header: Cookie\n",
			"gateway.openai.credential.header", 4, 15, "Cookie (allowed:"},
		{"pushAllow outside allow", "git:\n  allow: [github.com/org]\n  pushAllow: [github.com/org/repo, github.com/other/repo]\n",
			"git.pushAllow[1]", 3, 0, `"github.com/other/repo" lies within no git.allow entry`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Validate(path)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Validate = %v, want an *InvalidError", err)
			}
			if ie.File != path || ie.Field != tc.field || ie.Line != tc.line || ie.Column != tc.col || !strings.HasPrefix(ie.Msg, tc.msg) {
				t.Fatalf("got file %q line %d col %d field %q msg %q\nwant file %q line %d col %d field %q msg starting %q",
					ie.File, ie.Line, ie.Column, ie.Field, ie.Msg, path, tc.line, tc.col, tc.field, tc.msg)
			}
		})
	}
}
