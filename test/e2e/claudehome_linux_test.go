//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// claudeOnboarding is what Claude Code 2.1.334 shows on its first-run path: the welcome, the
// theme picker, and the connectivity check that follows them (no box reaches the vendor).
var claudeOnboarding = regexp.MustCompile(`Welcome to Claude Code|Let's get started|Choose the text style|Unable to connect|Failed to connect`)

// claudePrompt is Claude Code's empty input prompt.
const claudePrompt = `(?m)^❯[\s\x{00a0}]*$`

// stockClaude runs the stock claude, unboxed, in the workspace as e's user (HOME e.Home) against
// the stand-in upstream up, in print mode, and returns what it printed.
func stockClaude(t *testing.T, e *Env, bin string, up *llmtest.Server, prompt string) string {
	t.Helper()
	c := exec.Command(bin, "-p", prompt)
	c.Dir = e.Work
	c.Env = append(append([]string{}, e.Vars...), "ANTHROPIC_BASE_URL="+up.URL, "ANTHROPIC_AUTH_TOKEN="+hostCredential,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	r := e.RunCmd(c)
	if r.Code != 0 || !strings.Contains(r.Stdout, "Hello from the fake upstream") {
		t.Fatalf("the stock claude -p, unboxed: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// answerClaudeFirstUse is converseAfter's first step for a user whose Claude Code has run only
// in print mode (which records no trust and shows no offer): it waits for the prompt, answering
// on the way what that host state calls for — the folder-trust question ("Yes, I
// trust this folder", the second choice: 2.1.334 puts the cursor on "No, exit") and the offer
// of the fullscreen renderer (Esc: not now) — and fails on Claude Code's first-run path
// (onboarding), which a returning user never sees.
func answerClaudeFirstUse(t *testing.T, m *Tmux, prompt string) func() {
	trust := regexp.MustCompile(`(?i:trust this folder)`)
	offer := regexp.MustCompile(`Try the new fullscreen renderer\?`)
	ready := regexp.MustCompile(prompt)
	return func() {
		t.Helper()
		answered := false // the trust question
		for {
			m.WaitFor(trust.String() + `|` + offer.String() + `|` + claudeOnboarding.String() + `|` + prompt)
			scr := m.Screen()
			if o := claudeOnboarding.FindString(scr); o != "" {
				t.Fatalf("the boxed claude took its first-run path (%q), which a returning user does not see:\n%s", o, scr)
			}
			switch {
			case !answered && trust.MatchString(scr):
				// Keys sent while it still draws the question are lost: again until the cursor moves.
				yes := regexp.MustCompile(`❯ Yes, I trust this folder`)
				for try := 0; !yes.MatchString(m.Screen()); try++ {
					if try == 20 {
						t.Fatalf("the cursor never reached \"Yes, I trust this folder\":\n%s", m.Screen())
					}
					m.Keys("Down")
					time.Sleep(500 * time.Millisecond)
				}
				m.Keys("Enter")
				answered = true
			case offer.MatchString(scr):
				// A key typed before Claude Code reads its terminal raw is echoed and lost (seen
				// under load): Esc once, then again only when the offer stays for 15 s.
				for try := 0; offer.MatchString(m.Screen()); try++ {
					if try == 6 {
						t.Fatalf("the fullscreen renderer offer stays:\n%s", m.Screen())
					}
					m.Keys("Escape")
					for end := time.Now().Add(15 * time.Second); offer.MatchString(m.Screen()) && time.Now().Before(end); {
						time.Sleep(200 * time.Millisecond)
					}
				}
			case ready.MatchString(scr):
				return
			default:
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}

// TestClaudeHostStockAfterBox (issues #18, #20) follows a user who has never run Claude Code
// unboxed (no ~/.claude.json) with the real CLI: a boxed `claude -p`, then the stock claude
// unboxed, then a boxed claude in tmux. The box creates nothing in the host's ~/.claude — an
// empty ~/.claude/.config.json there made the stock claude write its whole config into that
// legacy file ("…/.config.json was empty … starting with defaults"), which every later box
// then read in place of its synthesized ~/.claude.json: the theme picker of the first-run path
// came back, and the host's MCP servers reached the box. So the stock claude writes
// ~/.claude.json, and the next boxed claude reaches its prompt with no onboarding (after the
// folder-trust question and the renderer offer, which that host state calls for) and answers
// through the relay.
func TestClaudeHostStockAfterBox(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, bin := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")
	global, legacy := filepath.Join(e.Home, ".claude.json"), filepath.Join(e.Home, ".claude", ".config.json")

	r := e.Run("", "run", "claude", "--", "-p", "say hello")
	if r.Code != 0 || !strings.Contains(r.Stdout, "Hello from the fake upstream") {
		t.Fatalf("agentbox run claude -- -p: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Lstat(legacy); err == nil {
		t.Errorf("the boxed claude left ~/.claude/.config.json on the host")
	}
	if ents, err := os.ReadDir(filepath.Join(e.Home, ".claude")); err == nil {
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		t.Errorf("the boxed claude left ~/.claude on the host, holding %v", names)
	}

	stockClaude(t, e, bin, up, "say hello")
	if b, err := os.ReadFile(legacy); err == nil {
		t.Errorf("the stock claude wrote its config into ~/.claude/.config.json (%d bytes), not ~/.claude.json", len(b))
	}
	var cfg map[string]any
	if b, err := os.ReadFile(global); err != nil || json.Unmarshal(b, &cfg) != nil {
		t.Errorf("the stock claude did not write ~/.claude.json: %v\n%s", err, b)
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	prompt := claudePrompt
	converseAfter(t, m, up, "run claude", answerClaudeFirstUse(t, m, prompt), nil, prompt, "", "are you there?")
	if o := claudeOnboarding.FindString(m.Screen()); o != "" {
		t.Errorf("the boxed claude showed %q:\n%s", o, m.Screen())
	}
	noRefusedRequest(t, e)
	if _, err := os.Lstat(legacy); err == nil {
		t.Errorf("~/.claude/.config.json exists on the host after the boxes")
	}
}

// TestClaudeHostLegacyConfig (issue #18): a host whose own Claude Code uses the legacy
// ~/.claude/.config.json (not empty; no ~/.claude.json) with a user MCP server, the workspace's
// trust, vim keys and onboarding done. The box's Claude sees no MCP server (`claude mcp list`
// lists none, and the server's command never runs) and carries the allowlisted keys from that
// file: its prompt, in tmux, comes with no onboarding and no trust question, in vim mode, and
// the host's file is unchanged.
func TestClaudeHostLegacyConfig(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")

	marker := filepath.Join(e.Work, "mcp-server-ran")
	host := claudeReturningUser(t, e.Work)
	host["editorMode"] = "vim"
	const userID = "5e1f0c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f"
	host["userID"] = userID
	host["mcpServers"] = map[string]any{"hostlegacy": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}}}
	hostJSON, _ := json.Marshal(host)
	legacy := filepath.Join(e.Home, ".claude", ".config.json")
	if err := os.MkdirAll(filepath.Dir(legacy), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}

	r := e.Run("", "run", "claude", "--", "mcp", "list")
	if r.Code != 0 || strings.Contains(r.Stdout+r.Stderr, "hostlegacy") {
		t.Errorf("claude mcp list in the box: exit %d, lists the host's server:\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "No MCP servers configured") {
		t.Errorf("claude mcp list in the box does not say it has no server:\nstdout: %s\nstderr: %s", r.Stdout, r.Stderr)
	}
	b, err := os.ReadFile(claudeStateConfig(t, e))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"editorMode": "vim"`, `"userID": "` + userID + `"`, `"hasTrustDialogAccepted": true`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the box's ~/.claude.json lacks %s from the host's legacy config:\n%s", want, b)
		}
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	prompt := claudePrompt
	vim := func() { statusShows(t, m, "agentbox run claude", []string{`-- INSERT --`}) }
	converseAfter(t, m, up, "run claude", nil, vim, prompt, "", "remember the word HERON")
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the MCP server of the host's legacy config ran in a box")
	}
	if b, _ := os.ReadFile(legacy); string(b) != string(hostJSON) {
		t.Errorf("the host's ~/.claude/.config.json changed:\n%s", b)
	}
	if _, err := os.Lstat(filepath.Join(e.Home, ".claude.json")); err == nil {
		t.Errorf("the box created ~/.claude.json on the host")
	}
}

// claudeStateConfig returns the box-owned copy of Claude Code's ~/.claude.json of e's
// workspace: in the state folder ~/.claude, which the box's ~/.claude.json links to.
func claudeStateConfig(t *testing.T, e *Env) string {
	t.Helper()
	return filepath.Join(boxState(t, e, "claude"), ".claude", ".claude.json")
}

// TestClaudeConfigReplacedByRename (issues #18, #23): Claude Code saves ~/.claude.json as a
// new file written beside the one it replaces (through a link, beside where the link leads)
// and renamed over it. A box of the claude profile (a stand-in named claude) does the same:
// the rename must work (the box's ~/.claude.json was a file bound on its own, a mount point,
// and the rename failed with EBUSY), the box reads the new file, and the next box of the
// workspace gets what it wrote through the allowlist only: its counter and the trust it gave
// the workspace, not its MCP server, and the host's preferences still win. The host's
// ~/.claude.json is neither written nor the link's target, and the host's ~/.claude gets
// nothing.
func TestClaudeConfigReplacedByRename(t *testing.T) {
	e := standInEnv(t)
	hostJSON := []byte(`{"hasCompletedOnboarding":true,"theme":"light","mcpServers":{"hostmcp":{"command":"true"}}}`)
	hostFile := filepath.Join(e.Home, ".claude.json")
	if err := os.WriteFile(hostFile, hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runStandIn(t, e, "claude", `#!/bin/sh
f="$HOME/.claude.json"
t=$(readlink -f "$f")
ws=$(pwd -P)
printf '{"numStartups":77,"theme":"box-theme","mcpServers":{"boxmcp":{"command":"true"}},"projects":{"%s":{"hasTrustDialogAccepted":true}}}\n' "$ws" > "$t.tmp.1" || exit 3
if mv -T "$t.tmp.1" "$t" 2>"$HOME/mv.err"; then echo renamed; else echo "rename failed: $(cat "$HOME/mv.err")"; fi
grep -q '"numStartups":77' "$f" && echo reads-new
case "$t" in "$HOME/.claude/"*) echo in-state-folder;; esac
`)
	for _, want := range []string{"renamed", "reads-new", "in-state-folder"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the box's rename over ~/.claude.json: no %q in\nstdout: %s\nstderr: %s", want, r.Stdout, r.Stderr)
		}
	}
	if b, _ := os.ReadFile(hostFile); string(b) != string(hostJSON) {
		t.Errorf("the host's ~/.claude.json changed:\n%s", b)
	}
	if _, err := os.Lstat(filepath.Join(e.Home, ".claude")); err == nil {
		t.Errorf("the box left ~/.claude on the host")
	}

	r = runStandIn(t, e, "claude", "#!/bin/sh\ncat \"$HOME/.claude.json\"\n")
	for _, want := range []string{`"numStartups": 77`, `"hasTrustDialogAccepted": true`, `"theme": "light"`} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the next box's ~/.claude.json lacks %s:\n%s", want, r.Stdout)
		}
	}
	for _, unwanted := range []string{"boxmcp", "hostmcp", "box-theme"} {
		if strings.Contains(r.Stdout, unwanted) {
			t.Errorf("the next box's ~/.claude.json holds %s:\n%s", unwanted, r.Stdout)
		}
	}
	if b, err := os.ReadFile(claudeStateConfig(t, e)); err != nil || !strings.Contains(string(b), `"numStartups": 77`) {
		t.Errorf("the box-owned copy: %v\n%s", err, b)
	}
}

// TestClaudeConfigSavedByRename (issues #18, #23): the real Claude Code, `claude -p` in two
// boxes of one workspace, saves its global config in the box as it does on the host: by
// renaming a new file over the box-owned ~/.claude/.claude.json (its ~/.claude.json is a link
// there), so each launch leaves another file (inode) than the one the daemon wrote for it —
// bound on its own at ~/.claude.json, the rename failed with EBUSY and Claude Code wrote the
// same file again in place. The install id and first start time it gives itself in the first
// box (the host's file has neither) are carried by the allowlist into the second, which keeps
// them; the host's ~/.claude.json is unchanged.
func TestClaudeConfigSavedByRename(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")
	hostJSON, _ := json.Marshal(claudeReturningUser(t, e.Work))
	hostFile := filepath.Join(e.Home, ".claude.json")
	if err := os.WriteFile(hostFile, hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	type saved struct {
		UserID         string `json:"userID"`
		FirstStartTime string `json:"firstStartTime"`
	}
	read := func(path string) (saved, uint64) {
		t.Helper()
		var cfg saved
		b, err := os.ReadFile(path)
		if err != nil || json.Unmarshal(b, &cfg) != nil {
			t.Fatalf("the box-owned ~/.claude.json: %v\n%s", err, b)
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		return cfg, st.Ino
	}
	// launch runs claude -p in a box, and returns the inode the daemon wrote the box's file
	// in (in place: it is the one of the previous launch's end) and the file after the box.
	var state string
	launch := func() (uint64, saved, uint64) {
		t.Helper()
		var before uint64
		if state != "" {
			_, before = read(state)
		}
		r := e.Run("", "run", "claude", "--", "-p", "say hello")
		if r.Code != 0 || !strings.Contains(r.Stdout, "Hello from the fake upstream") {
			t.Fatalf("agentbox run claude -- -p: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
		}
		state = claudeStateConfig(t, e)
		cfg, after := read(state)
		return before, cfg, after
	}
	_, first, ino1 := launch()
	before, second, ino2 := launch()
	t.Logf("first box: %+v (inode %d); second: %+v (inode %d before it, %d after)", first, ino1, second, before, ino2)
	if first.UserID == "" || first.FirstStartTime == "" {
		t.Errorf("Claude Code saved no install id or first start time in the first box: %+v", first)
	}
	if second != first {
		t.Errorf("the second box's Claude Code did not start from what the first saved (carried by the allowlist): %+v, then %+v", first, second)
	}
	if before != ino1 {
		t.Errorf("the daemon replaced the box-owned file (inode %d → %d) instead of rewriting it in place", ino1, before)
	}
	if ino2 == before {
		t.Errorf("Claude Code's save in the second box did not replace the box-owned file by a rename (inode %d kept: written in place)", before)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != string(hostJSON) {
		t.Errorf("the host's ~/.claude.json changed:\n%s", b)
	}
}
