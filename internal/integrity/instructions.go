package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// SkillFolders are the folders of skills and commands, at any depth of the workspace, whose
// Markdown files an agent loads with a YAML frontmatter that can run commands or grant tools:
// Claude Code's skills (SKILL.md) and commands carry hooks: (shell commands run while the
// skill is active, with no model judgment) and allowed-tools: (tools used without asking),
// and run a !`command` in their text when they are used; the other agents' skills follow
// the same format. They are instruction folders, writable in every box (docs/integrity.md), so
// the scan judges each file's content: one that can run or grant is executable configuration,
// and a new or changed one is moved aside (review 14, F11).
var SkillFolders = []string{".claude/skills", ".claude/commands", ".agents/skills", ".github/skills"}

// plainFrontmatterKeys are the frontmatter keys of a skill, command, rule or instruction
// file that neither run anything nor grant a tool: a name, a description, the model to use,
// the paths it applies to. Any other key, a frontmatter these lines cannot read as top-level
// keys, or an indented one, counts as executable (instructionExec): an allowlist fails closed
// for keys the agents add later.
var plainFrontmatterKeys = []string{
	"name", "description", "when_to_use", "argument-hint", "model", "license", "metadata", "version",
	"compatibility", "disable-model-invocation", "user-invocable", "paths", "globs", "applyTo", "excludeAgent",
}

var frontmatterKey = regexp.MustCompile(`^([A-Za-z0-9_-]+)[ \t]*:`)

// inSkillFolder reports whether rel (a workspace-relative folder, "." for the top) is a skill
// or command folder or lies beneath one.
func inSkillFolder(rel string) bool {
	r := "/" + rel + "/"
	for _, f := range SkillFolders {
		if strings.Contains(r, "/"+f+"/") {
			return true
		}
	}
	return false
}

// instructionExec returns what in a skill's or command's text can run a command or grant a
// tool: frontmatter keys outside plainFrontmatterKeys (or why the frontmatter is taken for
// one that can), and !`command` lines. Empty means plain instructions.
func instructionExec(b []byte) []string {
	var why []string
	text := strings.ReplaceAll(string(bytes.TrimPrefix(b, []byte("\uFEFF"))), "\r", "\n")
	lines := strings.Split(text, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i < len(lines) && strings.TrimRight(lines[i], " \t") == "---" {
		first := true
		closed := false
		for _, l := range lines[i+1:] {
			if t := strings.TrimRight(l, " \t"); t == "---" || t == "..." {
				closed = true
				break
			}
			if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimLeft(l, " \t"), "#") {
				continue
			}
			if l[0] == ' ' || l[0] == '\t' {
				if first {
					why = append(why, "an indented frontmatter")
				}
				first = false
				continue
			}
			first = false
			m := frontmatterKey.FindStringSubmatch(l)
			switch {
			case m == nil:
				why = append(why, "a frontmatter line that is no plain key ("+strings.TrimSpace(l[:min(len(l), 40)])+")")
			case !slices.Contains(plainFrontmatterKeys, m[1]):
				why = append(why, "frontmatter "+m[1])
			}
		}
		if !closed {
			why = append(why, "an unterminated frontmatter")
		}
	}
	if strings.Contains(text, "!`") || slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(strings.TrimLeft(l, " \t"), "```!") || strings.HasPrefix(strings.TrimLeft(l, " \t"), "~~~!")
	}) {
		why = append(why, "!`command` (run when the skill or command is used)")
	}
	slices.Sort(why)
	return slices.Compact(why)
}

// checkSkillFile records p, a file or symlink in a skill or command folder, when it can run a
// command or grant a tool (instructionExec), with a hash of its content; a symlink, which
// the agent follows wherever it leads (a box-written folder outside the workspace, say), with
// its target.
func checkSkillFile(ws, p string, symlink bool, out map[string]string) {
	if symlink {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			t, _ := os.Readlink(p)
			out[p] = "a symlinked folder in a skill or command folder, which the agent follows, to " + t
			return
		}
	}
	if !strings.EqualFold(filepath.Ext(p), ".md") {
		return
	}
	b, err := readBeneath(ws, p, maxCheckedFile)
	switch {
	case errors.Is(err, errOutside):
		t, _ := os.Readlink(p)
		out[p] = "a skill or command that is a symlink leading out of the workspace to " + t
	case tooLarge(err) != nil:
		out[p] = "a skill or command " + err.Error() + ": taken for one that runs commands"
	case err == nil:
		if why := instructionExec(b); len(why) > 0 {
			sum := sha256.Sum256(b)
			out[p] = "a skill or command that can run commands or grant tools (" + strings.Join(why, ", ") +
				"), which the agent on the host would use (sha256 " + hex.EncodeToString(sum[:6]) + ")"
		}
	}
}
