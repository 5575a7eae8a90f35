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
