package daemon

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
	"github.com/agentbox/agentbox/internal/profile/managed"
)

func TestResolveProfileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     api.LaunchRequest
		cfg     config.Config
		egress  plan.Egress
		code    string
		inHint  string
		profile string
	}{
		{"opencode serve", api.LaunchRequest{Program: "opencode", Args: []string{"serve"}}, config.Config{Models: map[string]string{"opencode": "anthropic/m"}}, plan.EgressDeny, api.CodeArgumentDenied, "serve", ""},
		{"opencode --port", api.LaunchRequest{Program: "/usr/local/bin/opencode", Args: []string{"--port=4096"}}, config.Config{}, plan.EgressDeny, api.CodeArgumentDenied, "--port", ""},
		{"copilot without a model", api.LaunchRequest{Program: "copilot"}, config.Config{}, plan.EgressDeny, api.CodePreconditionFailed, "models.copilot in your config, or give the program its own flag: agentbox run copilot -- --model NAME", ""},
		{"opencode without a model", api.LaunchRequest{Program: "opencode"}, config.Config{}, plan.EgressDeny, api.CodePreconditionFailed, "agentbox run opencode -- --model NAME", ""},
		{"copilot egress allow", api.LaunchRequest{Program: "copilot", Args: []string{"--model", "m"}}, config.Config{}, plan.EgressAllow, api.CodePreconditionFailed, "egress", ""},
		{"gemini", api.LaunchRequest{Program: "gemini", Args: []string{"-p", "hi"}}, config.Config{}, plan.EgressDeny, "", "", "gemini"},
		{"opencode provider the relay does not serve", api.LaunchRequest{Program: "opencode", Args: []string{"-m", "google/gemini-3"}}, config.Config{}, plan.EgressDeny, api.CodePreconditionFailed, "gateway.google", ""},
		{"claude", api.LaunchRequest{Program: "claude", Args: []string{"-p", "hi", "--dangerously-skip-permissions"}}, config.Config{}, plan.EgressDeny, "", "", "claude"},
		{"any program", api.LaunchRequest{Program: "sh", Args: []string{"serve", "--port", "1"}}, config.Config{}, plan.EgressAllow, "", "", "generic"},
		{"config profile", api.LaunchRequest{Program: "aider", Args: []string{"--listen"}},
			config.Config{Programs: map[string]profile.Profile{"aider": {Executables: []string{"aider"}, DeniedArgs: []profile.DeniedArg{{Arg: "--listen", Match: profile.MatchFlag}}}}},
			plan.EgressDeny, api.CodeArgumentDenied, "--listen", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := resolveProfile(&tc.req, tc.cfg, tc.egress)
			if tc.code == "" {
				if err != nil || p.ID != tc.profile {
					t.Fatalf("got %v, %v; want profile %s", p, err, tc.profile)
				}
				return
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message+" "+ae.Hint, tc.inHint) {
				t.Fatalf("got %#v, want %s naming %s", err, tc.code, tc.inHint)
			}
			if got := api.Status(ae.Code); (tc.code == api.CodeArgumentDenied && got != 400) || (tc.code == api.CodePreconditionFailed && got != 409) {
				t.Errorf("status %d", got)
			}
		})
	}
}

func TestWireProfileNeedsRelay(t *testing.T) {
	set, _ := profile.NewSet(nil)
	p := set.Get("claude")
	var c plan.Contributions
	_, err := wireProfile(p, profile.Facts{}, "/home/a", nil, &c)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodePreconditionFailed {
		t.Fatalf("got %v, want precondition_failed without a relay", err)
	}
	c.Env = []string{"AGENTBOX_RELAY_URL=http://127.0.0.1:4100", "AGENTBOX_PAIRING=pp"}
	c.Mounts = []plan.Mount{{Kind: plan.MountBind, Source: "/w/.git", Target: "/w/.git"}}
	args, err := wireProfile(p, profile.Facts{Args: []string{"-p", "x"}, StateDir: "/state"}, "/home/a", nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(args, " ") != "-p x" || c.Mounts[len(c.Mounts)-1].Target != "/w/.git" || c.Mounts[0].Target != "/home/a/.claude" {
		t.Errorf("args %q mounts %+v", args, c.Mounts)
	}
	if !strings.Contains(strings.Join(c.Env, "\n"), "ANTHROPIC_AUTH_TOKEN=pp") {
		t.Errorf("env %v", c.Env)
	}
}

// TestPreCreate guards that the home paths a program needs exist before the box is built (so no
// pin or mask sits under a missing parent), that existing content is kept, that nothing is
// created through a symlink leading out of the home, and that nothing is created in a harness
// home that is box-owned state (issue #20: an empty ~/.claude/.config.json there made the
// host's Claude Code write its config into it).
func TestPreCreate(t *testing.T) {
	home := t.TempDir()
	set, _ := profile.NewSet(nil)
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"model":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"claude", "codex", "gemini", "copilot"} {
		if err := preCreate(home, set.Get(id)); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(home, ".claude")); len(ents) != 1 {
		t.Errorf("~/.claude holds %v, want only the user's settings.json", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude", "settings.json")); string(b) != `{"model":"x"}` {
		t.Errorf("existing settings changed: %s", b)
	}
	for _, d := range []string{".codex", ".gemini", ".copilot"} {
		if _, err := os.Lstat(filepath.Join(home, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("~/%s was created: %v", d, err)
		}
	}
	// OpenCode's config folder with its .gitignore, and nested parents (.cache/opencode/bin);
	// an existing .gitignore is kept.
	if err := os.MkdirAll(filepath.Join(home, ".config", "opencode"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "opencode", ".gitignore"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := preCreate(home, set.Get("opencode")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".config", "opencode", ".gitignore")); string(b) != "mine\n" {
		t.Errorf("existing .gitignore changed: %q", b)
	}
	if st, err := os.Stat(filepath.Join(home, ".cache", "opencode", "bin")); err != nil || !st.IsDir() {
		t.Errorf(".cache/opencode/bin: %v", err)
	}
	// A symlink planted where a pre-created folder goes, pointing out of the home, is not
	// followed.
	home2, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(home2, ".cache")); err != nil {
		t.Fatal(err)
	}
	if err := preCreate(home2, set.Get("opencode")); err == nil {
		t.Error("pre-create went through a symlink out of the home")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("created outside the home: %v", ents)
	}
}

// TestPostureReadErrorIsUnlocked guards that a posture read error is reported as an unknown
// source with the locks off, never as locked.
func TestPostureReadErrorIsUnlocked(t *testing.T) {
	dir := t.TempDir()
	old := managedOptions
	defer func() { managedOptions = old }()
	managedOptions = managed.Options{Dir: dir}
	if err := os.WriteFile(filepath.Join(dir, managed.SettingsFile), []byte(`{"allowManagedHooksOnly": true, `), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: discardLogger()}
	p := d.posture()
	if p.Source != api.PostureSourceUnknown || p.AllowManagedHooksOnly || p.AllowManagedMcpServersOnly || p.Error == "" {
		t.Errorf("posture %+v, want unknown and unlocked", p)
	}
	if err := os.WriteFile(filepath.Join(dir, managed.SettingsFile), []byte(`{"allowManagedHooksOnly": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := d.launchPosture("claude"); p == nil || p.Source != api.PostureSourceFile || !p.AllowManagedHooksOnly {
		t.Errorf("claude launch posture %+v", p)
	}
	if p := d.launchPosture("opencode"); p != nil {
		t.Errorf("opencode launch records a Claude Code posture: %+v", p)
	}
}

// TestRenderSystemRefusesInvalidPolicy guards that an invalid policy is refused with its file,
// line and field, and leaves the managed file exactly as it was.
func TestRenderSystemRefusesInvalidPolicy(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc", "agentbox")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(etc, "policy.yaml")
	mo := managed.Options{Dir: filepath.Join(dir, "claude-code"), StateDir: etc}
	o := SystemOptions{PolicyFile: policy, PolicyOwner: os.Getuid(), Managed: mo, Mode: managed.ModeFile, allowNonRoot: true}
	if err := os.WriteFile(policy, []byte("managed:\n  claudeCode:\n    allowManagedHooksOnly: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := RenderSystem(o); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(mo.Dir, managed.SettingsFile)
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte("managed:\n  claudeCode:\n    allowManagedHooksOnly: false\n    allowedMcpServers:\n      - {serverName: a, serverUrl: 'https://x'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = RenderSystem(o)
	var ie *config.InvalidError
	if !errors.As(err, &ie) || ie.File != policy || ie.Line != 5 || ie.Field != "managed.claudeCode.allowedMcpServers[0]" {
		t.Fatalf("got %v, want the policy refused at line 5, managed.claudeCode.allowedMcpServers[0]", err)
	}
	after, _ := os.ReadFile(file)
	if string(after) != string(before) {
		t.Errorf("managed file changed by a refused policy:\n%s\nwas\n%s", after, before)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
