package harnessstate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGeminiTrust pins what of Gemini CLI's trustedFolders.json reaches a box: the host's rules
// that decide about the workspace (for it, a folder holding it, a TRUST_PARENT rule whose
// parent holds it, or a folder in it), which win over the box's, and the box's rules for the
// workspace and folders in it. Rules for other folders, unknown levels and paths that are not
// clean and absolute are dropped, from either side.
func TestGeminiTrust(t *testing.T) {
	const ws = "/home/u/work"
	host := map[string]any{
		"/home/u":            "TRUST_FOLDER",
		"/home/u/work/x":     "DO_NOT_TRUST",
		"/home/u/other":      "TRUST_FOLDER", // another folder: the host's own business
		"/home/u/work2":      "TRUST_FOLDER", // a sibling sharing the prefix
		"/home/u/sibling":    "TRUST_PARENT", // trusts /home/u, which holds the workspace
		"/home/u/work/y":     "TRUST_ALL",    // not a level
		"/home/u/work/../..": "TRUST_FOLDER", // not clean
	}
	box := map[string]any{
		ws:                 "TRUST_FOLDER",
		ws + "/x":          "TRUST_FOLDER", // the host's DO_NOT_TRUST wins
		ws + "/sub/a":      "TRUST_PARENT", // trusts ws/sub: in the workspace
		ws + "/b":          1,              // not a level
		"/":                "TRUST_FOLDER", // outside the workspace: a box cannot trust it
		"/home/u/work-x":   "TRUST_FOLDER", // a sibling sharing the prefix
		"/home/u/work/../": "TRUST_FOLDER", // not clean
		ws + "/d\n":        "TRUST_FOLDER", // a control character
	}
	hb, _ := json.Marshal(host)
	bb, _ := json.Marshal(box)
	out, err := geminiTrust(hb, bb, ws)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/home/u": "TRUST_FOLDER", "/home/u/sibling": "TRUST_PARENT", "/home/u/work/x": "DO_NOT_TRUST",
		ws: "TRUST_FOLDER", ws + "/sub/a": "TRUST_PARENT",
	}
	if gb, wb := mustJSON(got), mustJSON(want); gb != wb {
		t.Errorf("synthesized:\n%s\nwant:\n%s", gb, wb)
	}
	// A box's TRUST_PARENT rule for the workspace trusts the folder holding it: dropped.
	if out, _ := geminiTrust(nil, []byte(`{"/home/u/work": "TRUST_PARENT"}`), ws); string(out) != "{}" {
		t.Errorf("a box's trust of the workspace's parent was kept: %s", out)
	}
	// Garbage on both sides gives an empty rule set Gemini CLI accepts.
	if out, _ := geminiTrust([]byte("{"), []byte(`["x"]`), ws); string(out) != "{}" {
		t.Errorf("from garbage: %s", out)
	}
}

// TestCopilotMCPConfig: the box's mcp-config.json names no MCP server, whatever the host's or
// the box's copy held, and has the key Copilot CLI requires.
func TestCopilotMCPConfig(t *testing.T) {
	planted := []byte(`{"mcpServers":{"x":{"command":"sh"}}}`)
	out, err := copilotMCPConfig(planted, planted, "/w")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if s, ok := got["mcpServers"]; !ok || len(s) != 0 || len(got) != 1 {
		t.Errorf("mcp-config.json: %s", out)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGeminiSettings pins the user settings.json a box of Gemini CLI starts with: the host's
// keys in geminiKeys (comments stripped; its preferences, as the bound file gave them), never
// its hooks, MCP servers, tool commands or allowed tools, nor a key of an unexpected type or
// one the allowlist does not name; the update check, the automatic update and usage statistics
// off, and the API key path, whatever it says (the host's Google sign-in made the box wait for
// an authorization code); what the box wrote into its copy dropped.
func TestGeminiSettings(t *testing.T) {
	host := "// the user's own\n{\"ui\": {\"theme\": \"GitHub\", \"footer\": {\"hideCWD\": true, \"command\": \"x\"}, \"customThemes\": {\"Mine\": {\"type\": \"custom\", \"Background\": \"#000\"}}},\n" +
		" \"general\": {\"vimMode\": true, \"enableAutoUpdateNotification\": true, \"devtools\": true},\n" +
		" \"security\": {\"auth\": {\"selectedType\": \"oauth-personal\", \"useExternal\": true}, \"folderTrust\": {\"enabled\": false}, \"blockGitExtensions\": true}, \"privacy\": {\"usageStatisticsEnabled\": true},\n" +
		" \"modelConfigs\": {\"customAliases\": {\"my-fast\": {\"modelConfig\": {\"model\": \"gemini-2.5-flash\", \"generateContentConfig\": {\"thinkingConfig\": {\"thinkingBudget\": 0}}}}}, \"modelDefinitions\": {\"x\": {}}},\n" +
		" \"model\": {\"name\": {\"not\": \"a string\"}}, \"context\": {\"fileName\": [\"AGENTS.md\", \"GEMINI.md\"]},\n" +
		" \"hooks\": {\"BeforeTool\": [{\"command\": \"./lint.sh\"}]}, \"hooksConfig\": {\"enabled\": true},\n" +
		" \"mcpServers\": {\"gh\": {\"command\": \"gh-mcp\", \"env\": {\"GITHUB_TOKEN\": \"secret\"}}}, \"mcp\": {\"serverCommand\": \"x\"},\n" +
		" \"tools\": {\"discoveryCommand\": \"./discover\", \"callCommand\": \"./call\", \"allowed\": [\"run_shell_command\"], \"exclude\": [\"web_fetch\"], \"confirmationRequired\": [\"write_file\"], \"useRipgrep\": true, \"shell\": {\"pager\": \"./pager\", \"showColor\": true}},\n" +
		" \"advanced\": {\"bugCommand\": {\"urlTemplate\": \"x\"}}, \"policyPaths\": [\"/p\"], \"telemetry\": {\"otlpEndpoint\": \"x\"}, \"futureKey\": {\"x\": 1}}\n"
	box := `{"hooks": {"BeforeTool": [{"command": "planted"}]}, "tools": {"autoAccept": true}}`
	off := map[string]any{"enableAutoUpdateNotification": false, "enableAutoUpdate": false}
	for _, c := range []struct {
		name, host string
		want       map[string]any
	}{
		{"the host's", host, map[string]any{
			"ui": map[string]any{"theme": "GitHub", "footer": map[string]any{"hideCWD": true},
				"customThemes": map[string]any{"Mine": map[string]any{"type": "custom", "Background": "#000"}}},
			"general":  map[string]any{"vimMode": true, "enableAutoUpdateNotification": false, "enableAutoUpdate": false},
			"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}, "folderTrust": map[string]any{"enabled": false}, "blockGitExtensions": true},
			"privacy":  map[string]any{"usageStatisticsEnabled": false},
			"context":  map[string]any{"fileName": []any{"AGENTS.md", "GEMINI.md"}},
			"modelConfigs": map[string]any{"customAliases": map[string]any{"my-fast": map[string]any{"modelConfig": map[string]any{"model": "gemini-2.5-flash",
				"generateContentConfig": map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": 0.0}}}}}},
			"tools": map[string]any{"useRipgrep": true, "shell": map[string]any{"showColor": true}, "exclude": []any{"web_fetch"}, "confirmationRequired": []any{"write_file"}}}},
		{"none", "", map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}, "general": off,
			"privacy": map[string]any{"usageStatisticsEnabled": false}}},
		{"unparsable", `{"ui": `, map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}, "general": off,
			"privacy": map[string]any{"usageStatisticsEnabled": false}}},
		{"sections of another type", `{"general": "x", "privacy": 1}`, map[string]any{"general": off, "privacy": map[string]any{"usageStatisticsEnabled": false},
			"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h []byte
			if c.host != "" {
				h = []byte(c.host)
			}
			out, err := geminiSettings(h, []byte(box), "/w")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %s", out)
			}
		})
	}
}

// TestGeminiKeysDocumented keeps docs/profiles.md's table of the carried settings keys true:
// every key of geminiKeys is named in it (by its last part), with why it runs nothing.
func TestGeminiKeysDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "profiles.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "Keys of the host's `settings.json` carried into the box's")
	end := strings.Index(doc, "Never carried (dropped with every key not in the table)")
	if start < 0 || end < start {
		t.Fatal("docs/profiles.md has no table of Gemini CLI's carried settings keys")
	}
	table := doc[start:end]
	for key := range geminiKeys {
		last := key[strings.LastIndex(key, ".")+1:]
		if !regexp.MustCompile("[`{,.]" + regexp.QuoteMeta(last) + "[`},]").MatchString(table) {
			t.Errorf("docs/profiles.md's table of Gemini CLI's carried settings does not name %s", key)
		}
	}
}

// TestDataKind: an object carried as data (Gemini CLI's custom themes, token budgets) holds
// only booleans, numbers and short strings, at most 6 deep and 256 values; anything else drops
// the key whole.
func TestDataKind(t *testing.T) {
	many := map[string]any{}
	for i := range 300 {
		many[strconv.Itoa(i)] = true
	}
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"colours", map[string]any{"Mine": map[string]any{"type": "custom", "text": map[string]any{"primary": "#fff"}}}, true},
		{"a list", map[string]any{"a": []any{1.0, "x", false}}, true},
		{"six deep", map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": map[string]any{"f": "x"}}}}}}, true},
		{"too deep", map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": map[string]any{"f": map[string]any{"g": "x"}}}}}}}, false},
		{"too many", many, false},
		{"a long string", map[string]any{"a": strings.Repeat("x", 300)}, false},
		{"a null", map[string]any{"a": nil}, false},
		{"not an object", []any{"x"}, false},
	} {
		if got := hasKind(c.v, kData); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
