package harnessstate

import (
	"encoding/json"
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
