package harnessstate

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// codexKeys are the keys of Codex CLI's config.toml carried into a box (0.171.0), by table
// ("" is the top level), each with why it cannot run code. Everything else is dropped, from
// either side: notify (a command run after each turn), mcp_servers, shell_environment_policy,
// profile and profiles (which set any of these), hooks, model_provider and model_providers
// (the box's provider is agentbox's relay, set with -c), instructions files, sandbox and
// approval settings, features and experimental keys. The host's value wins, but for the notices
// and counters of codexShown (the furthest along of the two); the box's own is kept where the
// host has none. docs/profiles.md has the same table.
var codexKeys = map[string]map[string]kind{
	"": {
		"model":                    kString, // a model name, sent to the relay
		"model_reasoning_effort":   kString, // a request parameter (low, medium, high, …)
		"model_reasoning_summary":  kString,
		"model_verbosity":          kString,
		"personality":              kString, // the name of a built-in response style
		"hide_agent_reasoning":     kBool,   // display
		"show_raw_agent_reasoning": kBool,
		// The URI scheme of the editor that file citations link to (vscode, cursor, none): a
		// link in the terminal, not a command.
		"file_opener":         kString,
		"disable_paste_burst": kBool, // how typed bursts are told from pastes
	},
	// The terminal interface: display preferences, and the screen-reader check Codex records as
	// done at its first start.
	"tui": {
		"theme":                        kString, // a syntax-highlighting theme name
		"animations":                   kBool,
		"show_tooltips":                kBool,
		"alternate_screen":             kString, // auto, always or never
		"screen_reader_detection_done": kBool,
		// Desktop notifications are terminal escape sequences (true, or the event names).
		"notifications": kBoolOrStrings,
		// How often each model's availability notice was shown (it stops after a few): counters.
		"model_availability_nux": kCounts,
	},
	// Notices and one-time migration prompts the user has dismissed: flags.
	"notice": {
		"hide_full_access_warning":                kBool,
		"hide_world_writable_warning":             kBool,
		"hide_rate_limit_model_nudge":             kBool,
		"hide_gpt5_1_migration_prompt":            kBool,
		"hide_gpt-5.1-codex-max_migration_prompt": kBool,
	},
}

// codexShown are the carried keys ("table.key") in which Codex records a notice dismissed or
// shown and a first-start check done: where both sides have one, the furthest along of the
// two is carried (as claudeShown), so that what a box dismissed or counted is not undone by
// the host's older value in the next box.
var codexShown = map[string]func(box, host any) any{
	"tui.screen_reader_detection_done":               eitherTrue,
	"tui.model_availability_nux":                     largerCounts,
	"notice.hide_full_access_warning":                eitherTrue,
	"notice.hide_world_writable_warning":             eitherTrue,
	"notice.hide_rate_limit_model_nudge":             eitherTrue,
	"notice.hide_gpt5_1_migration_prompt":            eitherTrue,
	"notice.hide_gpt-5.1-codex-max_migration_prompt": eitherTrue,
}

// largerCounts merges two TOML tables of small counters (kCounts), each key's larger count.
func largerCounts(box, host any) any {
	out := map[string]any{}
	for _, m := range []map[string]any{box.(map[string]any), host.(map[string]any)} {
		for k, v := range m {
			if o, ok := out[k].(tomlRaw); ok {
				x, _ := strconv.Atoi(string(o))
				y, _ := strconv.Atoi(string(v.(tomlRaw)))
				if x > y {
					v = o
				}
			}
			out[k] = v
		}
	}
	if len(out) > 256 { // the kind's bound: the host's alone then
		return host
	}
	return out
}

// codexTrust are the values of a project's trust_level.
var codexTrust = []string{"trusted", "untrusted"}

// codexConfig synthesizes the config.toml a box of Codex CLI starts with: the carried keys of
// the host's ~/.codex/config.toml (which win) and of the box's own copy, and the trust_level of
// [projects."<path>"] for the workspace: from the host, for the workspace, a folder in it or a
// folder holding it; from the box (the trust answered in an earlier box, which Codex saved
// there), for the workspace and folders in it only, each where the host's file does not name
// that path. A trust level names a folder and a word: it makes Codex read that folder's
// .codex/config.toml (pinned read-only in every box) and skip its trust dialog. Unparsable
// input counts as empty.
func codexConfig(host, box []byte, ws string) ([]byte, error) {
	h, _ := parseTOML(host)
	b, _ := parseTOML(box)
	tables := map[string]map[string]any{}
	for _, src := range []map[string]any{b, h} {
		for table, keys := range codexKeys {
			t := src
			if table != "" {
				t, _ = src[table].(map[string]any)
			}
			for k, want := range keys {
				if v, ok := t[k]; ok && hasKind(v, want) {
					if tables[table] == nil {
						tables[table] = map[string]any{}
					}
					if merge, ok := codexShown[table+"."+k]; ok && tables[table][k] != nil {
						v = merge(tables[table][k], v)
					}
					tables[table][k] = v
				}
			}
		}
	}
	projects := map[string]string{}
	carry := func(src map[string]any, inScope func(string) bool) {
		ps, _ := src["projects"].(map[string]any)
		for p, e := range ps {
			entry, _ := e.(map[string]any)
			level, _ := entry["trust_level"].(string)
			if slices.Contains(codexTrust, level) && cleanAbs(p) && inScope(p) {
				projects[p] = level
			}
		}
	}
	carry(b, func(p string) bool { return within(p, ws) })
	carry(h, func(p string) bool { return within(p, ws) || within(ws, p) })

	var out strings.Builder
	out.WriteString("# Written by agentbox at every launch of a box, from an allowlist of the host's\n" +
		"# ~/.codex/config.toml and of what boxes of this workspace saved here (docs/profiles.md).\n")
	for _, table := range slices.Sorted(maps.Keys(tables)) {
		if table != "" {
			fmt.Fprintf(&out, "\n[%s]\n", table)
		}
		var sub []string
		for _, k := range slices.Sorted(maps.Keys(tables[table])) {
			if _, ok := tables[table][k].(map[string]any); ok {
				sub = append(sub, k) // a table of its own, after the table's keys
				continue
			}
			fmt.Fprintf(&out, "%s = %s\n", tomlString(k), tomlValue(tables[table][k]))
		}
		for _, k := range sub {
			fmt.Fprintf(&out, "\n[%s.%s]\n", table, tomlString(k))
			m := tables[table][k].(map[string]any)
			for _, n := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(&out, "%s = %s\n", tomlString(n), tomlValue(m[n]))
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(projects)) {
		fmt.Fprintf(&out, "\n[projects.%s]\ntrust_level = %s\n", tomlString(p), tomlString(projects[p]))
	}
	return []byte(out.String()), nil
}

// tomlValue renders a carried value: a string, a boolean, a small integer or a list of strings.
func tomlValue(v any) string {
	switch v := v.(type) {
	case bool:
		return fmt.Sprint(v)
	case tomlRaw: // a small integer (kCounts)
		return string(v)
	case string:
		return tomlString(v)
	case []any:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = tomlString(s.(string))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	panic(fmt.Sprintf("harnessstate: no TOML form for %T", v))
}
