package harnessstate

import "testing"

// FuzzCodexConfig: whatever the host's and the box's ~/.codex/config.toml hold, the synthesized
// config neither panics nor carries a key outside the allowlist (codexKeys, and projects'
// trust_level): no notify, mcp_servers, profiles or providers, and it reads back as TOML.
func FuzzCodexConfig(f *testing.F) {
	f.Add([]byte("model = \"m\"\nnotify = [\"sh\", \"-c\", \"x\"]\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n"), []byte("[tui]\ntheme = \"x\"\n[mcp_servers.x]\ncommand = \"sh\"\n"))
	f.Add([]byte("a = {b = [1, {c = '''x'''}]}\n[[p]]\nq = 1\n"), []byte("\"model\" = \"\"\"\nm\"\"\"\n"))
	f.Fuzz(func(t *testing.T, host, box []byte) {
		out, err := codexConfig(host, box, "/w")
		if err != nil {
			return
		}
		got, err := parseTOML(out)
		if err != nil {
			t.Fatalf("the synthesized config does not read back: %v\n%s", err, out)
		}
		for k, v := range got {
			switch {
			case k == "projects":
				for p, e := range v.(map[string]any) {
					for n := range e.(map[string]any) {
						if n != "trust_level" {
							t.Fatalf("projects.%q.%s carried:\n%s", p, n, out)
						}
					}
				}
			case codexKeys[k] != nil:
				for n := range v.(map[string]any) {
					if _, ok := codexKeys[k][n]; !ok {
						t.Fatalf("%s.%s carried:\n%s", k, n, out)
					}
				}
			default:
				if _, ok := codexKeys[""][k]; !ok {
					t.Fatalf("%s carried:\n%s", k, out)
				}
			}
		}
		// Independently of the allowlist: the keys that run programs are never there.
		for _, k := range []string{"notify", "mcp_servers", "profiles", "model_providers", "shell_environment_policy", "hooks"} {
			if _, ok := got[k]; ok {
				t.Fatalf("%s carried:\n%s", k, out)
			}
		}
	})
}

// FuzzCopilotConfig: whatever the host's and the box's ~/.copilot/config.json hold, the
// synthesized file neither panics nor carries a key outside the allowlist (copilotKeys, and
// trustedFolders of the workspace and what holds it), and it reads back as Copilot reads it.
func FuzzCopilotConfig(f *testing.F) {
	f.Add([]byte("// c\n{\"appTipShown\": true, \"installedPlugins\": [{\"name\": \"x\"}], \"trustedFolders\": [\"/w\", \"/\"]}\n"), []byte("{\"copilotTokens\": {\"a\": \"b\"}, \"trustedFolders\": [\"/w/a\", \"/x\"]}"))
	f.Add([]byte("{\"recentModelIds\": [1, \"m\"], \"a\": \"/* \\\" */\"} /* x */"), []byte("{\"firstLaunchAt\": null}"))
	f.Fuzz(func(t *testing.T, host, box []byte) {
		out, err := copilotConfig(host, box, "/w/s")
		if err != nil {
			t.Fatal(err)
		}
		got, err := jsonc(out)
		if err != nil {
			t.Fatalf("the synthesized config does not read back: %v\n%s", err, out)
		}
		for k, v := range got {
			if k == "trustedFolders" {
				for _, p := range v.([]any) {
					if s := p.(string); !within(s, "/w/s") && !within("/w/s", s) {
						t.Fatalf("trust of %q carried:\n%s", s, out)
					}
				}
				continue
			}
			if want, ok := copilotKeys[k]; !ok || !hasKind(v, want) {
				t.Fatalf("%s carried:\n%s", k, out)
			}
		}
	})
}
