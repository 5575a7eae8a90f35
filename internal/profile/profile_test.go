package profile

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func builtinSet(t *testing.T) *Set {
	t.Helper()
	s, err := NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuiltinsLoad(t *testing.T) {
	s := builtinSet(t)
	want := []string{"claude", "codex", "copilot", "gemini", "generic", "opencode"}
	if got := s.IDs(); !slices.Equal(got, want) {
		t.Fatalf("IDs %v, want %v", got, want)
	}
	for _, tc := range []struct{ program, id string }{
		{"claude", "claude"}, {"/home/a/.local/bin/claude", "claude"}, {"opencode", "opencode"},
		{"copilot", "copilot"}, {"codex", "codex"}, {"gemini", "gemini"}, {"bash", "generic"}, {"claude-x", "generic"},
	} {
		if got := s.Resolve(tc.program).ID; got != tc.id {
			t.Errorf("Resolve(%q) = %s, want %s", tc.program, got, tc.id)
		}
	}
}

func TestParseStrict(t *testing.T) {
	for _, tc := range []struct{ name, yaml, msg string }{
		{"unknown key", "name: x\nexecutable: [x]\n", "unknown field"},
		{"bad access", "home:\n  - {path: .x, access: write}\n", `home[0].access: invalid value "write"`},
		{"deny outside a grant", "home:\n  - {path: .ssh/id_rsa, access: deny}\n", "home[0].path: a denied or private path must be beneath"},
		{"protect rw", "home:\n  - {path: .x, access: rw, protect: true}\n", "home[0].protect"},
		{"env without provider", "relay:\n  env: {X: y}\n", "relay: env and args need a provider"},
		{"agentbox env", "relay:\n  provider: openai\n  env: {AGENTBOX_X: y}\n", "AGENTBOX* variables belong to agentbox"},
		{"command with dash", "deniedArgs:\n  - {arg: --serve, match: command}\n", "a command does not start with -"},
		{"escaping workspace path", "workspaceConfig: [../x]\n", "must stay beneath"},
		{"private outside a grant", "home:\n  - {path: .x/tmp, access: private}\n", "home[0].path: a denied or private path must be beneath"},
		{"private beneath ro", "home:\n  - {path: .x, access: ro}\n  - {path: .x/tmp, access: private}\n", "home[1].path: a private folder must be beneath a rw entry"},
		{"private created", "home:\n  - {path: .x, access: rw}\n  - {path: .x/tmp, access: private, create: dir}\n", "home[1].access: a private entry"},
		{"bad absent", "home:\n  - {path: .x, access: rw}\n  - {path: .x/y, access: ro, absent: link}\n", `home[1].absent: invalid value "link"`},
		{"absent rw", "home:\n  - {path: .x, access: rw, absent: dir}\n", "home[0].absent: only a ro or deny entry"},
		{"absent created", "home:\n  - {path: .x, access: rw}\n  - {path: .x/y, access: ro, create: dir, absent: dir}\n", "home[1].absent: only a ro or deny entry"},
		{"cache created", "home:\n  - {path: .cache/x, access: cache, create: dir}\n", "home[0].access: a cache entry is a folder seen through the box cache"},
		{"cache in a grant", "home:\n  - {path: .x, access: rw}\n  - {path: .x/cache, access: cache}\n", `home[1].path: a cache entry holds no other home entry and lies in none (home[0] is ".x")`},
		{"cache holding an entry", "home:\n  - {path: .cache/x, access: cache}\n  - {path: .cache/x/y, access: ro}\n", `home[0].path: a cache entry holds no other home entry and lies in none (home[1] is ".cache/x/y")`},
		{"rw in a state folder", "home:\n  - {path: .x, access: state, create: dir}\n  - {path: .x/y, access: rw}\n", "home[1].access: an entry in a state folder is the box's own (state, private), or the host's read-only (ro) or masked (deny): not rw"},
		{"expected refusal, upper case", "expectedRefusals:\n  - {target: Tips.example.org:443, why: a tip}\n", `expectedRefusals[0].target: "Tips.example.org:443" names no host`},
		{"expected refusal, port 0", "expectedRefusals:\n  - {target: tips.example.org:0, why: a tip}\n", "expectedRefusals[0].target: \"tips.example.org:0\" has no port number"},
		{"expected refusal, a URL", "expectedRefusals:\n  - {target: \"https://tips.example.org/x\", why: a tip}\n", "is not host:port"},
		{"expected refusal, no why", "expectedRefusals:\n  - {target: tips.example.org:443, why: \" \"}\n", "expectedRefusals[0].why: empty"},
		{"bad seed", "home:\n  - {path: .x, access: state, create: file, seed: other}\n", `home[0].seed: invalid value "other"`},
		// A link entry: made on the box's private home, leading into the box-owned state only.
		{"link without link", "home:\n  - {path: .x.json, access: link}\n", "home[0].link: a link entry (access: link) needs link"},
		{"link on another access", "home:\n  - {path: .x, access: state, create: dir}\n  - {path: .x/y, access: state, create: file}\n  - {path: .y, access: rw, link: .x/y}\n", "home[2].link: a link entry (access: link) needs link, and only it has one"},
		{"link to the host", "home:\n  - {path: .x, access: ro}\n  - {path: .y, access: link, link: .x}\n", `home[1].link: ".x" is not a state entry (access: state) in a state folder`},
		{"link to a top-level state file", "home:\n  - {path: .x, access: state, create: file}\n  - {path: .y, access: link, link: .x}\n", `home[1].link: ".x" is not a state entry`},
		{"link escaping", "home:\n  - {path: .y, access: link, link: ../etc/passwd}\n", "home[0].link: \"../etc/passwd\" must stay beneath"},
		{"link in a granted folder", "home:\n  - {path: .x, access: state, create: dir}\n  - {path: .x/y, access: state, create: file}\n  - {path: .z, access: rw}\n  - {path: .z/l, access: link, link: .x/y}\n", `home[3].link: a link lies in no other home entry and holds none (home[2] is ".z")`},
		{"link in a state folder", "home:\n  - {path: .x, access: state, create: dir}\n  - {path: .x/y, access: state, create: file}\n  - {path: .x/l, access: link, link: .x/y}\n", `home[2].link: a link lies in no other home entry and holds none (home[0] is ".x")`},
		{"link created", "home:\n  - {path: .x, access: state, create: dir}\n  - {path: .x/y, access: state, create: file}\n  - {path: .l, access: link, link: .x/y, create: file}\n", "home[2].link: a link entry is a symbolic link of the box's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

func TestDeniedArgs(t *testing.T) {
	s := builtinSet(t)
	for _, tc := range []struct {
		id   string
		args []string
		deny string // "" means allowed
	}{
		{"opencode", []string{"serve"}, "serve"},
		{"opencode", []string{"--print-logs", "web"}, "web"},
		{"opencode", []string{"run", "serve the web page"}, ""}, // serve as a prompt word, not a command
		{"opencode", []string{"run", "--port", "80"}, "--port"},
		{"opencode", []string{"--port=4096"}, "--port=4096"},
		{"opencode", []string{"--hostname", "0.0.0.0"}, "--hostname"},
		{"opencode", []string{"--mdns"}, "--mdns"},
		{"opencode", []string{"run", "hello"}, ""},
		{"opencode", []string{"--", "serve"}, "serve"},
		{"claude", []string{"-p", "fix it", "--dangerously-skip-permissions"}, ""},
		{"claude", []string{"--settings", "{\"apiKeyHelper\":\"x\"}"}, "--settings"},
		{"claude", []string{"--mcp-config=x.json"}, "--mcp-config=x.json"},
		{"claude", []string{"-p", "--settings is a word here? no: it is a flag"}, ""},
		{"copilot", []string{"--acp"}, "--acp"},
		{"codex", []string{"mcp-server"}, "mcp-server"},
		{"codex", []string{"exec", "login please"}, ""},
		{"gemini", []string{"--experimental-acp"}, "--experimental-acp"},
		{"generic", []string{"--port", "80", "serve"}, ""},
	} {
		err := s.Get(tc.id).CheckArgs(tc.args)
		if tc.deny == "" {
			if err != nil {
				t.Errorf("%s %q: refused: %v", tc.id, tc.args, err)
			}
			continue
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, ErrArgumentDenied) || ae.Arg != tc.deny || !strings.Contains(err.Error(), tc.deny) {
			t.Errorf("%s %q: got %v, want argument %q refused", tc.id, tc.args, err, tc.deny)
		}
	}
}

var relayProviders = map[string]bool{"anthropic": true, "openai": true}

func TestPreconditions(t *testing.T) {
	s := builtinSet(t)
	for _, tc := range []struct {
		name   string
		id     string
		f      Facts
		what   string // "" means none fails
		key    string
		model  string
		provid string
	}{
		{"claude ok", "claude", Facts{Providers: relayProviders}, "", "", "", "anthropic"},
		{"claude egress allow ok", "claude", Facts{Egress: plan.EgressAllow, Providers: relayProviders}, "", "", "", "anthropic"},
		{"claude gateway missing", "claude", Facts{Providers: map[string]bool{"openai": true}}, "gateway", "gateway.anthropic", "", "anthropic"},
		{"gemini gateway missing", "gemini", Facts{Providers: relayProviders}, "gateway", "gateway.gemini", "", "gemini"},
		{"copilot egress allow", "copilot", Facts{Egress: plan.EgressAllow, Providers: relayProviders, Models: map[string]string{"copilot": "m"}}, "egress", "egress", "", ""},
		{"copilot no model", "copilot", Facts{Providers: relayProviders}, "model", "models.copilot", "", ""},
		{"copilot model from config", "copilot", Facts{Providers: relayProviders, Models: map[string]string{"copilot": "claude-sonnet-4.5"}}, "", "", "claude-sonnet-4.5", "anthropic"},
		{"copilot model from argument wins", "copilot", Facts{Args: []string{"--model", "claude-opus-4.5"}, Providers: relayProviders, Models: map[string]string{"copilot": "claude-sonnet-4.5"}}, "", "", "claude-opus-4.5", "anthropic"},
		{"copilot model with a quote", "copilot", Facts{Args: []string{"--model=a\"b"}, Providers: relayProviders}, "model", "models.copilot", "", ""},
		{"opencode no model", "opencode", Facts{Providers: relayProviders}, "model", "models.opencode", "", ""},
		{"opencode model without provider", "opencode", Facts{Providers: relayProviders, Models: map[string]string{"opencode": "gpt-5"}}, "model", "models.opencode", "", ""},
		{"opencode provider not served", "opencode", Facts{Providers: relayProviders, Models: map[string]string{"opencode": "google/gemini-3"}}, "gateway", "gateway.google", "", ""},
		{"opencode ok", "opencode", Facts{Providers: relayProviders, Args: []string{"-m", "openai/gpt-5"}}, "", "", "openai/gpt-5", "openai"},
		{"codex ok", "codex", Facts{Providers: relayProviders}, "", "", "", "openai"},
		{"generic needs nothing", "generic", Facts{Egress: plan.EgressAllow}, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := s.Get(tc.id)
			err := p.Check(tc.f)
			if tc.what == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if m, _ := p.Model(tc.f); m != tc.model {
					t.Errorf("model %q, want %q", m, tc.model)
				}
				if got := p.Provider(tc.f); got != tc.provid {
					t.Errorf("provider %q, want %q", got, tc.provid)
				}
				return
			}
			var pe *PreconditionError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPrecondition) || pe.What != tc.what || pe.Key != tc.key || pe.Fix == "" {
				t.Fatalf("got %#v, want %s precondition naming %s", err, tc.what, tc.key)
			}
		})
	}
}

func TestWorkspaceConfigUnion(t *testing.T) {
	s := builtinSet(t)
	got := s.WorkspaceConfig()
	for _, w := range []string{".claude/settings.json", ".mcp.json", "opencode.json", ".opencode", ".opencode/.gitignore", ".github/copilot", ".github/agents", ".codex", ".gemini"} {
		if !slices.Contains(got, w) {
			t.Errorf("union %v lacks %s", got, w)
		}
	}
	// Instruction and prompt files are work, not configuration: a list of their own.
	instr := s.WorkspaceInstructions()
	for _, w := range []string{"CLAUDE.md", "CLAUDE.local.md", ".claude/commands", ".claude/skills", "AGENTS.md", "GEMINI.md", ".github/copilot-instructions.md", ".agents/skills"} {
		if !slices.Contains(instr, w) {
			t.Errorf("instructions %v lack %s", instr, w)
		}
		if slices.Contains(got, w) {
			t.Errorf("instruction file %s is in the pinned union", w)
		}
	}
	if d := s.WorkspaceInstructionDirs(); !slices.Contains(d, ".claude/commands") || slices.Contains(d, "CLAUDE.md") {
		t.Errorf("instruction dirs %v", d)
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("union not sorted and unique: %v", got)
	}
	// A config profile adds to the union.
	s2, err := NewSet(map[string]Profile{"aider": {Executables: []string{"aider"}, WorkspaceConfig: []string{".aider.conf.yml"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s2.WorkspaceConfig(), ".aider.conf.yml") {
		t.Errorf("config profile's workspace config not in the union")
	}
	dirs := s.WorkspaceConfigDirs()
	for _, d := range []string{".opencode", ".codex", ".gemini", ".claude/hooks"} {
		if !slices.Contains(dirs, d) {
			t.Errorf("dirs %v lack %s", dirs, d)
		}
	}
}

func TestHarnessHomesGuardWorkspace(t *testing.T) {
	s := builtinSet(t)
	homes := s.HarnessHomes()
	for _, h := range []string{".claude", ".codex", ".gemini", ".copilot", ".config/opencode", ".local/share/opencode"} {
		if !slices.Contains(homes, h) {
			t.Errorf("harness homes %v lack %s", homes, h)
		}
	}
	f := plan.WorkspaceFacts{Home: "/home/alice", Harness: homes}
	for _, ws := range []string{"/home/alice/.claude/projects/x", "/home/alice/.local/share/opencode/project", "/home/alice/.cache/opencode", "/home/alice/.gemini"} {
		if err := plan.CheckWorkspace(ws, f); !errors.Is(err, plan.ErrWorkspaceRefused) {
			t.Errorf("workspace %s: got %v, want refused", ws, err)
		}
	}
	if err := plan.CheckWorkspace("/home/alice/src/project", f); err != nil {
		t.Errorf("project refused: %v", err)
	}
}

func TestFindInstall(t *testing.T) {
	s := builtinSet(t)
	d := t.TempDir()
	// An npm global prefix under the home: bin/claude → ../lib/node_modules/@anthropic-ai/claude-code/cli.js
	pkg := filepath.Join(d, "npm", "lib", "node_modules", "@anthropic-ai", "claude-code")
	mustWrite(t, filepath.Join(pkg, "package.json"), `{"name": "@anthropic-ai/claude-code", "version": "2.1.0"}`, 0o644)
	mustWrite(t, filepath.Join(pkg, "cli.js"), "#!/usr/bin/env node\nconsole.log(1)\n", 0o755)
	bin := filepath.Join(d, "npm", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../lib/node_modules/@anthropic-ai/claude-code/cli.js", filepath.Join(bin, "claude")); err != nil {
		t.Fatal(err)
	}
	// node under ~/.nvm: its prefix is bound too.
	nodeBin := filepath.Join(d, "nvm", "versions", "node", "v22", "bin")
	mustWrite(t, filepath.Join(nodeBin, "node"), "#!/bin/sh\n", 0o755)
	tree, err := s.Get("claude").FindInstall(filepath.Join(bin, "claude"), nodeBin+":/usr/bin")
	if err != nil {
		t.Fatal(err)
	}
	if tree == nil || tree.Tree != pkg || tree.Interpreter != filepath.Join(d, "nvm", "versions", "node", "v22") {
		t.Errorf("tree %+v, want %s and the node prefix", tree, pkg)
	}
	// A native binary outside any package: nothing beyond the file.
	mustWrite(t, filepath.Join(d, "native", "claude"), "\x7fELF", 0o755)
	if tree, err := s.Get("claude").FindInstall(filepath.Join(d, "native", "claude"), "/usr/bin"); err != nil || tree != nil {
		t.Errorf("native binary: %+v, %v", tree, err)
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// goldenInput is the fixed launch every golden request is rendered from.
func goldenInput(id string) plan.Input {
	return plan.Input{
		ID:        "0123456789abcdef0123456789abcdef",
		Program:   "/home/alice/.local/share/agents/" + id + "/bin/" + id,
		Args:      []string{"-p", "fix the test"},
		Workspace: "/home/alice/src/project",
		Cwd:       "/home/alice/src/project",
		Home:      "/home/alice",
		UID:       1000,
		GID:       1000,
		Env:       []string{"PATH=/usr/bin:/bin", "TERM=xterm-256color", "LANG=C.UTF-8", "ANTHROPIC_API_KEY=sk-host-secret"},
		RunDir:    "/run/user/1000/agentbox/launches/0123456789abcdef0123456789abcdef/run",
	}
}

// TestRequestGolden pins, byte for byte, the native engine's request for a launch of each
// profile built with fixed inputs: the relay broker's environment and forward, the profile's
// home grants, install tree, relay wiring and arguments.
func TestRequestGolden(t *testing.T) {
	s := builtinSet(t)
	for _, id := range []string{"claude", "opencode", "copilot", "codex", "gemini"} {
		t.Run(id, func(t *testing.T) {
			p := s.Get(id)
			in := goldenInput(id)
			in.Profile = p.ID
			f := Facts{
				Args:      in.Args,
				Models:    map[string]string{"copilot": "claude-sonnet-4.5", "opencode": "anthropic/claude-sonnet-4-5"},
				Providers: map[string]bool{"anthropic": true, "openai": true, "gemini": true},
				RelayURL:  "http://127.0.0.1:4100",
				Pairing:   "pairing-placeholder-0000000000000000",
				StateDir:  "/home/alice/.local/state/agentbox/boxes/" + id + "/0123456789abcdef0123456789abcdef",
			}
			if err := p.Check(f); err != nil {
				t.Fatal(err)
			}
			tree := &InstallTree{Tree: "/home/alice/.local/share/agents/" + id}
			w, err := p.Wire(in.Home, tree, f)
			if err != nil {
				t.Fatal(err)
			}
			// What the relay broker contributes (fixed here).
			c := w.Contributions
			c.Env = append([]string{"AGENTBOX_RELAY_URL=" + f.RelayURL, "AGENTBOX_PAIRING=" + f.Pairing}, c.Env...)
			c.Forwards = []plan.Forward{{Port: 4100, Socket: "/run/agentbox/relay.sock"}}
			in.Brokers = c
			in.Args = w.Args
			pl, err := plan.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&native.Engine{}).Request(pl)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(got, []byte("sk-host-secret")) {
				t.Fatal("the caller's ANTHROPIC_API_KEY leaked into the request")
			}
			golden := filepath.Join("testdata", "request-"+id+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendered request (run go test ./internal/profile -run TestRequestGolden -update and review the diff):\n%s", golden, got)
			}
		})
	}
}

// TestRelayWiringCannotBeDiverted pins the settings that keep each program on the relay
// whatever the user's or the workspace's configuration says (see docs/profiles.md).
func TestRelayWiringCannotBeDiverted(t *testing.T) {
	s := builtinSet(t)
	f := Facts{Models: map[string]string{"copilot": "m1", "opencode": "anthropic/m2"}, Providers: relayProviders, RelayURL: "http://127.0.0.1:4100", Pairing: "p", StateDir: "/state"}
	env := func(id string) map[string]string {
		w, err := s.Get(id).Wire("/home/a", nil, f)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range w.Env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	c := env("claude")
	if c["CLAUDE_CODE_PROVIDER_MANAGED_BY_HOST"] != "1" || c["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:4100/sandbox/anthropic" || c["ANTHROPIC_AUTH_TOKEN"] != "p" || c["ANTHROPIC_API_KEY"] != "" {
		t.Errorf("claude env %v", c)
	}
	o := env("opencode")
	if !strings.Contains(o["OPENCODE_CONFIG_CONTENT"], `"enabled_providers":["anthropic"]`) || !strings.Contains(o["OPENCODE_CONFIG_CONTENT"], `"baseURL":"http://127.0.0.1:4100/sandbox/anthropic/v1"`) {
		t.Errorf("opencode config %s", o["OPENCODE_CONFIG_CONTENT"])
	}
	w, err := s.Get("codex").Wire("/home/a", nil, f)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(w.Args, `model_provider="agentbox"`) || slices.ContainsFunc(w.Args, func(a string) bool { return strings.Contains(a, "p\"") }) {
		t.Errorf("codex args %q", w.Args)
	}
	// Gemini CLI: the base URL and the key are environment only, and a workspace .env does not
	// replace a variable already set; the variables other auth types need are set, empty, so
	// that no .env can supply them.
	g := env("gemini")
	for k, v := range map[string]string{
		"GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:4100/sandbox/gemini", "GEMINI_API_KEY": "p",
		"GOOGLE_GENAI_USE_VERTEXAI": "false", "GOOGLE_GENAI_USE_GCA": "false", "GEMINI_TELEMETRY_ENABLED": "false",
		"GOOGLE_API_KEY": "", "GOOGLE_CLOUD_PROJECT": "", "GOOGLE_CLOUD_LOCATION": "", "GOOGLE_VERTEX_BASE_URL": "",
		"GOOGLE_APPLICATION_CREDENTIALS": "", "GEMINI_CLI_HOME": "",
	} {
		if got, ok := g[k]; !ok || got != v {
			t.Errorf("gemini env %s = %q (set: %v), want %q", k, got, ok, v)
		}
	}
	if u := s.Get("gemini").Relay.Unset; len(u) != 0 {
		t.Errorf("gemini unsets %q: a variable unset is one a workspace .env may set", u)
	}
	// In headless mode Gemini CLI 0.61.0 takes its auth type from the settings files first, and
	// refuses the one the environment implies ("gateway"): the box's user settings file is
	// synthesized (the gemini-settings seed: the API key path when the host has no file;
	// harnessstate.TestGeminiSettings), and the host's is never created.
	seeded := false
	for _, h := range s.Get("gemini").Home {
		if h.Path == ".gemini/settings.json" {
			seeded = h.Access == AccessState && h.Create == CreateFile && h.Seed == SeedGeminiSettings
		}
	}
	if !seeded {
		t.Errorf("~/.gemini/settings.json is not a state file seeded by %s", SeedGeminiSettings)
	}
	for _, pc := range s.Get("gemini").PreCreates() {
		if pc.Rel == ".gemini/settings.json" {
			t.Errorf("the profile creates the host's ~/.gemini/settings.json: %+v", pc)
		}
	}
}

// TestHomePlaceholders: the ro and deny entries without create that lie beneath a rw entry get
// a placeholder (folders on the way first, a folder for absent: dir); entries beneath a ro entry
// (.x/ro/key) or outside any grant (.gitconfig), rw entries and created ones do not.
func TestHomePlaceholders(t *testing.T) {
	p, err := Parse("x", []byte(`name: X
executables: [x]
home:
  - {path: .x, access: rw, create: dir}
  - {path: .x/secret.json, access: deny}
  - {path: .x/local, access: ro, protect: true, absent: dir}
  - {path: .x/a/b/hook.sh, access: ro, protect: true}
  - {path: .x/settings.json, access: ro, protect: true, create: file}
  - {path: .x/ro, access: ro, absent: dir}
  - {path: .x/ro/key, access: deny}
  - {path: .x/snapshots, access: private}
  - {path: .gitconfig, access: ro}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, hp := range p.HomePlaceholders("/home/u") {
		kind := "file"
		if hp.Dir {
			kind = "dir"
		}
		got = append(got, hp.Path+" "+kind+" beneath "+hp.Beneath)
	}
	want := []string{
		"/home/u/.x/secret.json file beneath /home/u/.x",
		"/home/u/.x/local dir beneath /home/u/.x",
		"/home/u/.x/a dir beneath /home/u/.x",
		"/home/u/.x/a/b dir beneath /home/u/.x",
		"/home/u/.x/a/b/hook.sh file beneath /home/u/.x",
		"/home/u/.x/ro dir beneath /home/u/.x",
		"/home/u/.x/snapshots dir beneath /home/u/.x",
	}
	if !slices.Equal(got, want) {
		t.Errorf("placeholders:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every built-in profile's deny entries are covered.
	set, err := NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range set.IDs() {
		bp := set.Get(id)
		held := map[string]bool{}
		for _, hp := range bp.HomePlaceholders("/h") {
			held[hp.Path] = true
		}
		// In a state folder, the mount point harnessstate.Prepare makes holds it.
		for _, se := range bp.StateEntries() {
			if se.MountPoint {
				held["/h/"+se.Rel] = true
			}
		}
		for _, h := range bp.Home {
			if h.Access == AccessDeny && !held["/h/"+h.Path] {
				t.Errorf("%s: denied %s gets no placeholder", id, h.Path)
			}
		}
	}
}

// TestCaches: Copilot CLI's extracted package (~/.cache/copilot) is a cache entry, which the
// daemon mounts with the box cache: the profile's wiring binds nothing there.
func TestCaches(t *testing.T) {
	p := builtinSet(t).Get("copilot")
	if got := p.Caches(); !slices.Equal(got, []string{".cache/copilot"}) {
		t.Fatalf("copilot's caches %v, want [.cache/copilot]", got)
	}
	w, err := p.Wire("/home/alice", nil, Facts{StateDir: "/state", Args: []string{"--model", "m"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range w.Mounts {
		if strings.HasPrefix(m.Target, "/home/alice/.cache") {
			t.Errorf("the wiring mounts %+v; the cache is the daemon's to mount", m)
		}
	}
	if got := builtinSet(t).Get("claude").Caches(); len(got) != 0 {
		t.Errorf("claude's caches %v, want none", got)
	}
}

// TestBuiltinsCreateNothingInHarnessHomes (issues #18, #20): a built-in profile whose harness
// home is box-owned state creates nothing in the host's harness home (~/.claude, ~/.codex,
// ~/.gemini, ~/.copilot): an absent entry there is an empty read-only mount point in the state
// folder. An empty ~/.claude/.config.json created on the host made the host's own Claude Code
// write its whole config into it, and every later box then read that file; an empty
// ~/.gemini/GEMINI.md made the host's Gemini CLI count "1 GEMINI.md file". Only OpenCode's
// ~/.config/opencode and ~/.cache/opencode are created (docs/profiles.md says why).
func TestBuiltinsCreateNothingInHarnessHomes(t *testing.T) {
	s := builtinSet(t)
	var got []string
	for _, id := range s.IDs() {
		for _, pc := range s.Get(id).PreCreates() {
			got = append(got, id+" "+pc.Rel)
		}
	}
	want := []string{"opencode .config/opencode", "opencode .config/opencode/.gitignore", "opencode .cache/opencode", "opencode .cache/opencode/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("pre-created on the host:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Claude Code's legacy config is never the host's in a box: its mount point (empty, and
	// without write bits: harnessstate) is all the box sees.
	for _, h := range s.Get("claude").Home {
		if h.Path == ".claude/.config.json" && h.Access != AccessDeny {
			t.Errorf("claude: .claude/.config.json is %s, want deny (the host's never seen)", h.Access)
		}
	}
}
