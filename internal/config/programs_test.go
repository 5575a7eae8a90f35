package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProgramsAndManagedErrors(t *testing.T) {
	tests := []struct {
		name       string
		yaml       string
		line, col  int
		field, msg string
	}{
		{"profile unknown key", "programs:\n  tool:\n    executables: [tool]\n    homes: []\n", 4, 5, "programs.tool.homes", "unknown key"},
		{"profile wrong type", "programs:\n  tool:\n    executables: tool\n", 3, 18, "programs.tool.executables", "wrong type: got string, want list"},
		{"profile bad enum", "programs:\n  tool:\n    home:\n      - {path: .tool, access: maybe}\n", 4, 31, "programs.tool.home[0].access", `invalid value "maybe" (allowed: rw, ro, deny, private, state, cache, link)`},
		{"profile absolute home path", "programs:\n  tool:\n    home:\n      - path: /etc\n        access: ro\n", 4, 15, "programs.tool.home[0].path", "must be relative"},
		{"profile escaping home path", "programs:\n  tool:\n    home:\n      - path: ../x\n        access: ro\n", 4, 15, "programs.tool.home[0].path", "must stay beneath"},
		{"profile pairing in args", "programs:\n  tool:\n    relay:\n      provider: openai\n      args: [\"--key={pairing}\"]\n", 5, 14, "programs.tool.relay.args[0]", "never goes into arguments"},
		{"profile unknown placeholder", "programs:\n  tool:\n    relay:\n      provider: openai\n      env: {TOOL_URL: \"{relayUrl}/x\"}\n", 5, 23, "programs.tool.relay.env.TOOL_URL", "unknown placeholder {relayUrl}"},
		{"profile expected refusal without a port", "programs:\n  tool:\n    expectedRefusals:\n      - {target: tips.example.org, why: a tip}\n", 4, 18, "programs.tool.expectedRefusals[0].target", `"tips.example.org" is not host:port`},
		{"profile expected refusal without why", "programs:\n  tool:\n    expectedRefusals:\n      - target: tips.example.org:443\n", 4, 9, "programs.tool.expectedRefusals[0].why", "empty: say what the request is"},
		{"profile claims a built-in executable", "programs:\n  mine:\n    executables: [claude]\n", 3, 19, "programs.mine.executables[0]", `"claude" is already claimed by profile claude`},
		{"profile bad id", "programs:\n  Bad_ID:\n    name: x\n", 3, 5, "programs.Bad_ID", "invalid program id"},
		{"generic not replaceable", "programs:\n  generic:\n    name: x\n", 3, 5, "programs.generic", "cannot be replaced"},
		{"model with a quote", "models:\n  copilot: 'gpt\"5'\n", 2, 12, "models.copilot", "invalid model name"},
		{"managed wrong type", "managed:\n  claudeCode:\n    allowManagedHooksOnly: yes please\n", 3, 28, "managed.claudeCode.allowManagedHooksOnly", "wrong type: got string, want boolean"},
		{"managed unknown key", "managed:\n  claudeCode:\n    allowManagedHookOnly: true\n", 3, 5, "managed.claudeCode.allowManagedHookOnly", "unknown key"},
		{"mcp entry with two names", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - serverName: github\n        serverUrl: https://x.example/mcp\n", 4, 9, "managed.claudeCode.allowedMcpServers[0]", "exactly one of serverName, serverCommand, serverUrl"},
		{"mcp entry empty", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - {}\n", 4, 9, "managed.claudeCode.allowedMcpServers[0]", "exactly one"},
		{"mcp entry unknown key", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - name: github\n", 4, 9, "managed.claudeCode.allowedMcpServers[0].name", "unknown key"},
		{"mcp bad url", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - serverUrl: ftp://x\n", 4, 20, "managed.claudeCode.allowedMcpServers[0].serverUrl", "invalid server URL"},
		{"mcp bad name", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - serverName: 'a b'\n", 4, 21, "managed.claudeCode.allowedMcpServers[0].serverName", "invalid server name"},
		{"mcp empty command", "managed:\n  claudeCode:\n    allowedMcpServers:\n      - serverCommand: []\n", 4, 24, "managed.claudeCode.allowedMcpServers[0].serverCommand", "non-empty list"},
		{"auto updates enum", "managed:\n  claudeCode:\n    autoUpdates: sometimes\n", 3, 18, "managed.claudeCode.autoUpdates", "allowed: off, on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode("policy.yaml", []byte(tt.yaml))
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an *InvalidError", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			if ie.Line != tt.line || ie.Column != tt.col || ie.Field != tt.field || !strings.Contains(ie.Msg, tt.msg) {
				t.Errorf("got %d:%d %q %q, want %d:%d %q containing %q", ie.Line, ie.Column, ie.Field, ie.Msg, tt.line, tt.col, tt.field, tt.msg)
			}
		})
	}
}

func TestProgramsValid(t *testing.T) {
	y := `programs:
  aider:
    name: Aider
    executables: [aider]
    home:
      - {path: .aider, access: rw, create: dir}
      - {path: .aider/keys.json, access: deny}
    relay:
      provider: openai
      env: {OPENAI_API_BASE: "{relayURL}/sandbox/openai/v1", OPENAI_API_KEY: "{pairing}"}
    deniedArgs:
      - {arg: --listen, match: flag}
    workspaceConfig: [.aider.conf.yml]
  claude:
    executables: [claude]
models:
  copilot: claude-sonnet-4.5
  opencode: anthropic/claude-sonnet-4-5
managed:
  claudeCode:
    allowManagedHooksOnly: true
    allowManagedMcpServersOnly: true
    allowedMcpServers:
      - serverName: github
      - serverCommand: [npx, -y, "@modelcontextprotocol/server-filesystem"]
      - serverUrl: "https://*.example.com/mcp"
`
	l, err := decode("policy.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if p := l.cfg.Programs["aider"]; p.Name != "Aider" || len(p.Home) != 2 || p.Relay.Env["OPENAI_API_KEY"] != "{pairing}" {
		t.Errorf("programs.aider decoded as %+v", p)
	}
	if m := l.cfg.Managed.ClaudeCode; !m.AllowManagedHooksOnly || len(m.AllowedMcpServers) != 3 || m.AllowedMcpServers[1].ServerCommand[2] != "@modelcontextprotocol/server-filesystem" {
		t.Errorf("managed decoded as %+v", m)
	}
	for _, k := range []string{"programs", "models", "managed.claudeCode.allowManagedHooksOnly", "managed.claudeCode.allowedMcpServers"} {
		if _, ok := l.set[k]; !ok {
			t.Errorf("key %s not recorded as set (set: %v)", k, l.set)
		}
	}
	for k := range l.set {
		if strings.Contains(k, "[") || strings.HasPrefix(k, "programs.") {
			t.Errorf("set records %q, which is not a key", k)
		}
	}
}

// TestManagedOnlyInPolicy guards that a user file cannot set managed locks: Claude Code
// honours them only from admin-writable files, so accepting them would promise a lock that
// is not there.
func TestManagedOnlyInPolicy(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(user, []byte("egress: deny\nmanaged:\n  claudeCode:\n    allowManagedHooksOnly: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(LoadOptions{UserFile: user, PolicyFile: filepath.Join(dir, "none.yaml"), PolicyOwner: os.Getuid()})
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Field != "managed.claudeCode.allowManagedHooksOnly" || ie.Line != 4 || !strings.Contains(ie.Msg, "only the system policy") {
		t.Fatalf("got %v, want the user file refused at managed.claudeCode.allowManagedHooksOnly (line 4)", err)
	}

	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(etc, "policy.yaml")
	if err := os.WriteFile(policy, []byte("managed:\n  claudeCode:\n    allowManagedHooksOnly: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(user, []byte("egress: deny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := Load(LoadOptions{UserFile: user, PolicyFile: policy, PolicyOwner: os.Getuid()})
	if err != nil {
		t.Fatal(err)
	}
	if !e.Config.Managed.ClaudeCode.AllowManagedHooksOnly || !e.Locked("managed.claudeCode.allowManagedHooksOnly") {
		t.Errorf("policy lock not in force: %+v", e.Config.Managed)
	}
}
