package harnessstate

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// kind is the JSON type a carried key must have; a value of another type is dropped.
type kind int

const (
	kBool kind = iota
	kNumber
	kString
	kNumbers       // an object whose values are all numbers
	kBoolOrStrings // a boolean, or a list of short strings
	kStrings       // a list of short strings
	kCounts        // a TOML table whose values are all small integers
	kStringOrStrings
	kData // an object of at most 256 values, nested at most 6 deep, whose leaves are booleans, numbers or short strings
)

// claudeKeys are the top-level keys of Claude Code's ~/.claude.json carried into a box, each
// with why it cannot run code. Everything else is dropped: MCP servers (mcpServers, and per
// project mcpServers, enabledMcpjsonServers), allowed tools, env, apiKeyHelper, hooks, plugins,
// status-line commands, approved API keys (customApiKeyResponses), the account (oauthAccount,
// primaryApiKey), CLAUDE.md external-include approvals. The host's value wins, but for what
// Claude Code has shown (claudeShown: the furthest along of the two); the box's own is kept
// where the host has none. docs/profiles.md has the same table.
var claudeKeys = map[string]kind{
	// Set always (see claudeConfig): the first-run path checks the vendor's API host directly,
	// which no box reaches. A flag that skips screens; it names no program.
	"hasCompletedOnboarding": kBool,
	"lastOnboardingVersion":  kString, // a version string, compared only
	"lastReleaseNotesSeen":   kString, // a version string: which release notes were shown
	"theme":                  kString, // a colour theme name
	"editorMode":             kString, // "normal" or "vim" key handling of the prompt
	"verbose":                kBool,   // output detail
	"autoCompactEnabled":     kBool,   // a context-size behaviour
	"preferredNotifChannel":  kString, // a notification channel name (terminal bell, iTerm2, …)
	"diffTool":               kString, // "auto" or "terminal": how diffs are shown, not a command
	"numStartups":            kNumber, // a counter (tips and notices are paced by it)
	"tipsHistory":            kNumbers,
	"firstStartTime":         kString, // a timestamp
	// The version Claude Code first started at on this machine: a version string, compared
	// only. 2.1.334 gives an install that has one (a fresh install of a recent version) its
	// fullscreen renderer by default and never offers it; without the key every box asked "Try
	// the new fullscreen renderer?", which the host's own claude never showed (seen by hand in
	// tmux).
	"firstStartVersion": kString,
	// How often the offer of the fullscreen renderer was shown (it stops after 3): a counter.
	"fullscreenUpsellSeenCount": kNumber,
	"tipLifetimeShownCounts":    kNumbers,
	// Notices and one-time migrations already seen or run on the host: flags and counters.
	"hasSeenAutoDefaultNotice":             kBool,
	"hasResetAutoModeOptInForDefaultOffer": kBool,
	"opusProMigrationComplete":             kBool,
	"migrationVersion":                     kNumber,
	// Claude Code's random install id (its "device id"): one-time dialogs record whom they asked
	// by it, so a box with a new one each launch was asked again every time. An identifier,
	// no program.
	"userID": kString,
	// The "Autocompact now defaults to …" dialog (2.1.334): the ids it asked or told, and the
	// profile names whose size was kept. Lists of short strings, compared only.
	"lowerAutoWindowAskedOf":      kStrings,
	"lowerAutoWindowToldTo":       kStrings,
	"lowerAutoWindowTriedOn":      kStrings,
	"lowerAutoWindowKeptProfiles": kStrings,
}

// claudeShown are the carried keys in which Claude Code records what it has shown the user
// (release notes, tips, offers, one-time dialogs): where both sides have one, the furthest
// along of the two is carried, so that what a box showed is not shown again by the next box of
// the workspace while the host's file still has the older value (a Claude Code updated since
// the host's last unboxed start showed its release notes in every box: TestInteractiveClaudeAsksOnce).
// Preferences, the install's identity and migrations stay the host's. Each merge is of values
// already of the key's kind (hasKind), and gives one of that kind.
var claudeShown = map[string]func(box, host any) any{
	"lastReleaseNotesSeen":      laterVersion,
	"lastOnboardingVersion":     laterVersion,
	"numStartups":               largerNumber,
	"fullscreenUpsellSeenCount": largerNumber,
	"tipsHistory":               largerNumbers,
	"tipLifetimeShownCounts":    largerNumbers,
	"hasSeenAutoDefaultNotice":  eitherTrue,
	"lowerAutoWindowAskedOf":    unionStrings,
	"lowerAutoWindowToldTo":     unionStrings,
	"lowerAutoWindowTriedOn":    unionStrings,
}

// laterVersion is the later of two dotted version strings ("2.1.335"), compared number by
// number; the host's when either is not one.
func laterVersion(box, host any) any {
	bv, hv := versionNumbers(box.(string)), versionNumbers(host.(string))
	if bv == nil || hv == nil {
		return host
	}
	for i := 0; i < len(bv) || i < len(hv); i++ {
		var x, y int
		if i < len(bv) {
			x = bv[i]
		}
		if i < len(hv) {
			y = hv[i]
		}
		if x != y {
			if x > y {
				return box
			}
			return host
		}
	}
	return host
}

// versionNumbers splits "2.1.335" into its numbers; nil for anything else.
func versionNumbers(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ".") {
		if !smallInt(part) {
			return nil
		}
		n, _ := strconv.Atoi(part)
		out = append(out, n)
	}
	return out
}

func largerNumber(box, host any) any {
	return max(box.(float64), host.(float64))
}

// largerNumbers merges two objects of counters, each key's larger count.
func largerNumbers(box, host any) any {
	out := map[string]any{}
	for _, m := range []map[string]any{box.(map[string]any), host.(map[string]any)} {
		for k, v := range m {
			if o, ok := out[k].(float64); ok {
				v = max(o, v.(float64))
			}
			out[k] = v
		}
	}
	if len(out) > 256 { // the kind's bound: the host's alone then
		return host
	}
	return out
}

func eitherTrue(box, host any) any {
	return box.(bool) || host.(bool)
}

// unionStrings is the host's list with the box's strings it lacks after it.
func unionStrings(box, host any) any {
	out := slices.Clone(host.([]any))
	for _, x := range box.([]any) {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	if len(out) > 64 { // the kind's bound: the host's alone then
		return host
	}
	return out
}

// claudeProjectKeys are the keys of a projects["<path>"] entry carried, for the workspace (and,
// from the host, its parent folders, whose trust Claude Code extends to what they hold).
var claudeProjectKeys = map[string]kind{
	"hasTrustDialogAccepted":        kBool,   // the folder-trust answer: a flag, no program
	"hasCompletedProjectOnboarding": kBool,   // a flag
	"projectOnboardingSeenCount":    kNumber, // a counter
}

// claudeConfig synthesizes the ~/.claude.json a box of Claude Code starts with: the carried
// keys of the host's file (which win) and of the box's own copy, onboarding done, and the
// workspace's trust from either: the host's for the workspace or a folder holding it, the
// box's for the workspace or a folder in it. Unparsable input counts as empty.
func claudeConfig(host, box []byte, ws string) ([]byte, error) {
	h, b := jsonObject(host), jsonObject(box)
	out := map[string]any{}
	for _, src := range []map[string]any{b, h} {
		for k, v := range src {
			if want, ok := claudeKeys[k]; ok && hasKind(v, want) {
				if merge, ok := claudeShown[k]; ok && out[k] != nil {
					v = merge(out[k], v)
				}
				out[k] = v
			}
		}
	}
	out["hasCompletedOnboarding"] = true
	projects := map[string]any{}
	carry := func(src map[string]any, inScope func(string) bool) {
		ps, _ := src["projects"].(map[string]any)
		for path, e := range ps {
			entry, ok := e.(map[string]any)
			if !ok || !inScope(path) {
				continue
			}
			dst, _ := projects[path].(map[string]any)
			if dst == nil {
				dst = map[string]any{}
			}
			for k, v := range entry {
				want, ok := claudeProjectKeys[k]
				if !ok || !hasKind(v, want) {
					continue
				}
				if bv, isBool := v.(bool); isBool && !bv && dst[k] == true {
					continue // a trust given by either is kept
				}
				dst[k] = v
			}
			if len(dst) > 0 {
				projects[path] = dst
			}
		}
	}
	carry(b, func(p string) bool { return p == ws || strings.HasPrefix(p, ws+"/") })
	carry(h, func(p string) bool {
		return p == ws || strings.HasPrefix(p, ws+"/") || (strings.HasPrefix(ws, p+"/") && strings.HasPrefix(p, "/")) || p == "/"
	})
	if len(projects) > 0 {
		out["projects"] = projects
	}
	return json.MarshalIndent(out, "", "  ")
}

// claudeHostConfig returns the home-relative path of the global config the host's own Claude
// Code uses, which the claude-config seed reads: ~/.claude.json, or the legacy
// ~/.claude/.config.json where Claude Code 2.1.334 takes that instead (read from its code):
// whenever the legacy file is a regular file that is not empty (it then wins over
// ~/.claude.json), and when it is empty but has a write bit and ~/.claude.json is absent —
// an empty file holds nothing: "" then (no host state, as a new user's). Both are the user's
// own paths (their symlinks are followed, as Claude Code follows them).
func claudeHostConfig(home string) string {
	const global, legacy = ".claude.json", ".claude/.config.json"
	l, err := os.Stat(filepath.Join(home, legacy))
	if err != nil || !l.Mode().IsRegular() || (l.Size() == 0 && l.Mode().Perm()&0o222 == 0) {
		return global
	}
	if l.Size() > 0 {
		return legacy
	}
	if _, err := os.Stat(filepath.Join(home, global)); errors.Is(err, fs.ErrNotExist) {
		return "" // Claude Code would start from the empty legacy file: defaults
	}
	return global
}

func jsonObject(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func hasKind(v any, k kind) bool {
	switch k {
	case kBool:
		_, ok := v.(bool)
		return ok
	case kNumber:
		_, ok := v.(float64)
		return ok
	case kString:
		s, ok := v.(string)
		return ok && len(s) <= 256
	case kNumbers:
		m, ok := v.(map[string]any)
		if !ok || len(m) > 256 {
			return false
		}
		for _, x := range m {
			if _, ok := x.(float64); !ok {
				return false
			}
		}
		return true
	case kCounts:
		m, ok := v.(map[string]any)
		if !ok || len(m) > 256 {
			return false
		}
		for k, x := range m {
			if n, ok := x.(tomlRaw); !ok || !smallInt(string(n)) || !hasKind(k, kString) {
				return false
			}
		}
		return true
	case kBoolOrStrings:
		if _, ok := v.(bool); ok {
			return true
		}
		return hasKind(v, kStrings)
	case kStringOrStrings:
		return hasKind(v, kString) || hasKind(v, kStrings)
	case kData:
		m, ok := v.(map[string]any)
		n := 0
		return ok && plainData(m, 6, &n)
	case kStrings:
		l, ok := v.([]any)
		if !ok || len(l) > 64 {
			return false
		}
		for _, x := range l {
			if !hasKind(x, kString) {
				return false
			}
		}
		return true
	}
	return false
}

// plainData reports whether v holds only booleans, numbers and short strings (hasKind), in
// objects and lists nested at most depth deep, counting its values in n (at most 256).
func plainData(v any, depth int, n *int) bool {
	if *n++; *n > 256 {
		return false
	}
	switch x := v.(type) {
	case bool, float64:
		return true
	case string:
		return hasKind(x, kString)
	case map[string]any:
		for k, e := range x {
			if depth == 0 || !hasKind(k, kString) || !plainData(e, depth-1, n) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if depth == 0 || !plainData(e, depth-1, n) {
				return false
			}
		}
		return true
	}
	return false
}

// smallInt reports whether s is a decimal integer of at most 9 digits.
func smallInt(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
