package harnessstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
)

// copilotMCPConfig writes the mcp-config.json a box of Copilot CLI starts with: no MCP server,
// from neither side. Copilot CLI 1.0.102 refuses a file without the mcpServers key ("Failed
// to start MCP Servers: Error: mcpServers: Required"), so the file is a valid empty one; the
// host's servers are not the box's (as for Claude Code), and a server a box adds is dropped
// at the next launch.
func copilotMCPConfig(_, _ []byte, _ string) ([]byte, error) {
	return []byte("{\n  \"mcpServers\": {}\n}\n"), nil
}

// copilotPermissions writes the permissions-config.json a box of Copilot CLI starts with: the
// host's own file, or an empty object when the host has none (or one that does not parse).
// Copilot keeps there the tool approvals a user gave "for this location" (1.0.102: the
// permission store under its home, read at every start and applied to the session for the
// working directory's location): shell commands, writes and URLs it then runs or fetches
// without asking. What a box saved there is dropped, so that no box approves a tool for a
// later box of the workspace; the host's approvals are the user's own.
func copilotPermissions(host, _ []byte, _ string) ([]byte, error) {
	h, _ := jsonc(host)
	if h == nil {
		h = map[string]any{}
	}
	j, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(j, '\n'), nil
}

// copilotKeys are the keys of Copilot CLI's state file ~/.copilot/config.json carried into a
// box (1.0.102), each with why it cannot run code. Copilot keeps user settings (theme, model,
// hooks, …) in settings.json, which the box reads from the host; config.json is its own
// record of onboarding steps shown, one-off questions asked and migrations done (the keys a
// host may record, as its SDK lists them), the folder trust, and also the plugins it
// installed, the signed-in accounts and, without a keyring, their GitHub tokens. Everything
// not listed is dropped, from either side: installedPlugins (code), the accounts and tokens
// (credentials), staff flags, and every key a later version adds. The host's value wins, but
// for copilotShown (the furthest along of the two); the box's own is kept where the host has
// none. docs/profiles.md has the same table.
var copilotKeys = map[string]kind{
	"firstLaunchAt":                    kString,  // a timestamp: the first start (first-run screens, tips)
	"appTipShown":                      kBool,    // a tip shown: a flag
	"askedSetupTerminals":              kStrings, // terminal names already asked about key-binding set-up
	"recentModelIds":                   kStrings, // model names, offered first by /model; sent to the relay
	"autoFeedbackLastPromptedAt":       kString,  // a timestamp that paces a feedback question
	"sandboxOnboardingShown":           kBool,    // a notice shown: a flag
	"sandboxCredentialProxyCaDeclined": kBool,    // a one-off question answered: a flag
	"reasoningSummariesCleanupDone":    kBool,    // a one-time migration run: a flag
}

// copilotShown are the carried keys in which Copilot records a tip or notice shown and a
// question asked: where both sides have one, the furthest along of the two is carried (as
// claudeShown).
var copilotShown = map[string]func(box, host any) any{
	"appTipShown":            eitherTrue,
	"sandboxOnboardingShown": eitherTrue,
	"askedSetupTerminals":    unionStrings,
}

// copilotConfig synthesizes the config.json a box of Copilot CLI starts with: the carried keys
// of the host's ~/.copilot/config.json (which win) and of the box's own copy, and the
// trustedFolders that decide about the workspace: from the host, the workspace, a folder in
// it or a folder holding it; from the box (the trust answered in an earlier box with "Yes,
// and remember this folder", which Copilot saved there), the workspace and folders in it
// only. A trusted folder is a path: it skips Copilot's folder-trust dialog and lets it read
// and, with permission, edit files and run commands there, inside the box. The file is JSON
// with comment lines (Copilot writes two); one that does not parse counts as empty.
func copilotConfig(host, box []byte, ws string) ([]byte, error) {
	h, _ := jsonc(host)
	b, _ := jsonc(box)
	out := map[string]any{}
	for _, src := range []map[string]any{b, h} {
		for k, v := range src {
			if want, ok := copilotKeys[k]; ok && hasKind(v, want) {
				if merge, ok := copilotShown[k]; ok && out[k] != nil {
					v = merge(out[k], v)
				}
				out[k] = v
			}
		}
	}
	trusted := map[string]bool{}
	carry := func(src map[string]any, inScope func(string) bool) {
		l, _ := src["trustedFolders"].([]any)
		if len(l) > 4096 {
			return
		}
		for _, e := range l {
			if p, ok := e.(string); ok && cleanAbs(p) && inScope(p) {
				trusted[p] = true
			}
		}
	}
	carry(b, func(p string) bool { return within(p, ws) })
	carry(h, func(p string) bool { return within(p, ws) || within(ws, p) })
	if len(trusted) > 0 {
		out["trustedFolders"] = slices.Sorted(maps.Keys(trusted))
	}
	j, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	head := "// Written by agentbox at every launch of a box, from an allowlist of the host's\n" +
		"// ~/.copilot/config.json and of what boxes of this workspace saved here (docs/profiles.md).\n"
	return append(append([]byte(head), j...), '\n'), nil
}

// jsonc parses a JSON object that may hold // and /* */ comments outside its strings, as
// Copilot CLI writes and reads its config.json.
func jsonc(src []byte) (map[string]any, error) {
	var plain bytes.Buffer
	inString := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inString:
			plain.WriteByte(c)
			if c == '\\' && i+1 < len(src) {
				i++
				plain.WriteByte(src[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			plain.WriteByte(c)
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			plain.WriteByte('\n')
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return nil, errors.New("a /* comment is not closed")
			}
			i += 2 + end + 1
			plain.WriteByte(' ')
		default:
			plain.WriteByte(c)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(plain.Bytes(), &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}
