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

// geminiKeys are the keys of Gemini CLI's user settings.json (0.61.0's schema) carried from the
// host's into a box's, by their dotted path, each with why it cannot run code: preferences of
// its screen and keys, the model, what it reads as context, and its session bookkeeping.
// Everything else is dropped, among it what names or starts a program or decides what runs
// without asking: mcpServers and mcp (MCP servers and their commands), hooks and hooksConfig,
// tools (tools.discoveryCommand, tools.callCommand, the allowed and core tool lists, the
// sandbox command, the shell's pager), advanced (advanced.bugCommand), agents (subagents'
// run configuration), policyPaths and adminPolicyPaths (policy files that allow tools), admin,
// telemetry (an export endpoint), billing, modelConfigs and contextManagement (model
// routing), experimental (features that run or fetch: extension registries, auto memory,
// worktrees), general.devtools (an inspector port), ide.enabled (a connection to the host's
// IDE), security's other switches, and every key a later version adds. docs/profiles.md has
// the same table (TestGeminiKeysDocumented).
var geminiKeys = map[string]kind{
	// Screen and keys: display settings Gemini CLI reads as values.
	"general.vimMode":               kBool,
	"general.preferredEditor":       kString, // one of the editors Gemini CLI knows by name (its enum), each mapped to its own command line; an unknown name is refused
	"general.openEditorInNewWindow": kBool,
	"general.enableNotifications":   kBool,   // terminal bells and OSC notifications
	"general.notificationMethod":    kString, // which terminal notification, by name
	"general.retryFetchErrors":      kBool,
	"general.maxAttempts":           kNumber,
	"general.topicUpdateNarration":  kBool,
	// Which tool calls ask first (default, auto_edit, plan; the schema has no yolo): a
	// switch, not a program; the tools it lets run do so in the box.
	"general.defaultApprovalMode": kString,
	// Checkpoints are shadow git repositories under ~/.gemini/history, which is box-owned.
	"general.checkpointing.enabled": kBool,
	"general.plan.enabled":          kBool,
	"general.plan.modelRouting":     kBool,
	// How long saved chats are kept: durations and counts.
	"general.sessionRetention.enabled":      kBool,
	"general.sessionRetention.maxAge":       kString,
	"general.sessionRetention.maxCount":     kNumber,
	"general.sessionRetention.minRetention": kString,
	"output.format":                         kString, // text or json
	"ui.theme":                              kString, // a theme's name (a theme file's path under the host's home is not in the box's private home: the default theme)
	"ui.customThemes":                       kData,   // themes' names and colours
	"ui.autoThemeSwitching":                 kBool,
	"ui.terminalBackgroundPollingInterval":  kNumber,
	"ui.hideWindowTitle":                    kBool,
	"ui.inlineThinkingMode":                 kString,
	"ui.showStatusInTitle":                  kBool,
	"ui.dynamicWindowTitle":                 kBool,
	"ui.showHomeDirectoryWarning":           kBool,
	"ui.showCompatibilityWarnings":          kBool,
	"ui.hideTips":                           kBool,
	"ui.escapePastedAtSymbols":              kBool,
	"ui.showShortcutsHint":                  kBool,
	"ui.compactToolOutput":                  kBool,
	"ui.hideBanner":                         kBool,
	"ui.hideContextSummary":                 kBool,
	"ui.footer.items":                       kStrings, // which fields the footer shows, by name
	"ui.footer.showLabels":                  kBool,
	"ui.footer.hideCWD":                     kBool,
	"ui.footer.hideSandboxStatus":           kBool,
	"ui.footer.hideModelInfo":               kBool,
	"ui.footer.hideContextPercentage":       kBool,
	"ui.hideFooter":                         kBool,
	"ui.collapseDrawerDuringApproval":       kBool,
	"ui.showMemoryUsage":                    kBool,
	"ui.showLineNumbers":                    kBool,
	"ui.showCitations":                      kBool,
	"ui.showModelInfoInChat":                kBool,
	"ui.showUserIdentity":                   kBool,
	"ui.useAlternateBuffer":                 kBool,
	"ui.terminalBuffer":                     kBool,
	"ui.useBackgroundColor":                 kBool,
	"ui.incrementalRendering":               kBool,
	"ui.showSpinner":                        kBool,
	"ui.loadingPhrases":                     kString,
	"ui.errorVerbosity":                     kString,
	"ui.customWittyPhrases":                 kStrings, // text shown while the model works
	"ui.accessibility.enableLoadingPhrases": kBool,
	"ui.accessibility.screenReader":         kBool,
	"ide.hasSeenNudge":                      kBool, // a notice already shown
	// The model: names and numbers sent to the relay, which serves only the gateways allowed.
	"model.name":                 kString,
	"model.maxSessionTurns":      kNumber,
	"model.summarizeToolOutput":  kData, // token budgets per tool
	"model.compressionThreshold": kNumber,
	"model.disableLoopDetection": kBool,
	"model.skipNextSpeakerCheck": kBool,
	// The user's own model aliases, which model.name may name (without them Gemini CLI sends
	// the alias itself as the model): names, a model's name and its generation parameters.
	"modelConfigs.customAliases": kData,
	// What Gemini CLI reads as context: file names and folders it reads, never runs.
	"context.fileName":                                kStringOrStrings,
	"context.importFormat":                            kString,
	"context.includeDirectoryTree":                    kBool,
	"context.discoveryMaxDirs":                        kNumber,
	"context.memoryBoundaryMarkers":                   kStrings,
	"context.includeDirectories":                      kStrings,
	"context.loadMemoryFromIncludeDirectories":        kBool,
	"context.fileFiltering.respectGitIgnore":          kBool,
	"context.fileFiltering.respectGeminiIgnore":       kBool,
	"context.fileFiltering.enableFileWatcher":         kBool,
	"context.fileFiltering.enableRecursiveFileSearch": kBool,
	"context.fileFiltering.enableFuzzySearch":         kBool,
	"context.fileFiltering.customIgnoreFilePaths":     kStrings,
	// The built-in tools' presentation; never the commands, the pager or the allowed lists.
	"tools.useRipgrep":                         kBool,
	"tools.truncateToolOutputThreshold":        kNumber,
	"tools.disableLLMCorrection":               kBool,
	"tools.shell.enableInteractiveShell":       kBool,
	"tools.shell.showColor":                    kBool,
	"tools.shell.inactivityTimeout":            kNumber,
	"tools.shell.enableShellOutputEfficiency":  kBool,
	"tools.shell.backgroundCompletionBehavior": kString,
	"useWriteTodos":                            kBool,
	// What the user narrowed: tools that must ask first (rules that take precedence over
	// allowed tools), tools excluded, the core tools kept (the rest denied). Lists of tool
	// names that only narrow what runs; never tools.allowed, which widens it.
	"tools.confirmationRequired": kStrings,
	"tools.exclude":              kStrings,
	"tools.core":                 kStrings,
	// The folder trust dialog on or off, and what the approval dialogs offer: switches. What a
	// permanent approval saves goes to the box's own policy file, not kept.
	"security.folderTrust.enabled":         kBool,
	"security.disableYoloMode":             kBool,
	"security.disableAlwaysAllow":          kBool,
	"security.enablePermanentToolApproval": kBool,
	// Extensions allowed or blocked by pattern, and which variables' values are redacted from
	// what Gemini CLI shows the model: names, patterns and switches that narrow.
	"security.allowedExtensions":                    kStrings,
	"security.blockGitExtensions":                   kBool,
	"security.environmentVariableRedaction.enabled": kBool,
	"security.environmentVariableRedaction.allowed": kStrings,
	"security.environmentVariableRedaction.blocked": kStrings,
	// Extensions and skills the user turned off, by name (their folders are the host's,
	// read-only).
	"extensions.disabled": kStrings,
	"skills.enabled":      kBool,
	"skills.disabled":     kStrings,
}

// geminiSettings writes the user settings.json a box of Gemini CLI starts with: the keys of
// the host's ~/.gemini/settings.json in geminiKeys (a comment-stripped copy), with three keys
// turned off whatever it says, each a request at every start that no box reaches (Gemini CLI
// 0.61.0 has no variable or flag for them): the update check and the automatic update
// (general.enableAutoUpdateNotification, general.enableAutoUpdate: the npm registry, which
// the egress proxy refused at the end of every launch; the install tree is read-only in a
// box anyway) and usage statistics (privacy.usageStatisticsEnabled); and the API key path
// (security.auth.selectedType: gemini-api-key), the only one the relay serves, whatever the
// host's says: headless Gemini CLI needs it with the relay's base URL, and the host's usual
// Google sign-in (oauth-personal) made every box show Google's authorization URL and wait for
// a code (review 31). What a box wrote into its copy is dropped: it is rewritten at every
// launch from the host's.
func geminiSettings(host, _ []byte, _ string) ([]byte, error) {
	h, _ := jsonc(host)
	out := map[string]any{}
	for key, want := range geminiKeys {
		if v, ok := atDotted(h, key); ok && hasKind(v, want) {
			setDotted(out, key, v)
		}
	}
	setDotted(out, "general.enableAutoUpdateNotification", false)
	setDotted(out, "general.enableAutoUpdate", false)
	setDotted(out, "privacy.usageStatisticsEnabled", false)
	setDotted(out, "security.auth.selectedType", "gemini-api-key")
	j, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(j, '\n'), nil
}

// atDotted returns the value at the dotted path key in m.
func atDotted(m map[string]any, key string) (any, bool) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	v, ok := m[parts[len(parts)-1]]
	return v, ok
}

// setDotted sets the dotted path key in m to v, making the objects on the way.
func setDotted(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}
