package harnessstate

import (
	"encoding/json"
	"path"
	"strings"
)

// geminiLevels are the trust levels of Gemini CLI's trustedFolders.json (0.61.0): each rule
// is a folder path and one of these names, and the longest matching rule decides whether a
// folder is trusted. TRUST_PARENT trusts the folder holding the rule's path.
var geminiLevels = map[string]bool{"TRUST_FOLDER": true, "TRUST_PARENT": true, "DO_NOT_TRUST": true}

// geminiTrust synthesizes the trustedFolders.json a box of Gemini CLI starts with: the rules
// of the host's file that decide about the workspace (for the workspace, a folder holding it,
// or a folder in it), which win, and the box's own rules for the workspace and folders in it
// (the trust answered in an earlier box). A trust rule names a folder and a level: it runs
// nothing, it makes Gemini CLI read that folder's .gemini/ settings, which are pinned in every
// box. Rules for other folders, from either side, are dropped: a box cannot trust a folder
// for later boxes of other workspaces, and the host's list of trusted folders stays the
// host's. Unparsable input counts as empty.
func geminiTrust(host, box []byte, ws string) ([]byte, error) {
	out := map[string]string{}
	carry := func(src []byte, inScope func(rule, effective string) bool) {
		var m map[string]any
		if json.Unmarshal(src, &m) != nil {
			return
		}
		for p, v := range m {
			level, _ := v.(string)
			if !geminiLevels[level] || !cleanAbs(p) {
				continue
			}
			eff := p
			if level == "TRUST_PARENT" {
				eff = path.Dir(p)
			}
			if inScope(p, eff) {
				out[p] = level
			}
		}
	}
	carry(box, func(p, eff string) bool { return within(eff, ws) })
	carry(host, func(p, eff string) bool { return within(p, ws) || within(ws, eff) })
	return json.MarshalIndent(out, "", "  ")
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// cleanAbs reports whether p is a clean absolute path of sane length with no control
// characters.
func cleanAbs(p string) bool {
	return len(p) <= 4096 && path.IsAbs(p) && path.Clean(p) == p && !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// geminiSettings writes the user settings.json a box of Gemini CLI starts with: the host's own
// ~/.gemini/settings.json, whole (a comment-stripped copy: the user's hooks and MCP servers
// run in the box as they did from the host's file bound read-only), with three keys turned
// off whatever it says, each a request at every start that no box reaches (Gemini CLI 0.61.0
// has no variable or flag for them): the update check and the automatic update
// (general.enableAutoUpdateNotification, general.enableAutoUpdate: the npm registry, which
// the egress proxy refused at the end of every launch; the install tree is read-only in a
// box anyway) and usage statistics (privacy.usageStatisticsEnabled). When the host has no
// file (or one that does not parse), the box's selects the API key path
// (security.auth.selectedType: gemini-api-key), which headless Gemini CLI needs with the
// relay's base URL. What a box wrote into its copy is dropped: it is rewritten at every
// launch from the host's.
func geminiSettings(host, _ []byte, _ string) ([]byte, error) {
	h, _ := jsonc(host)
	if h == nil {
		h = map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}}
	}
	set := func(section, key string, v any) {
		m, ok := h[section].(map[string]any)
		if !ok {
			m = map[string]any{}
			h[section] = m
		}
		m[key] = v
	}
	set("general", "enableAutoUpdateNotification", false)
	set("general", "enableAutoUpdate", false)
	set("privacy", "usageStatisticsEnabled", false)
	j, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(j, '\n'), nil
}
