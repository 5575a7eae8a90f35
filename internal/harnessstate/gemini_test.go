package harnessstate

import (
	"encoding/json"
	"reflect"
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
// file whole (comments stripped; its hooks, MCP servers and preferences, as the bound file
// gave them), with the update check, the automatic update and usage statistics off whatever
// it says; the API key path when the host has none, or one that does not parse; what the box
// wrote into its copy dropped.
func TestGeminiSettings(t *testing.T) {
	host := "// the user's own\n{\"ui\": {\"theme\": \"GitHub\"}, \"general\": {\"vimMode\": true, \"enableAutoUpdateNotification\": true},\n" +
		" \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}, \"privacy\": {\"usageStatisticsEnabled\": true},\n" +
		" \"hooks\": {\"BeforeTool\": [{\"command\": \"./lint.sh\"}]}}\n"
	box := `{"hooks": {"BeforeTool": [{"command": "planted"}]}, "tools": {"autoAccept": true}}`
	off := map[string]any{"enableAutoUpdateNotification": false, "enableAutoUpdate": false}
	for _, c := range []struct {
		name, host string
		want       map[string]any
	}{
		{"the host's", host, map[string]any{
			"ui": map[string]any{"theme": "GitHub"}, "general": map[string]any{"vimMode": true, "enableAutoUpdateNotification": false, "enableAutoUpdate": false},
			"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}, "privacy": map[string]any{"usageStatisticsEnabled": false},
			"hooks": map[string]any{"BeforeTool": []any{map[string]any{"command": "./lint.sh"}}}}},
		{"none", "", map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}, "general": off,
			"privacy": map[string]any{"usageStatisticsEnabled": false}}},
		{"unparsable", `{"ui": `, map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}, "general": off,
			"privacy": map[string]any{"usageStatisticsEnabled": false}}},
		{"sections of another type", `{"general": "x", "privacy": 1}`, map[string]any{"general": off, "privacy": map[string]any{"usageStatisticsEnabled": false}}},
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
