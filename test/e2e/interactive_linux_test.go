//go:build linux

package e2e

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite", to read and plant in OpenCode's database
)

// dialogs are what the real CLIs show when they ask before the prompt (trust, an API key,
// onboarding) or fail to start: a returning user of the host never sees them.
var dialogs = regexp.MustCompile(`Enter to confirm|Do you want to use this API key|Unable to connect|Failed to connect|(?i:trust this folder)|Do you trust|Welcome to Claude Code|Select login method|Failed to start MCP`)

// geminiReady is Gemini CLI's screen once it takes a prompt: its header ("Gemini CLI v0.61.0"),
// which it draws only once its configuration is initialized, above its input box. Gemini CLI
// 0.61.0 draws the input box seconds before that (14 s against 19 s after a restart at load
// 10 here), and only queues a prompt submitted meanwhile.
const geminiReady = `(?s)Gemini CLI v\d.*Type your message`

// geminiWait is how long the Gemini CLI tests wait for each screen: its configuration took more
// than 90 s to initialize once, as the ordinary user at load average 41-43 here (the input box
// drawn, the header not yet).
const geminiWait = 4 * time.Minute

// geminiProcesses returns the pids of the Gemini CLI processes that draw the screen in e's
// boxes: the child its launcher starts (GEMINI_CLI_NO_RELAUNCH=true in its environment, with
// e's HOME) and starts again when it exits to restart. The programs that child runs (git, a
// shell) inherit its environment and are not counted; processes whose environment the test
// cannot read (another user's) are not e's.
func geminiProcesses(e *Env) []int {
	parents := map[int]int{} // the matching processes and their parents
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		vars := strings.Split(string(b), "\x00")
		if !slices.Contains(vars, "GEMINI_CLI_NO_RELAUNCH=true") || !slices.Contains(vars, "HOME="+e.Home) {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(st), ')'); err == nil && i > 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 1 {
				parents[pid] = atoi(f[1])
			}
		}
	}
	var pids []int
	for pid, ppid := range parents {
		if _, child := parents[ppid]; !child {
			pids = append(pids, pid)
		}
	}
	return pids
}

// resetPane resets the pane's terminal (its screen is cleared, the program in it keeps
// running) and clears its scrollback: what the pane shows from then on was drawn since.
func (m *Tmux) resetPane() {
	m.tmux("send-keys", "-R", "-t", m.target)
	m.tmux("clear-history", "-t", m.target)
}

// noDialog fails the test when the pane shows one of the dialogs.
func noDialog(t *testing.T, m *Tmux, when string) {
	t.Helper()
	if d := dialogs.FindString(m.Screen()); d != "" {
		t.Fatalf("%s: the terminal shows %q, which a returning user does not see:\n%s", when, d, m.Screen())
	}
}

// statusShows fails the test unless, within 10 s, the pane (this launch's screen, its
// scrollback included) matches each of want and none of unwanted: an agent's status line and
// header, with the model and the user's preferences the host's own settings give it.
func statusShows(t *testing.T, m *Tmux, when string, want []string, unwanted ...string) {
	t.Helper()
	ok := func(scr string) bool {
		for _, w := range want {
			if !regexp.MustCompile(w).MatchString(scr) {
				return false
			}
		}
		for _, u := range unwanted {
			if regexp.MustCompile(u).MatchString(scr) {
				return false
			}
		}
		return true
	}
	end := time.Now().Add(10 * time.Second)
	for !ok(m.Screen()) {
		if time.Now().After(end) {
			t.Errorf("%s: the screen does not show the host's model and preferences (want %q, not %q):\n%s", when, want, unwanted, m.Screen())
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clearPane clears the pane and its scrollback, so that what a launch shows is its own.
func (m *Tmux) clearPane() {
	m.Type("clear")
	m.Sync()
	m.tmux("clear-history", "-t", "main")
}

// Ask types text into an agent's prompt as a person does: the text, then, once the agent shows
// it, Enter (Codex takes an Enter that comes with a burst of typed text for part of a paste).
func (m *Tmux) Ask(text string) {
	m.t.Helper()
	// An agent still loading (Gemini CLI resuming a chat) drops what is typed: type again until
	// it shows.
	rx := regexp.MustCompile(regexp.QuoteMeta(text))
	for try := 0; ; try++ {
		m.tmux("send-keys", "-t", "main", "-l", text)
		end := time.Now().Add(5 * time.Second)
		for !rx.MatchString(m.Screen()) && time.Now().Before(end) {
			time.Sleep(50 * time.Millisecond)
		}
		if rx.MatchString(m.Screen()) {
			break
		}
		if try == 10 {
			m.t.Fatalf("the agent never showed %q typed; it shows:\n%s", text, m.Screen())
		}
		m.Keys("C-u")
	}
	time.Sleep(300 * time.Millisecond)
	m.Keys("Enter")
}

// converse is one launch used as a person uses it: `agentbox run ARGS` typed in the pane, the
// agent's prompt (matching prompt) shown with no dialog, then, when shown is not empty, the
// earlier conversation's text shown too; ask typed and the stand-in's answer shown after it;
// the agent's quit command (/exit, or quit when set), and the launch's exit code 0. It returns
// the requests the upstream got meanwhile.
func converse(t *testing.T, m *Tmux, up *llmtest.Server, args, prompt, shown, ask string, quit ...string) []llmtest.Request {
	t.Helper()
	return converseAfter(t, m, up, args, nil, nil, prompt, shown, ask, quit...)
}

// converseAfter is converse with a step taken once the launch is typed and before its prompt
// is awaited, such as answering a dialog the stock command shows too (the dialog check is then
// the caller's: the answered dialog stays on the screen), and a check made once the answer is
// shown, before the quit command (nil: none).
func converseAfter(t *testing.T, m *Tmux, up *llmtest.Server, args string, first, answered func(), prompt, shown, ask string, quit ...string) []llmtest.Request {
	t.Helper()
	m.clearPane()
	n := len(up.Requests())
	tag := m.Start(args)
	if first != nil {
		first()
	}
	m.WaitFor(prompt)
	if first == nil {
		noDialog(t, m, "agentbox "+args)
	}
	if shown != "" {
		m.WaitFor(regexp.QuoteMeta(shown))
	}
	m.Ask(ask)
	m.WaitFor(`(?s)` + regexp.QuoteMeta(ask) + `.*Hello from the fake upstream`)
	if answered != nil {
		answered()
	}
	m.Ask(append(quit, "/exit")[0])
	// Copilot CLI may still count a turn as running after its answer is shown; then it queues
	// the quit command ("Queued (1) └ /exit"), and runs it when the turn ends. Its test waits
	// for the end of the turn before /exit, as a person sees it; should the command stay
	// queued all the same (github/copilot-cli#4705: queued prompts that stay queued once
	// idle, intermittently), a person presses Escape, again while it stays queued (once under
	// load, in CI, one Escape was not enough). Said in the log, so that it is seen.
	done := regexp.MustCompile(regexp.QuoteMeta(tag) + `=(\d+)`)
	var escaped time.Time
	for i := 0; i < 900; i++ {
		scr := m.Screen()
		if done.MatchString(scr) {
			break
		}
		if strings.Contains(scr, "Queued (") && time.Since(escaped) > 3*time.Second {
			t.Logf("agentbox %s: the quit command stays queued; pressing Escape:\n%s", args, m.Visible())
			m.Keys("Escape")
			escaped = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := m.Wait(tag); code != 0 {
		t.Fatalf("agentbox %s, /exit: exit %d\n%s", args, code, m.Screen())
	}
	noRefusalAnnounced(t, m, "agentbox "+args)
	reqs := up.Requests()[n:]
	if len(reqs) == 0 {
		t.Fatalf("agentbox %s: the stand-in upstream saw no request", args)
	}
	return reqs
}

// noRefusalAnnounced fails the test when the pane shows the line an attached launch ends with
// when its egress proxy refused hosts (egressHint): the agents' launches make no request a box
// refuses, but for one their profile expects (expectedRefusals), which is not announced.
func noRefusalAnnounced(t *testing.T, m *Tmux, what string) {
	t.Helper()
	if scr := m.Screen(); strings.Contains(scr, "egress proxy refused") {
		t.Errorf("%s: the launch ended announcing refused requests:\n%s", what, scr)
	}
}

// carries reports whether one of reqs sends text (the earlier conversation) to the model.
func carries(reqs []llmtest.Request, text string) bool {
	for _, q := range reqs {
		if strings.Contains(string(q.Body), text) {
			return true
		}
	}
	return false
}

// boxState returns the box-owned state directory of the environment's workspace for profile
// id (there is one workspace, so one directory).
func boxState(t *testing.T, e *Env, id string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "boxes", id, "*"))
	if len(dirs) != 1 {
		t.Fatalf("box-owned state of %s: %v, want one directory", id, dirs)
	}
	return dirs[0]
}

// jsonlUnder lists the .jsonl files (transcripts) beneath dir.
func jsonlUnder(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// noRefusedRequest fails the test when one of e's launches made a request its egress proxy
// refused that the launch's profile does not expect (expectedRefusals: a request the agent
// makes at every start whatever its settings, named in docs/profiles.md): a launch that ends
// with "its egress proxy refused …" for a host the user never asked for. It also fails when
// the daemon's log holds a request refused for want of a pairing (a client in the box that
// ignored the pairing of its proxy URL). It returns the expected refusals the launches'
// records hold (still refused and audited), by target.
func noRefusedRequest(t *testing.T, e *Env) map[string]int {
	t.Helper()
	ls := e.Launches()
	if len(ls) == 0 {
		t.Errorf("no launch recorded")
	}
	expected := map[string]int{}
	for _, l := range ls {
		if l.Egress == nil {
			t.Errorf("launch %s (%s): no egress record", l.ID, l.Program+" "+strings.Join(l.Args, " "))
			continue
		}
		var refused []string
		for _, r := range l.Egress.Refusals {
			if r.Expected {
				expected[r.Target]++
			} else {
				refused = append(refused, r.Target)
			}
		}
		// A refusal for want of a pairing or of a bad request is counted, not listed (the
		// daemon's log, below, names the first).
		if len(refused) > 0 || (l.Egress.Refused > 0 && len(l.Egress.Refusals) == 0) {
			t.Errorf("launch %s (%s): the egress proxy refused %d requests, to %v: %+v", l.ID, l.Program+" "+strings.Join(l.Args, " "), l.Egress.Refused, refused, *l.Egress)
		}
	}
	logs, err := os.ReadFile(filepath.Join(e.State, "agentbox", "daemon.log"))
	if err != nil {
		t.Errorf("daemon log: %v", err)
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, "reason=pairing") {
			t.Errorf("a request from a box was refused for want of a pairing: %s", line)
		}
	}
	return expected
}

// claudeReturningUser is a returning user's ~/.claude.json, as Claude Code leaves it:
// onboarding done, notices seen, the workspace work trusted, the installed version's release
// notes seen (a user who started the stock claude since its update: Claude Code 2.1.335 shows
// "Updated: N features, …" above the input of a user whose lastReleaseNotesSeen is older, boxed
// or not). Its firstStartVersion, and no fullscreenUpsellSeenCount, are those of a user whose
// first Claude Code was 2.1.334 (as the stock claude left them, driven by hand in tmux): such an
// install has the fullscreen renderer by default and is never offered it; a box that drops
// firstStartVersion asks "Try the new fullscreen renderer?".
func claudeReturningUser(t *testing.T, work string) map[string]any {
	v := claudeVersion(t)
	return map[string]any{
		"hasCompletedOnboarding": true, "lastOnboardingVersion": v, "numStartups": 12,
		"theme": "light", "lastReleaseNotesSeen": v, "hasSeenAutoDefaultNotice": true,
		"firstStartVersion": "2.1.334", "migrationVersion": 15, "opusProMigrationComplete": true,
		"hasResetAutoModeOptInForDefaultOffer": true,
		"projects":                             map[string]any{work: map[string]any{"hasTrustDialogAccepted": true}},
	}
}

// claudeVersion is the installed Claude Code's version ("2.1.335"), from `claude --version`.
func claudeVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(testenv.AgentCLI(t, "claude"), "--version").Output()
	v, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if err != nil || !regexp.MustCompile(`^\d+(\.\d+)+$`).MatchString(v) {
		t.Fatalf("claude --version: %q %v", out, err)
	}
	return v
}

// TestInteractiveClaude uses the real Claude Code in a real terminal (tmux) as a returning user
// of the host would: `agentbox run claude` reaches its prompt with no onboarding, connectivity
// failure, trust or API-key dialog (the host's ~/.claude.json settles them), a typed prompt is
// answered by the stand-in upstream through the relay, /exit ends the launch with 0, and the
// next launch's `claude --continue` resumes the conversation (its transcript is shown, and the
// next request carries it). The conversation is the box's own: it is kept in the workspace's
// box-owned state, not in the host's ~/.claude/projects, and the host's ~/.claude.json is not
// changed. An MCP server planted in the box-owned ~/.claude.json between the launches is not
// carried into the next box and does not run; the stock claude, unboxed and from the same host
// state, reaches its prompt the same way and does not resume the box's conversation. The
// screen shows the host's model (~/.claude/settings.json: Sonnet, where Claude Code 2.1.334's
// own default here is Opus) and editor mode (vim keys: "-- INSERT --"); once the host turns
// vim keys off, the next box's footer follows.
func TestInteractiveClaude(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, bin := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")

	// A returning user's ~/.claude.json, as Claude Code leaves it: onboarding done, notices seen,
	// this workspace trusted; and a user MCP server, which no box may get.
	marker := filepath.Join(e.Work, "mcp-server-ran")
	host := claudeReturningUser(t, e.Work)
	// The user's preferences: vim keys (~/.claude.json, carried by the allowlist) and a model
	// (~/.claude/settings.json, the host's, read-only in the box). Claude Code shows both: the
	// model under its name in the header, "-- INSERT --" in the footer.
	host["editorMode"] = "vim"
	hostSettings := filepath.Join(e.Home, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(hostSettings), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hostSettings, []byte(`{"model": "sonnet"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	host["mcpServers"] = map[string]any{"planted": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}}}
	hostJSON, _ := json.Marshal(host)
	hostFile := filepath.Join(e.Home, ".claude.json")
	if err := os.WriteFile(hostFile, hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	prompt := `(?m)^❯[\s\x{00a0}]*$`

	// First launch: the prompt, a question, the answer, /exit.
	opus := func() {
		statusShows(t, m, "agentbox run claude", []string{`Sonnet [\d.]+ · API Usage Billing`, `-- INSERT --`}, `Opus`)
	}
	// Nothing on the way to the prompt, found by the screen's shape (claudeStart): a dialog or
	// notice a version adds whose key the allowlist does not carry fails here too, not only in
	// TestInteractiveClaudeAsksOnce (before the key was carried, "▎ Auto mode is now Claude
	// Code's default permission mode." above the input of every box).
	returning := func(resumed bool) func() {
		return func() {
			shown := claudeStart(t, m, resumed)
			if len(shown.dialogs) > 0 || len(shown.notices) > 0 {
				t.Errorf("a returning user's box shows dialogs %q and notices %q:\n%s", shown.dialogs, shown.notices, m.Visible())
			}
			noDialog(t, m, "agentbox run claude")
		}
	}
	converseAfter(t, m, up, "run claude", returning(false), opus, prompt, "", "remember the word PELICAN")
	// A returning user's Claude asks nothing of the network a box refuses (the plugin
	// marketplace on the vendor's download CDN, 2.1.333, until its variable).
	noRefusedRequest(t, e)

	// The transcript is the box's: in the workspace's box-owned state, not the host's.
	state := boxState(t, e, "claude")
	if ts := jsonlUnder(filepath.Join(state, ".claude", "projects")); len(ts) == 0 {
		t.Errorf("no transcript in the box-owned state %s", state)
	}
	if ts := jsonlUnder(filepath.Join(e.Home, ".claude", "projects")); len(ts) > 0 {
		t.Errorf("the box wrote transcripts into the host's ~/.claude/projects: %v", ts)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != string(hostJSON) {
		t.Errorf("the host's ~/.claude.json changed:\n%s", b)
	}
	// Plant an MCP server in the box-owned ~/.claude.json, for the next box to start.
	stateFile := claudeStateConfig(t, e)
	var boxCfg map[string]any
	b, err := os.ReadFile(stateFile)
	if err != nil || json.Unmarshal(b, &boxCfg) != nil {
		t.Fatalf("the box-owned ~/.claude.json: %v\n%s", err, b)
	}
	boxCfg["mcpServers"] = host["mcpServers"]
	if ps, ok := boxCfg["projects"].(map[string]any); ok {
		if p, ok := ps[e.Work].(map[string]any); ok {
			p["mcpServers"] = host["mcpServers"]
		}
	}
	b, _ = json.Marshal(boxCfg)
	if err := os.WriteFile(stateFile, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// The user turns vim keys off on the host: the next box follows (so the footer shows the
	// host's setting, not a default). A resumed conversation keeps its model (Claude Code
	// 2.1.334 showed Opus again with the host's settings.json naming Sonnet by then).
	host["editorMode"] = "normal"
	hostJSON, _ = json.Marshal(host)
	if err := os.WriteFile(hostFile, hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	normal := func() {
		statusShows(t, m, "agentbox run claude -- --continue", []string{`Sonnet [\d.]+ · API Usage Billing`}, `-- INSERT --`)
	}

	// Second launch: --continue resumes the conversation.
	if reqs := converseAfter(t, m, up, "run claude -- --continue", returning(true), normal, prompt, "remember the word PELICAN", "and now?"); !carries(reqs, "PELICAN") {
		t.Errorf("the resumed launch's requests do not carry the earlier conversation")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("an MCP server planted in the box-owned ~/.claude.json ran in the next box")
	}
	if b, _ := os.ReadFile(stateFile); strings.Contains(string(b), "planted") {
		t.Errorf("the MCP server planted in the box-owned ~/.claude.json was carried into the next box:\n%s", b)
	}

	// The controls, the stock claude unboxed from the same host state. It does not resume what
	// the boxes wrote (their conversation is in the box-owned state, not the host's ~/.claude).
	m.clearPane()
	m.Type(fmt.Sprintf("ANTHROPIC_BASE_URL=%s ANTHROPIC_AUTH_TOKEN=%s %s --continue; echo U1U=$?", up.URL, hostCredential, bin))
	m.WaitFor(`No conversation found|` + prompt)
	if strings.Contains(m.Screen(), "PELICAN") {
		t.Errorf("the unboxed claude resumed the box's conversation:\n%s", m.Screen())
	}
	if !strings.Contains(m.Screen(), "No conversation found") {
		t.Errorf("the unboxed claude --continue found a conversation to resume, where the host's state has none:\n%s", m.Screen())
		m.Ask("/exit")
	}
	m.WaitFor(`U1U=\d+`)
	// And it reaches its prompt with no dialog, as the boxes did (so the screen checks above
	// mean something), and /exit ends it with 0.
	m.clearPane()
	m.Type(fmt.Sprintf("ANTHROPIC_BASE_URL=%s ANTHROPIC_AUTH_TOKEN=%s %s; echo U2U=$?", up.URL, hostCredential, bin))
	m.WaitFor(prompt)
	noDialog(t, m, "the unboxed claude")
	m.Ask("/exit")
	m.WaitFor(`U2U=0\b`)
}

// claudeChoice is the highlighted choice of a Claude Code dialog ("❯ No, exit", "❯ 1. Yes"):
// its text.
var claudeChoice = regexp.MustCompile(`^\s*❯\s+(?:\d+\.\s+)?(\S.*?)\s*$`)

// claudeInput is Claude Code's input line, empty: its prompt.
var claudeInput = regexp.MustCompile(`^❯[\s\x{00a0}]*$`)

// claudeConfirm is the foot of a Claude Code dialog ("Enter to confirm · Esc to cancel"), or a
// notice that waits for Enter.
var claudeConfirm = regexp.MustCompile(`(?i)enter to (?:confirm|continue)|press enter`)

// claudeNo is a choice that quits or declines, which a person who came to work passes over.
var claudeNo = regexp.MustCompile(`(?i)^(?:no\b|exit|quit|cancel)`)

// claudeShown is what Claude Code showed on its way to its prompt besides its header and its
// input: the dialogs it asked (each by its choices) and the notices drawn above the input.
type claudeShown struct {
	dialogs []string // each dialog's text, its lines joined: "Accessing workspace: | … | No, exit | Yes, I trust this folder"
	notices []string // each line drawn between the header and the input
}

// claudeStart waits, once a launch of Claude Code was typed, for its prompt, answering every
// dialog shown on the way as a person who came to work does (its highlighted choice, unless that
// one declines or quits: then the next), and returns what it showed besides its header and
// input. Dialogs and notices are found by the screen's shape, not by their words, so that one a
// new version of Claude Code adds is found as well: a dialog by its foot ("Enter to confirm"),
// or by a highlighted choice ("❯ …") in place of the input (with the input, such a line is a
// message of the conversation shown), a notice as a line between the header (the logo, whose last
// line names the working folder) and the rule above the input ("▎ Auto mode is now Claude
// Code's default permission mode.", 2.1.334, while the notice's key is not carried). The effort
// indicator ("◐ medium · /effort"), drawn there on some screens, is none. Once the prompt shows,
// it watches 3 s more for what a version draws after it. A resumed conversation (resumed) is
// drawn where notices are, its messages as "❯ …": then only a dialog's foot is looked for, and
// notices are not. The pane should be 120 columns wide, as a terminal commonly is.
func claudeStart(t *testing.T, m *Tmux, resumed bool) claudeShown {
	t.Helper()
	var shown claudeShown
	end := time.Now().Add(deadline)
	var prompted time.Time
	for {
		vis := m.Visible()
		lines := strings.Split(vis, "\n")
		input, choice := -1, -1
		for i, l := range lines {
			if claudeInput.MatchString(l) {
				input = i
			} else if choice < 0 && claudeChoice.MatchString(l) {
				choice = i
			}
		}
		switch {
		case input < 0 && !resumed && choice >= 0, claudeConfirm.MatchString(vis):
			// The dialog's text: from the rule above it (or the header) to its foot, the
			// highlight left out, so that it reads the same whichever choice is highlighted.
			foot := len(lines)
			for i, l := range lines {
				if claudeConfirm.MatchString(l) {
					foot = i
					break
				}
			}
			top := 0
			for i := 0; i < max(choice, 0) || (choice < 0 && i < foot); i++ {
				if strings.Contains(lines[i], "▝▝") || strings.Trim(strings.TrimSpace(lines[i]), "─") == "" && strings.Contains(lines[i], "─") {
					top = i + 1
				}
			}
			var text []string
			for _, l := range lines[top:foot] {
				if l = strings.Join(strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "❯")), " "); l != "" && !strings.Contains(l, agentboxBin) {
					text = append(text, l)
				}
			}
			dialog := strings.Join(text, " | ")
			if !slices.Contains(shown.dialogs, dialog) {
				shown.dialogs = append(shown.dialogs, dialog)
				t.Logf("Claude Code asks: %s\n%s", dialog, vis)
			}
			// A key is pressed once the dialog is drawn and has stood still for a moment (its
			// input handler is then in place), and the next only once this one showed its
			// effect. Claude Code's choices wrap around: a second Down pressed because the screen
			// changed for another reason (the dialog still being drawn, a redraw) moved the
			// highlight back to "No, exit", and an Enter pressed meanwhile, on the screen where
			// the first Down had highlighted "Yes", took it: the launch ended "folder isn't
			// trusted" (1 of 3 runs as the ordinary user, session 18).
			if !m.settled(vis, 700*time.Millisecond) {
				continue
			}
			if choice >= 0 && claudeNo.MatchString(claudeChoice.FindStringSubmatch(lines[choice])[1]) {
				from := lines[choice]
				m.Keys("Down")
				eventually(t, "Claude Code's dialog to highlight the choice after "+strings.TrimSpace(from), func() bool {
					for _, l := range strings.Split(m.Visible(), "\n") {
						if claudeChoice.MatchString(l) && !claudeInput.MatchString(l) {
							return l != from
						}
					}
					return true // the dialog is gone
				})
			} else {
				m.Keys("Enter")
				for i := 0; i < 50 && m.Visible() == vis; i++ {
					time.Sleep(100 * time.Millisecond)
				}
			}
			prompted = time.Time{}
			continue
		case input >= 0 && prompted.IsZero():
			prompted = time.Now()
		case input >= 0 && time.Since(prompted) >= 3*time.Second:
			if !resumed {
				shown.notices = claudeNotices(lines, input)
			}
			if len(shown.notices) > 0 {
				t.Logf("Claude Code shows above its input:\n%s", vis)
			}
			return shown
		case input < 0:
			prompted = time.Time{}
		}
		if time.Now().After(end) {
			t.Fatalf("Claude Code never showed its prompt; it shows:\n%s", vis)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settled reports whether the pane still shows vis after d, polling: a screen that changed
// meanwhile is still being drawn.
func (m *Tmux) settled(vis string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		if m.Visible() != vis {
			return false
		}
	}
	return true
}

// claudeNotices returns the lines of Claude Code's screen lines drawn between its header (the
// logo's last line, "▝▝   ▝▝   /work/folder") and the rule above the line input (its input
// line's index; len(lines) when there is none), trimmed, but for blank lines and the effort
// indicator.
func claudeNotices(lines []string, input int) []string {
	from := 0
	for i := 0; i < input && i < len(lines); i++ {
		if strings.Contains(lines[i], "▝▝") {
			from = i + 1
		}
	}
	var out []string
	for i := from; i < input && i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.Trim(l, "─") == "" || strings.HasSuffix(l, "/effort") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// TestInteractiveClaudeAsksOnce launches the real Claude Code twice in boxes of one workspace, in
// a real terminal (tmux), as a returning user of the host whose ~/.claude.json does not trust
// this workspace yet: the second launch must show no dialog and no notice that the first
// showed. What a box's Claude Code asks or tells once it records in its ~/.claude.json under a
// key of its own choosing, and a key the daemon's allowlist does not carry is gone in the next
// box, which asks again (the "Autocompact now defaults to 400k" dialog of 2.1.334 came back in
// every box until userID and four lists were carried). Dialogs and notices are found by the
// screen's shape, not by their words (claudeStart), so the next one a version of Claude Code adds
// fails this test until its key is reviewed and carried (docs/profiles.md, "Carrying a new key").
// The first launch asks for trust (the host's file does not give it), which the user gives:
// the test sees a dialog answered in one box and held in the next; and it shows the release
// notes of a version newer than the host's file has seen, which the next box must not. Without the allowlist's
// hasSeenAutoDefaultNotice it fails on the auto mode notice, shown in both launches.
func TestInteractiveClaudeAsksOnce(t *testing.T) {
	t.Parallel() // its own daemon and upstream; mostly waits (parallelTests)
	e, _ := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")
	host := claudeReturningUser(t, e.Work)
	delete(host, "projects")
	// A user whose Claude Code was updated since its last unboxed start: the first box shows
	// the release notes (2.1.335: "Updated: N features, …"), which the next box must not show
	// again while the host's file still names the older version (claudeShown in
	// internal/harnessstate; before it, the notes came back in every box).
	host["lastReleaseNotesSeen"] = "2.1.300"
	hostJSON, _ := json.Marshal(host)
	if err := os.WriteFile(filepath.Join(e.Home, ".claude.json"), hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")

	launch := func() claudeShown {
		t.Helper()
		m.clearPane()
		tag := m.Start("run claude")
		shown := claudeStart(t, m, false)
		m.Ask("/exit")
		if code := m.Wait(tag); code != 0 {
			t.Fatalf("agentbox run claude, /exit: exit %d\n%s", code, m.Screen())
		}
		return shown
	}
	first := launch()
	if !slices.ContainsFunc(first.dialogs, func(d string) bool { return strings.Contains(d, "I trust this folder") }) {
		t.Errorf("the first launch did not ask to trust the workspace, which the host's ~/.claude.json does not trust (dialogs %q)", first.dialogs)
	}
	second := launch()
	for _, d := range second.dialogs {
		if slices.Contains(first.dialogs, d) {
			t.Errorf("the second launch asked again what the first box answered: %s", d)
		} else {
			t.Logf("the second launch asked what the first did not: %s", d)
		}
	}
	for _, n := range second.notices {
		if slices.Contains(first.notices, n) {
			t.Errorf("the second launch showed again what the first box showed: %q", n)
		} else {
			t.Logf("the second launch showed what the first did not: %q", n)
		}
	}
}

// TestInteractiveCodex uses the real Codex CLI in a real terminal (tmux) as a returning user of
// the host would. The host's ~/.codex/config.toml has preferences and a notify command, and does
// not trust the workspace: the first `agentbox run codex` asks for trust (no sign-in dialog), the
// user trusts it (Codex saves that into the box's own config.toml), a typed prompt is answered
// by the stand-in upstream through the relay, and /exit ends the launch with 0. The next
// launch's `codex resume --last` opens with no dialog (the trust taken in the box holds) and
// resumes the conversation (shown, and carried by the next request). The rollout, Codex's SQLite
// state, the prompt history and the trust are the box's own: kept in the workspace's box-owned
// state, not in the host's ~/.codex, whose config.toml and history.jsonl are unchanged; the
// host's notify command is not in the box's config.toml and never runs. The status line shows
// the host's model and reasoning effort; once the host lowers the effort, the next box's
// follows.
func TestInteractiveCodex(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "codex")
	up := llmtest.NewOpenAI(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "openai", up.URL, "")
	if err := os.MkdirAll(filepath.Join(e.Home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A returning user's config.toml: preferences, a notify command (run after each turn by the
	// host's Codex), and trust for another folder only.
	// Codex asks for trust in a git repository (0.171.0).
	if out, err := exec.Command("git", "init", "-q", e.Work).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	notified := filepath.Join(e.Work, "notify-ran")
	hostConfig := fmt.Sprintf("model = \"gpt-6-sol\"\nmodel_reasoning_effort = \"high\"\nnotify = [\"sh\", \"-c\", \"touch %s\"]\n\n[tui]\nscreen_reader_detection_done = true\n\n[projects.%q]\ntrust_level = \"trusted\"\n", notified, filepath.Join(e.Root, "elsewhere"))
	hostConfigFile := filepath.Join(e.Home, ".codex", "config.toml")
	if err := os.WriteFile(hostConfigFile, []byte(hostConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// A returning user's prompt history, as the unboxed Codex leaves it.
	hostHistory := filepath.Join(e.Home, ".codex", "history.jsonl")
	const history = `{"session_id":"00000000-0000-0000-0000-000000000000","ts":1764547200,"text":"a prompt typed on the host"}` + "\n"
	if err := os.WriteFile(hostHistory, []byte(history), 0o600); err != nil {
		t.Fatal(err)
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	prompt := `Ask Codex to do anything`
	trust := func() {
		m.WaitFor(`Trust this folder\?`)
		if strings.Contains(m.Screen(), "Sign in") {
			t.Errorf("Codex asks to sign in:\n%s", m.Screen())
		}
		// 1. Trust and continue. An Enter that came before Codex read keys is lost (once in 4
		// runs as the ordinary user at load 24): a person presses it again.
		closed := func() bool { return !strings.Contains(m.Visible(), "Trust this folder") }
		for try := 0; ; try++ {
			m.Keys("Enter")
			end := time.Now().Add(10 * time.Second)
			for !closed() && time.Now().Before(end) {
				time.Sleep(50 * time.Millisecond)
			}
			if closed() {
				break
			}
			if try == 2 {
				t.Fatalf("the trust dialog stayed after Enter, three times:\n%s", m.Screen())
			}
			t.Logf("the trust dialog stayed after Enter; pressing it again:\n%s", m.Visible())
		}
	}
	// Codex counts startup warnings in its status line ("⚠ 1 warning · f2 to view"); a returning
	// user's stock codex shows none (0.171.0 warned of its -c overrides, which rule out the
	// shared background server, until the profile passed --no-daemon).
	noWarning := func() {
		if scr := m.Visible(); strings.Contains(scr, "f2 to view") {
			t.Errorf("Codex shows a startup warning a returning user does not see:\n%s", scr)
		}
	}
	// The host's model and reasoning effort (config.toml, carried by the allowlist) are on the
	// status line under the prompt.
	// ("GPT-6-Sol high fast · <folder>": the model's name, the effort, the service tier).
	status := func(when, re string) { statusShows(t, m, when, []string{`(?mi)^\s*` + re + `\b[^·\n]*· `}) }
	converseAfter(t, m, up, "run codex", trust, func() { noWarning(); status("agentbox run codex", `gpt-6-sol high`) },
		prompt, "", "remember the word OTTER")

	state := boxState(t, e, "codex")
	if ts := jsonlUnder(filepath.Join(state, ".codex", "sessions")); len(ts) == 0 {
		t.Errorf("no rollout in the box-owned state %s", state)
	}
	if dbs, _ := filepath.Glob(filepath.Join(state, ".codex", "agentbox-sqlite", "state_*.sqlite")); len(dbs) == 0 {
		t.Errorf("no Codex state database in the box-owned state %s", state)
	}
	if ts := jsonlUnder(filepath.Join(e.Home, ".codex", "sessions")); len(ts) > 0 {
		t.Errorf("the box wrote rollouts into the host's ~/.codex/sessions: %v", ts)
	}
	if dbs, _ := filepath.Glob(filepath.Join(e.Home, ".codex", "state_*.sqlite")); len(dbs) > 0 {
		t.Errorf("the box wrote Codex's thread index into the host's ~/.codex: %v", dbs)
	}
	if b, err := os.ReadFile(filepath.Join(state, ".codex", "history.jsonl")); err != nil || !strings.Contains(string(b), "OTTER") {
		t.Errorf("the box's prompt history is not in the box-owned state %s: %q, %v", state, b, err)
	}
	if b, _ := os.ReadFile(hostHistory); string(b) != history {
		t.Errorf("the box changed the host's ~/.codex/history.jsonl:\n%s", b)
	}
	boxConfig, err := os.ReadFile(filepath.Join(state, ".codex", "config.toml"))
	if err != nil || !strings.Contains(string(boxConfig), fmt.Sprintf("[projects.%q]", e.Work)) {
		t.Errorf("the trust taken in the box is not in its box-owned config.toml: %v\n%s", err, boxConfig)
	}

	// The user lowers the reasoning effort on the host: the next box follows.
	hostConfig = strings.Replace(hostConfig, "model_reasoning_effort = \"high\"", "model_reasoning_effort = \"low\"", 1)
	if err := os.WriteFile(hostConfigFile, []byte(hostConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	noDialogNow := func() {
		noDialog(t, m, "the second agentbox run codex")
		noWarning()
		status("agentbox run codex -- resume --last", `gpt-6-sol low`)
	}
	if reqs := converseAfter(t, m, up, "run codex -- resume --last", nil, noDialogNow, prompt, "remember the word OTTER", "and now?"); !carries(reqs, "OTTER") {
		t.Errorf("the resumed launch's requests do not carry the earlier conversation")
	}
	if b, _ := os.ReadFile(hostConfigFile); string(b) != hostConfig {
		t.Errorf("the box changed the host's ~/.codex/config.toml:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(state, ".codex", "config.toml")); strings.Contains(string(b), "notify") {
		t.Errorf("the host's notify command is in the box's config.toml:\n%s", b)
	}
	if _, err := os.Stat(notified); err == nil {
		t.Errorf("the host's notify command ran in a box")
	}
	// Neither launch asks of the network what no box reaches (the update check, analytics,
	// the plugin marketplace's sync). Codex's announcement tip, which no setting of 0.171.0
	// turns off, is refused, audited and marked expected by the codex profile
	// (expectedRefusals), and not announced at the end of the launch (converse).
	if exp := noRefusedRequest(t, e); exp[codexTip] == 0 {
		t.Errorf("no launch's record holds Codex's announcement tip (%s) as an expected refusal: %v", codexTip, exp)
	}
}

// codexTip is the target of Codex CLI 0.171.0's announcement tip, fetched at every start of its
// terminal interface (tui/src/tooltips.rs), which no setting turns off.
const codexTip = "raw.githubusercontent.com:443"

// TestInteractiveGemini uses the real Gemini CLI in a real terminal (tmux) as a returning user
// of the host would: the host's ~/.gemini/trustedFolders.json trusts the workspace, so
// `agentbox run gemini` reaches its prompt with no trust or auth dialog; a typed prompt is
// answered by the stand-in upstream through the relay, /quit ends the launch with 0, and the
// next launch's `gemini --resume latest` resumes the chat (shown, and carried by the next
// request). The saved chat is the box's own: kept in the workspace's box-owned state, not in
// the host's ~/.gemini/tmp, where no unboxed Gemini CLI would resume it. The footer shows the
// host's model (settings.json); once the host chooses another, the next box's follows.
func TestInteractiveGemini(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "gemini")
	up := llmtest.NewGemini(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "gemini", up.URL, "")
	if err := os.MkdirAll(filepath.Join(e.Home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	trust := fmt.Sprintf(`{%q: "TRUST_FOLDER"}`, e.Work)
	if err := os.WriteFile(filepath.Join(e.Home, ".gemini", "trustedFolders.json"), []byte(trust), 0o600); err != nil {
		t.Fatal(err)
	}
	// A returning user's own settings, as Gemini CLI leaves them (the auth type chosen, a
	// theme): its update check and usage statistics on, by default. Each boxed launch asked the
	// npm registry for Gemini CLI's latest version, refused, and ended saying so. The user signs
	// in with Google (oauth-personal, most users' choice): until session 31 the box took it and
	// showed Google's authorization URL, waiting for a code. And an MCP server of the user's
	// with a token in its env, which no box may see (before session 31 the box's settings were
	// the host's whole).
	const hostSettings = "{\n  \"security\": {\"auth\": {\"selectedType\": \"oauth-personal\"}},\n  \"ui\": {\"theme\": \"GitHub\"},\n  \"model\": {\"name\": \"gemini-2.5-flash\"},\n" +
		"  \"mcpServers\": {\"gh\": {\"command\": \"/nonexistent/gh-mcp\", \"env\": {\"GITHUB_TOKEN\": \"ghp_HOSTSECRET\"}}}\n}\n"
	hostSettingsFile := filepath.Join(e.Home, ".gemini", "settings.json")
	if err := os.WriteFile(hostSettingsFile, []byte(hostSettings), 0o600); err != nil {
		t.Fatal(err)
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	m.wait = geminiWait
	// The host's model (settings.json's model.name, carried) is in the footer, under /model. The host
	// has no ~/.gemini/GEMINI.md, nor has the workspace one, so the footer counts no memory file,
	// as the host's stock gemini's does: the box's stand-in for the host's absent GEMINI.md (an
	// empty read-only file until session 19) made every box's footer say "1 GEMINI.md file".
	model := func(when, name string) func() {
		return func() {
			statusShows(t, m, when, []string{`(?m)no sandbox\s+` + regexp.QuoteMeta(name) + `\s*$`}, `\d+ (GEMINI\.md|context) files?\b`)
		}
	}
	converseAfter(t, m, up, "run gemini", nil, model("agentbox run gemini", "gemini-2.5-flash"), geminiReady, "", "remember the word HERON", "/quit")
	if b, _ := os.ReadFile(hostSettingsFile); string(b) != hostSettings {
		t.Errorf("the host's ~/.gemini/settings.json changed:\n%s", b)
	}

	state := boxState(t, e, "gemini")
	if ts := jsonlUnder(filepath.Join(state, ".gemini", "tmp")); len(ts) == 0 {
		t.Errorf("no saved chat in the box-owned state %s", state)
	}
	b, err := os.ReadFile(filepath.Join(state, ".gemini", "settings.json"))
	if err != nil || !strings.Contains(string(b), `"GitHub"`) || !strings.Contains(string(b), `"enableAutoUpdateNotification": false`) {
		t.Errorf("the box's settings.json does not carry the host's theme with the update check off: %v\n%s", err, b)
	}
	if strings.Contains(string(b), "HOSTSECRET") || strings.Contains(string(b), "mcpServers") {
		t.Errorf("the box's settings.json carries the host's MCP server:\n%s", b)
	}
	if ts := jsonlUnder(filepath.Join(e.Home, ".gemini", "tmp")); len(ts) > 0 {
		t.Errorf("the box wrote chats into the host's ~/.gemini/tmp: %v", ts)
	}

	// The user chooses another model on the host: the next box follows.
	if err := os.WriteFile(hostSettingsFile, []byte(strings.Replace(hostSettings, "gemini-2.5-flash", "gemini-2.5-pro", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if reqs := converseAfter(t, m, up, "run gemini -- --resume latest", nil, model("agentbox run gemini -- --resume latest", "gemini-2.5-pro"),
		geminiReady, "remember the word HERON", "and then", "/quit"); !carries(reqs, "HERON") {
		t.Errorf("the resumed launch's requests do not carry the earlier chat")
	}
	noRefusedRequest(t, e)
}

// TestInteractiveCopilot uses the real Copilot CLI in a real terminal (tmux) as a returning user
// of the host would: the host's Copilot has been used (its config.json trusts another folder,
// with a GitHub token in it), not in this workspace, so the first `agentbox run copilot` asks
// "Do you trust the files in this folder?"; the user answers "Yes, and remember this folder
// for future sessions", a typed prompt is answered by the stand-in upstream through the relay
// with no MCP error (the box's mcp-config.json is a valid empty one: "Failed to start MCP
// Servers: Error: mcpServers: Required" before), and /exit ends the launch with 0. The trust
// is kept in the workspace's box-owned config.json, not in the host's, which is unchanged. The
// next launch's `copilot --continue` opens with no dialog and resumes the session (shown, and
// carried by the next request). The session is the box's own: kept in the workspace's
// box-owned state, not in the host's ~/.copilot/session-state, where the unboxed Copilot would
// list and resume it. agentbox creates no mcp-config.json in the host's ~/.copilot, and an MCP
// server planted in the box-owned mcp-config.json between the launches, a plugin and the trust
// of a folder outside the workspace planted in the box-owned config.json, are dropped. The
// footer shows the model (models.copilot) and follows the host's footer preference
// (settings.json: no directory line, then the line again once the host turns it back on).
func TestInteractiveCopilot(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "copilot")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "models:\n  copilot: claude-sonnet-4.5\n")
	// A returning user's ~/.copilot: the state file Copilot leaves (trusting another folder, with
	// a GitHub token where no keyring is), no MCP server configured.
	marker := filepath.Join(e.Work, "mcp-server-ran")
	if err := os.MkdirAll(filepath.Join(e.Home, ".copilot"), 0o700); err != nil {
		t.Fatal(err)
	}
	hostConfig := "// User settings belong in settings.json.\n// This file is managed automatically.\n{\n  \"firstLaunchAt\": \"2026-01-01T00:00:00.000Z\",\n" +
		"  \"appTipShown\": true,\n  \"copilotTokens\": {\"https://github.com:u\": \"gho_HOSTTOKEN\"},\n  \"trustedFolders\": [\"/nowhere\"]\n}\n"
	if err := os.WriteFile(filepath.Join(e.Home, ".copilot", "config.json"), []byte(hostConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// The user's footer preferences (settings.json, the host's, read-only in the box): no
	// directory line above the input. The footer shows them, and the model (models.copilot).
	hostSettings := filepath.Join(e.Home, ".copilot", "settings.json")
	if err := os.WriteFile(hostSettings, []byte(`{"footer": {"showDirectory": false}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dirLine := `(?m)^\s*` + regexp.QuoteMeta(e.Work) + `\s*$`
	footer := `(?m)· / commands .*claude-sonnet-4\.5\s*$`
	planted := fmt.Sprintf(`{"mcpServers": {"planted": {"type": "local", "command": "sh", "args": ["-c", "touch %s"], "tools": ["*"]}}}`, marker)

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	prompt := `/ commands`
	trust := func() {
		m.WaitFor(`Do you trust the files in this folder`)
		m.Keys("Down", "Enter") // 2. Yes, and remember this folder for future sessions
		eventually(t, "the trust dialog to close", func() bool { return !strings.Contains(m.Visible(), "Do you trust") })
	}
	// While Copilot runs (its screen is gone once it exits).
	noMCPError := func() {
		if strings.Contains(m.Screen(), "Failed to start MCP") {
			t.Errorf("Copilot failed to start its MCP servers:\n%s", m.Screen())
		}
	}
	// A person types /exit once Copilot is done: its footer says "◉ Working" until the turn
	// ends, some time after the answer is shown (seconds under load), and "/ commands" again
	// then. A command typed meanwhile is queued ("Queued (1) └ /exit"); Copilot 1.0.102 runs
	// it when the turn ends (seen by hand), but its tracker has reports of queued prompts
	// that stay queued once idle (github/copilot-cli#4705, open), which a person then sees
	// and works around (converseAfter).
	idle := func() {
		eventually(t, "Copilot to end its turn (its footer back to \"/ commands\")", func() bool {
			v := m.Visible()
			return strings.Contains(v, "/ commands") && !strings.Contains(v, "Working")
		})
	}
	converseAfter(t, m, up, "run copilot", trust, func() {
		noMCPError()
		idle()
		statusShows(t, m, "agentbox run copilot", []string{footer}, dirLine)
	}, prompt, "", "remember the word WALRUS")

	if _, err := os.Lstat(filepath.Join(e.Home, ".copilot", "mcp-config.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("agentbox made ~/.copilot/mcp-config.json on the host: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.Home, ".copilot", "config.json")); string(b) != hostConfig {
		t.Errorf("the host's ~/.copilot/config.json changed:\n%s", b)
	}
	state := filepath.Join(boxState(t, e, "copilot"), ".copilot")
	boxConfig := filepath.Join(state, "config.json")
	b, err := os.ReadFile(boxConfig)
	if err != nil || !strings.Contains(string(b), strconv.Quote(e.Work)) || strings.Contains(string(b), "HOSTTOKEN") || strings.Contains(string(b), "/nowhere") {
		t.Fatalf("the box-owned config.json does not hold the trust taken in the box, or holds the host's token or other trust: %v\n%s", err, b)
	}
	if ts := jsonlUnder(filepath.Join(state, "session-state")); len(ts) == 0 {
		t.Errorf("no session in the box-owned state %s", state)
	}
	if ts := jsonlUnder(filepath.Join(e.Home, ".copilot", "session-state")); len(ts) > 0 {
		t.Errorf("the box wrote sessions into the host's ~/.copilot/session-state: %v", ts)
	}
	// Plant an MCP server in the box-owned mcp-config.json, and a plugin and the trust of a
	// folder outside the workspace in the box-owned config.json, for the next box to take.
	if err := os.WriteFile(filepath.Join(state, "mcp-config.json"), []byte(planted), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Dir(e.Work)
	withPlants := strings.Replace(string(b), `"trustedFolders": [`, fmt.Sprintf(`"installedPlugins": [{"name": "planted"}], "trustedFolders": [%q, `, outside), 1)
	if err := os.WriteFile(boxConfig, []byte(withPlants), 0o600); err != nil {
		t.Fatal(err)
	}

	// The next launch: no trust dialog, before or after the answer.
	// The user turns the directory line back on, on the host: the next box follows.
	if err := os.WriteFile(hostSettings, []byte(`{"footer": {"showDirectory": true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noDialogNow := func() {
		noDialog(t, m, "agentbox run copilot -- --continue")
		idle()
		statusShows(t, m, "agentbox run copilot -- --continue", []string{footer, dirLine})
	}
	if reqs := converseAfter(t, m, up, "run copilot -- --continue", nil, noDialogNow, prompt, "remember the word WALRUS", "and now?"); !carries(reqs, "WALRUS") {
		t.Errorf("the resumed launch's requests do not carry the earlier session")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("an MCP server planted in the box-owned mcp-config.json ran in the next box")
	}
	if b, _ := os.ReadFile(filepath.Join(state, "mcp-config.json")); strings.Contains(string(b), "planted") {
		t.Errorf("the MCP server planted in the box-owned mcp-config.json was kept for the next box:\n%s", b)
	}
	if b, _ := os.ReadFile(boxConfig); strings.Contains(string(b), "planted") || strings.Contains(string(b), strconv.Quote(outside)) {
		t.Errorf("the plugin or the trust of %s planted in the box-owned config.json was carried into the next box:\n%s", outside, b)
	}
	if b, _ := os.ReadFile(filepath.Join(e.Home, ".copilot", "config.json")); string(b) != hostConfig {
		t.Errorf("the host's ~/.copilot/config.json changed:\n%s", b)
	}
	noRefusedRequest(t, e)
}

// TestInteractiveGeminiTrust: a trust decision taken in a box holds for the next box of the
// workspace, and never reaches the host. The host's Gemini CLI trusts nothing, so the first
// `agentbox run gemini` asks "Do you trust the files in this folder?"; the user trusts it
// (Gemini CLI saves that and restarts), converses and quits. The decision is kept in the
// workspace's box-owned trust file (GEMINI_CLI_TRUSTED_FOLDERS_PATH), the host's
// ~/.gemini/trustedFolders.json is unchanged, and the next launch opens straight to the prompt
// with no dialog. A folder outside the workspace that a box trusts in the box-owned file is
// not trusted in the next box.
func TestInteractiveGeminiTrust(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "gemini")
	up := llmtest.NewGemini(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "gemini", up.URL, "")
	hostTrust := filepath.Join(e.Home, ".gemini", "trustedFolders.json")
	if err := os.MkdirAll(filepath.Dir(hostTrust), 0o700); err != nil {
		t.Fatal(err)
	}
	const hostRules = "{\"/nowhere\": \"TRUST_FOLDER\"}\n"
	if err := os.WriteFile(hostTrust, []byte(hostRules), 0o600); err != nil {
		t.Fatal(err)
	}

	// What the box saved as its trust, when the test fails: a dialog that closed without the
	// restart (one CI run as the ordinary user, at load) is an answer other than "Trust folder".
	t.Cleanup(func() {
		if t.Failed() {
			files, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "boxes", "gemini", "*", ".gemini", "agentbox-trust", "trustedFolders.json"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				t.Logf("the box-owned trust file %s: %s (%v)", f, b, err)
			}
		}
	})

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	m.wait = geminiWait
	// Gemini CLI restarts to apply a trust answer: the process that drew the dialog exits and
	// its parent starts another. The old one's last screen (once its own header and input box,
	// where a prompt typed went nowhere: 2 of N runs as the ordinary user at load 20-48) is
	// wiped once it has gone, so that the prompt awaited is the new one's.
	trust := func() {
		m.WaitFor(`Do you trust the files in this folder`)
		old := geminiProcesses(e)
		if len(old) != 1 {
			t.Fatalf("Gemini CLI processes of this test while its trust dialog is shown: %v, want one", old)
		}
		m.Keys("Enter") // 1. Trust folder
		m.WaitFor(`restarting to apply the trust changes`)
		// The old one gone and another started, when Gemini CLI restarts as a new process: its
		// screen is wiped then, so that the prompt awaited is the new one's. With ~/.gemini as
		// box-owned state the last runs saw no new process within the wait: Gemini CLI applied
		// the trust in place, its screen (which it does not draw again) is kept, and the prompt
		// awaited next is the check.
		for i := 0; i < 200; i++ {
			if now := geminiProcesses(e); len(now) > 0 && !slices.Contains(now, old[0]) {
				m.resetPane()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	converseAfter(t, m, up, "run gemini", trust, nil, geminiReady, "", "remember the word CORMORANT", "/quit")

	if b, _ := os.ReadFile(hostTrust); string(b) != hostRules {
		t.Errorf("the box changed the host's ~/.gemini/trustedFolders.json:\n%s", b)
	}
	boxTrust := filepath.Join(boxState(t, e, "gemini"), ".gemini", "agentbox-trust", "trustedFolders.json")
	var rules map[string]string
	if b, err := os.ReadFile(boxTrust); err != nil || json.Unmarshal(b, &rules) != nil || rules[e.Work] != "TRUST_FOLDER" {
		t.Fatalf("the trust taken in the box is not in its box-owned state: %s, %v", b, err)
	}
	// A box trusting a folder outside its workspace, for the next box to find.
	outside := filepath.Dir(e.Work)
	rules[outside] = "TRUST_FOLDER"
	b, _ := json.Marshal(rules)
	if err := os.WriteFile(boxTrust, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// The next launch: no trust dialog, before or after the answer.
	noDialogNow := func() { noDialog(t, m, "the second agentbox run gemini") }
	converseAfter(t, m, up, "run gemini", nil, noDialogNow, geminiReady, "", "and then", "/quit")
	rules = nil
	if b, err := os.ReadFile(boxTrust); err != nil || json.Unmarshal(b, &rules) != nil {
		t.Fatalf("box-owned trust file: %s, %v", b, err)
	}
	if _, ok := rules[outside]; ok {
		t.Errorf("the box's trust of %s, outside its workspace, was carried into the next box: %v", outside, rules)
	}
	if b, _ := os.ReadFile(hostTrust); string(b) != hostRules {
		t.Errorf("the box changed the host's ~/.gemini/trustedFolders.json:\n%s", b)
	}
	noRefusedRequest(t, e)
}

// TestInteractiveOpenCode uses the real OpenCode in a real terminal (tmux) as a returning user
// of the host would: `agentbox run opencode` reaches its prompt (OpenCode asks nothing before
// it), a typed prompt is answered by the stand-in upstream through the relay, /exit ends the
// launch with 0, and the next launch's `opencode --continue` resumes the session (shown, and
// carried by the next request). The session is the box's own: OpenCode's data folder (its
// database) and its state folder (the prompt history, recent models) are kept in the
// workspace's box-owned state; the host's ~/.local/share/opencode gets nothing, and the host's
// ~/.local/state/opencode, where the unboxed OpenCode recalls its prompt history, is not
// changed and gains no file. What a box can leave in the database it owns to grant the next box
// more (planted between the launches: an "always" answer, a session rule that allows
// everything, a project start command, a trigger that adds an answer again) does not pass to
// the next box; the session does. The status under the input names the host's default agent
// (~/.config/opencode/opencode.json: Plan, where OpenCode's own default is Build) and the
// model (models.opencode).
func TestInteractiveOpenCode(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "opencode")
	up := llmtest.NewOpenAI(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "openai", up.URL, "models:\n  opencode: openai/gpt-4.1-mini\n")
	// A returning user's state folder, as the unboxed OpenCode leaves it.
	hostState := filepath.Join(e.Home, ".local", "state", "opencode")
	if err := os.MkdirAll(hostState, 0o700); err != nil {
		t.Fatal(err)
	}
	const hostHistory = `{"input":"a prompt typed on the host","parts":[],"mode":"normal"}` + "\n"
	if err := os.WriteFile(filepath.Join(hostState, "prompt-history.jsonl"), []byte(hostHistory), 0o600); err != nil {
		t.Fatal(err)
	}

	// The user's default agent (~/.config/opencode/opencode.json, the host's, read-only in the
	// box): the status under the input names it, with the model (models.opencode).
	if err := os.MkdirAll(filepath.Join(e.Home, ".config", "opencode"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Home, ".config", "opencode", "opencode.json"), []byte(`{"default_agent": "plan"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	// OpenCode 1.18.34 spends 15-25 s of CPU to start and answer (its own cost, unboxed too):
	// on a loaded machine its screens took minutes to draw.
	m.wait = 6 * time.Minute
	prompt := `ctrl\+p commands`
	// An /exit typed right after the answer appeared was once dropped (OpenCode cleared the
	// input and kept running): /exit waits for the reply's footer (agent, model, time taken),
	// which OpenCode shows once the reply is done.
	done := func(ask string) func() {
		return func() { m.WaitFor(`(?s)` + regexp.QuoteMeta(ask) + `.*Hello from the fake upstream.*▣[^\n]*· \d`) }
	}
	converseAfter(t, m, up, "run opencode", nil, func() {
		done("remember the word PUFFIN")()
		statusShows(t, m, "agentbox run opencode", []string{`Plan · GPT-4\.1 mini OpenAI`}, `Build · `)
	}, prompt, "", "remember the word PUFFIN")

	state := boxState(t, e, "opencode")
	if _, err := os.Stat(filepath.Join(state, ".local", "share", "opencode", "opencode.db")); err != nil {
		t.Errorf("no OpenCode database in the box-owned state %s: %v", state, err)
	}
	if b, err := os.ReadFile(filepath.Join(state, ".local", "state", "opencode", "prompt-history.jsonl")); err != nil || !strings.Contains(string(b), "PUFFIN") {
		t.Errorf("the box's prompt history is not in the box-owned state %s: %q, %v", state, b, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.Home, ".local", "share", "opencode")); len(ents) > 0 {
		t.Errorf("the box wrote into the host's ~/.local/share/opencode: %v", ents)
	}
	hostUnchanged := func() {
		t.Helper()
		if b, _ := os.ReadFile(filepath.Join(hostState, "prompt-history.jsonl")); string(b) != hostHistory {
			t.Errorf("the box changed the host's ~/.local/state/opencode/prompt-history.jsonl:\n%s", b)
		}
		if ents, _ := os.ReadDir(hostState); len(ents) != 1 {
			t.Errorf("the box wrote into the host's ~/.local/state/opencode: %v", ents)
		}
	}
	hostUnchanged()

	// What a box of the workspace can leave in the database it owns, for the next box: an
	// "always" answer (the permission table, which OpenCode's saved-permission service reads as
	// allowed), a rule of the session's own that allows everything (it wins when the session is
	// resumed), a start command for the project, and a trigger that would add an answer again.
	db, err := sql.Open("sqlite", filepath.Join(state, ".local", "share", "opencode", "opencode.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO permission (id, project_id, action, resource, time_created, time_updated) SELECT 'psv_planted', id, 'external_directory', '/*', 1, 1 FROM project`,
		`UPDATE session SET permission = '[{"permission":"*","pattern":"*","action":"allow"}]'`,
		`UPDATE project SET commands = '{"start":"touch planted"}'`,
		`CREATE TRIGGER planted AFTER UPDATE ON session BEGIN INSERT OR IGNORE INTO permission (id, project_id, action, resource, time_created, time_updated) SELECT 'psv_trigger', id, 'bash', '*', 1, 1 FROM project; END`,
	} {
		if res, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		} else if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(q, "CREATE") {
			t.Fatalf("%s: no row (the database's sessions and projects are not where OpenCode 1.18.34 keeps them)", q)
		}
	}

	if reqs := converseAfter(t, m, up, "run opencode -- --continue", nil, done("and then"), prompt, "remember the word PUFFIN", "and then"); !carries(reqs, "PUFFIN") {
		t.Errorf("the resumed launch's requests do not carry the earlier session")
	}
	hostUnchanged()
	planted := map[string]string{
		"an always answer":           `SELECT count(*) FROM permission`,
		"a session rule that allows": `SELECT count(*) FROM session WHERE permission LIKE '%allow%'`,
		"a start command":            `SELECT count(*) FROM project WHERE commands IS NOT NULL`,
		"a trigger":                  `SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'`,
	}
	for what, q := range planted {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s planted in the box-owned database passed to the next box (%s: %d, %v)", what, q, n, err)
		}
	}
	noRefusedRequest(t, e)
}

// approvedLaunch is one launch of agent whose stand-in model asks to run a command that makes
// the file ran: `agentbox run AGENT` typed in the pane, the agent's prompt (matching prompt)
// shown with no dialog, ask typed, the agent's approval dialog (matching dialog) shown, then,
// when takesKeys is not nil, what it waits for (the sign that the dialog reads keys), the
// dialog answered with key, the stand-in's answer after the command, quit typed, the launch's
// exit code 0, and the file made (it is removed again).
func approvedLaunch(t *testing.T, m *Tmux, agent, prompt, dialog string, takesKeys func(), ask, key, quit, ran string) {
	t.Helper()
	m.clearPane()
	tag := m.Start("run " + agent)
	m.WaitFor(prompt)
	noDialog(t, m, "agentbox run "+agent)
	m.Ask(ask)
	m.WaitFor(dialog)
	if takesKeys != nil {
		takesKeys()
	}
	m.Keys(key)
	m.WaitFor(`(?s)` + regexp.QuoteMeta(ask) + `.*Hello from the fake upstream`)
	t.Logf("after the answer %q:\n%s", key, m.Screen())
	m.Ask(quit)
	if code := m.Wait(tag); code != 0 {
		t.Fatalf("agentbox run %s, %s: exit %d\n%s", agent, quit, code, m.Screen())
	}
	noRefusalAnnounced(t, m, "agentbox run "+agent)
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("the approved command did not run in the box: %v", err)
	}
	os.Remove(ran)
}

// onlyFile fails the test unless the host's folder dir holds one file, name, with content: the
// box's approval did not reach it.
func onlyFile(t *testing.T, dir, name, content string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != content || len(ents) != 1 {
		t.Errorf("the box's approval reached the host's %s (%d files): %s is\n%s", dir, len(ents), name, b)
	}
}

// noFileEnding fails the test for each file beneath the box-owned dir whose name ends with
// suffix: an approval saved there, for the next box.
func noFileEnding(t *testing.T, dir, suffix string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			b, _ := os.ReadFile(p)
			t.Errorf("the box's approval was saved in the box-owned state, for the next box: %s\n%s", p, b)
		}
		return nil
	})
}

// TestInteractiveCodexApproval: an "always allow" answered in a box neither reaches the host's
// Codex nor grants the next box anything. The stand-in model asks to run `touch` outside
// Codex's own sandbox; Codex 0.171.0 asks "Would you like to run the following command?", and
// the user answers "Yes, and don't ask again for commands that start with `touch`" (unboxed,
// Codex saves that as a prefix_rule in ~/.codex/rules/default.rules, an exec-policy rule every
// later Codex of the user obeys). In the box the command runs; ~/.codex/rules is the host's,
// read-only, so the rule is saved nowhere: the host's rules file is unchanged, the workspace's
// box-owned state holds no rule, and the next boxed launch asks again before the same command.
func TestInteractiveCodexApproval(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "codex")
	call := &llmtest.ToolUse{ID: "call_touch", Name: "exec_command", Input: map[string]any{
		"cmd": "touch ran-after-approval", "sandbox_permissions": "require_escalated",
		"justification": "to make the file", "prefix_rule": []string{"touch"}}}
	up := llmtest.NewOpenAI(llmtest.Options{Respond: func(r llmtest.Request) llmtest.Reply {
		// The prompt asks for the command; the request that carries its output gets the text.
		if strings.Contains(string(r.Body), "RUNIT") && !strings.Contains(string(r.Body), "function_call_output") {
			return llmtest.Reply{Text: "Running it.", ToolUse: call}
		}
		return llmtest.Reply{}
	}})
	defer up.Close()
	useGateway(t, e, "openai", up.URL, "")
	if out, err := exec.Command("git", "init", "-q", e.Work).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// A returning user who trusts the workspace and has one rule of their own.
	hostConfig := fmt.Sprintf("[tui]\nscreen_reader_detection_done = true\n\n[projects.%q]\ntrust_level = \"trusted\"\n", e.Work)
	hostRules := filepath.Join(e.Home, ".codex", "rules")
	if err := os.MkdirAll(hostRules, 0o700); err != nil {
		t.Fatal(err)
	}
	const hostRule = "prefix_rule(pattern=[\"git\", \"status\"], decision=\"allow\")\n"
	for name, content := range map[string]string{filepath.Join(e.Home, ".codex", "config.toml"): hostConfig, filepath.Join(hostRules, "default.rules"): hostRule} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ran := filepath.Join(e.Work, "ran-after-approval")

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	// Codex 0.171.0 draws its approval dialog before the dialog reads keys: a key that reaches
	// Codex within about 10 ms of the dialog's drawing is read (read(2) returns it, and Codex
	// draws a frame that changes nothing) and has no effect, and the dialog waits for another.
	// Unboxed alike, under load: Codex in tmux with a fresh ~/.codex and the key sent as soon
	// as the dialog showed (2–6 ms) lost 7 of 8, sent 20–60 ms after it 0 of 10 (in the box the
	// shim had written the key to the PTY 10 ms after the dialog's bytes; the test lost it so
	// on its first launch, a fresh box state, in CI and in 3 of 50 runs here at load 4). No
	// output marks when the dialog starts taking keys; the first thing Codex does after drawing
	// it is its title's blink, a second later ("[ ! ] Action Required" becomes "[ . ] …"), by
	// when the dialog reads keys (0 of 6 lost with a fresh ~/.codex at load 25 unboxed; this
	// test 25 of 25 at load 20–25).
	takesKeys := func() {
		eventually(t, "Codex's title blinking for its approval dialog", func() bool {
			return strings.HasPrefix(m.Title(), "[ . ] Action Required")
		})
	}
	launch := func(ask, key string) {
		t.Helper()
		approvedLaunch(t, m, "codex", `Ask Codex to do anything`,
			`(?s)Would you like to run the following command\?.*don't ask again for commands that start with .touch`, takesKeys, ask, key, "/exit", ran)
	}

	launch("RUNIT once", "p") // p: Yes, and don't ask again for commands that start with `touch`
	onlyFile(t, hostRules, "default.rules", hostRule)
	noFileEnding(t, filepath.Join(boxState(t, e, "codex"), ".codex"), ".rules")

	// The next box asks again before the same command (launch waits for the dialog).
	launch("RUNIT again", "y") // y: Yes, proceed (this time only)
	onlyFile(t, hostRules, "default.rules", hostRule)
	noRefusedRequest(t, e)
}

// TestInteractiveGeminiApproval: an "always allow" answered in a box neither reaches the host's
// Gemini CLI nor grants the next box anything. The host's settings turn on Gemini CLI's
// permanent approvals (security.enablePermanentToolApproval), and the stand-in model asks to
// run `touch`; Gemini CLI 0.61.0 asks "Allow execution of [Shell]?", and the user answers "Allow
// this command for all future sessions" (unboxed, Gemini CLI saves that as an allow rule in
// ~/.gemini/policies/auto-saved.toml, a policy every later Gemini CLI of the user obeys). In the
// box the command runs; ~/.gemini/policies is the host's, read-only, so the rule is saved
// nowhere: the host's policies are unchanged, the workspace's box-owned state holds no policy,
// and the next boxed launch asks again before the same command.
func TestInteractiveGeminiApproval(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "gemini")
	call := &llmtest.ToolUse{ID: "call_touch", Name: "run_shell_command", Input: map[string]any{
		"command": "touch ran-after-approval", "description": "make the file"}}
	up := llmtest.NewGemini(llmtest.Options{Respond: func(r llmtest.Request) llmtest.Reply {
		// The turn whose last message is the prompt asking for the command (streamed; Gemini
		// CLI's side requests, such as its next-speaker check, are not) gets the call.
		var body struct {
			Contents []struct{ Parts []struct{ Text string } }
		}
		json.Unmarshal(r.Body, &body)
		if n := len(body.Contents); n > 0 && strings.Contains(r.Path, "streamGenerateContent") {
			for _, p := range body.Contents[n-1].Parts {
				if strings.Contains(p.Text, "RUNIT") {
					return llmtest.Reply{Text: "Running it.", ToolUse: call}
				}
			}
		}
		return llmtest.Reply{}
	}})
	defer up.Close()
	useGateway(t, e, "gemini", up.URL, "")
	// A returning user who trusts the workspace, allows permanent approvals, and has one policy
	// of their own.
	policies := filepath.Join(e.Home, ".gemini", "policies")
	if err := os.MkdirAll(policies, 0o700); err != nil {
		t.Fatal(err)
	}
	const hostPolicy = "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = [\"git\", \"status\"]\ndecision = \"allow\"\npriority = 100\n"
	for name, content := range map[string]string{
		filepath.Join(e.Home, ".gemini", "trustedFolders.json"): fmt.Sprintf(`{%q: "TRUST_FOLDER"}`, e.Work),
		filepath.Join(e.Home, ".gemini", "settings.json"): `{"security": {"auth": {"selectedType": "gemini-api-key"}, "enablePermanentToolApproval": true},` +
			` "privacy": {"usageStatisticsEnabled": false}, "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}}`,
		filepath.Join(policies, "mine.toml"): hostPolicy,
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ran := filepath.Join(e.Work, "ran-after-approval")

	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	m.wait = geminiWait
	launch := func(ask, key string) {
		t.Helper()
		approvedLaunch(t, m, "gemini", geminiReady, `(?s)Allow execution of.*Allow this command for all future sessions`, nil, ask, key, "/quit", ran)
	}

	launch("RUNIT once", "3") // 3. Allow this command for all future sessions
	onlyFile(t, policies, "mine.toml", hostPolicy)
	noFileEnding(t, filepath.Join(boxState(t, e, "gemini"), ".gemini"), ".toml")

	// The next box asks again before the same command (launch waits for the dialog).
	launch("RUNIT again", "1") // 1. Allow once
	onlyFile(t, policies, "mine.toml", hostPolicy)
	noRefusedRequest(t, e)
}

// TestInteractiveClaudeWebSearchRefused: the real Claude Code's web search, which the relay
// refuses (review 15, F12: the provider would search and fetch beyond egressAllow), tells the
// user why, naming agentbox and the key that allows it. The stand-in model asks for a
// WebSearch; Claude Code 2.1.334 sends the
// search as a model call of its own declaring Anthropic's web_search server tool; the relay
// answers 403 gateway_tool_refused, never forwarding it, and the terminal shows the relay's
// message under the search ("Error: Please run /login · API Error: 403 agentbox's relay
// refused …": Claude Code takes any 403 for a sign-in problem). The conversation goes on (the model's next answer is shown) and the launch ends
// with 0.
func TestInteractiveClaudeWebSearchRefused(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, _ := agentEnv(t, "claude")
	search := &llmtest.ToolUse{ID: "toolu_search1", Name: "WebSearch", Input: map[string]any{"query": "SEARCHTERM release notes"}}
	up := llmtest.NewAnthropic(llmtest.Options{Respond: func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Body), "SEARCHIT") && !strings.Contains(string(r.Body), "toolu_search1") {
			return llmtest.Reply{Text: "Searching.", ToolUse: search}
		}
		return llmtest.Reply{}
	}})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")
	hostJSON, _ := json.Marshal(claudeReturningUser(t, e.Work))
	if err := os.WriteFile(filepath.Join(e.Home, ".claude.json"), hostJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "160", "-y", "50")
	m.clearPane()
	// The user allows the search (auto mode's check would ask the stand-in model, which has
	// no answer for it).
	tag := m.Start("run claude -- --permission-mode default --allowedTools WebSearch")
	m.WaitFor(`(?m)^❯[\s\x{00a0}]*$`)
	m.Ask("SEARCHIT please")
	// Before its first tool, Claude Code 2.1.334 may show a notice on its auto mode's billing
	// through a gateway ("Enter to continue"), and ask before the search ("Do you want to
	// proceed?"): the user answers both with Enter, as a person would.
	done := regexp.MustCompile(`(?s)SEARCHIT please.*Hello from the fake upstream`)
	var entered time.Time
	for end := time.Now().Add(3 * time.Minute); !done.MatchString(m.Screen()); {
		if time.Now().After(end) {
			t.Fatalf("Claude Code never answered after the search; the terminal shows:\n%s", m.Screen())
		}
		if v := m.Visible(); (strings.Contains(v, "Enter to continue") || strings.Contains(v, "Do you want to proceed")) && time.Since(entered) > 2*time.Second {
			t.Logf("answering with Enter:\n%s", v)
			m.Keys("Enter")
			entered = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	scr := m.Screen()
	if !strings.Contains(scr, "agentbox's relay refused") || !strings.Contains(scr, "gateway.anthropic.serverTools") {
		t.Errorf("the terminal does not say that agentbox refused the web search:\n%s", scr)
	}
	t.Logf("the terminal after the refused search:\n%s", m.Visible())
	m.Ask("/exit")
	if code := m.Wait(tag); code != 0 {
		t.Fatalf("agentbox run claude, /exit: exit %d\n%s", code, m.Screen())
	}
	for _, q := range up.Requests() {
		if strings.Contains(string(q.Body), "web_search_2") {
			t.Errorf("the upstream saw the web search: %s %s", q.Method, q.Path)
		}
	}
}

// TestInteractiveHostTrust: a workspace the host's own CLI trusts opens straight to the prompt
// in a box, the first boxed launch of it included (no state of the box's yet), for Codex CLI
// (its ~/.codex/config.toml's [projects."<folder>"] trust_level) and Copilot CLI (its
// ~/.copilot/config.json's trustedFolders): the trust is carried by the daemon's synthesized
// configuration. The other tests of these two start from a host that trusts another folder
// and answer the dialog; their host trust was shown by unit tests and `codex exec` only
// (audit of issue #18, session 31). Gemini CLI's is TestInteractiveGemini's.
func TestInteractiveHostTrust(t *testing.T) {
	t.Parallel() // its own daemons and upstreams; mostly waits (parallelTests)
	t.Run("codex", func(t *testing.T) {
		t.Parallel()
		e, _ := agentEnv(t, "codex")
		up := llmtest.NewOpenAI(llmtest.Options{})
		defer up.Close()
		useGateway(t, e, "openai", up.URL, "")
		// Codex asks for trust in a git repository (0.171.0).
		if out, err := exec.Command("git", "init", "-q", e.Work).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		if err := os.MkdirAll(filepath.Join(e.Home, ".codex"), 0o700); err != nil {
			t.Fatal(err)
		}
		hostConfig := fmt.Sprintf("model = \"gpt-6-sol\"\n\n[tui]\nscreen_reader_detection_done = true\n\n[projects.%q]\ntrust_level = \"trusted\"\n", e.Work)
		if err := os.WriteFile(filepath.Join(e.Home, ".codex", "config.toml"), []byte(hostConfig), 0o600); err != nil {
			t.Fatal(err)
		}
		m := e.Tmux(t)
		m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
		converse(t, m, up, "run codex", `Ask Codex to do anything`, "", "remember the word HERMIT")
	})
	t.Run("copilot", func(t *testing.T) {
		t.Parallel()
		e, _ := agentEnv(t, "copilot")
		up := llmtest.NewAnthropic(llmtest.Options{})
		defer up.Close()
		useGateway(t, e, "anthropic", up.URL, "models:\n  copilot: claude-sonnet-4.5\n")
		if err := os.MkdirAll(filepath.Join(e.Home, ".copilot"), 0o700); err != nil {
			t.Fatal(err)
		}
		hostConfig := fmt.Sprintf("{\n  \"firstLaunchAt\": \"2026-01-01T00:00:00.000Z\",\n  \"appTipShown\": true,\n  \"trustedFolders\": [%q]\n}\n", e.Work)
		if err := os.WriteFile(filepath.Join(e.Home, ".copilot", "config.json"), []byte(hostConfig), 0o600); err != nil {
			t.Fatal(err)
		}
		m := e.Tmux(t)
		m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
		// Copilot's footer says "◉ Working" until its turn ends; /exit typed meanwhile is
		// queued (TestInteractiveCopilot): converse presses Escape should it stay queued.
		converse(t, m, up, "run copilot", `/ commands`, "", "remember the word HERMIT")
	})
}

// TestInteractiveClaudeTheme: the host's colour theme (~/.claude.json's theme, carried by the
// claude-config allowlist) colours the boxed Claude Code as it colours the stock one. The
// terminal's text does not show a theme; its colours do: the stock claude's header at the
// prompt, with its escape sequences (`capture-pane -e`), holds colour sequences in the light
// theme that it does not in the dark one, and the other way round (so the comparison can
// fail); the boxed header in each theme holds the same of those as the stock one's. The rest
// of the screen is not compared (a notice drawn there for a moment has colours of its own). The stock one runs with the
// profile's two variables that change what it shows (no non-essential traffic, no
// auto-updater).
func TestInteractiveClaudeTheme(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e, bin := agentEnv(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	useGateway(t, e, "anthropic", up.URL, "")
	m := e.Tmux(t)
	m.tmux("resize-window", "-t", "main", "-x", "120", "-y", "40")
	sgr := regexp.MustCompile(`\x1b\[[0-9;]*m`)
	// header is the colour sequences of Claude Code's header on the screen.
	header := func() map[string]bool {
		// The header only (the logo, "Claude Code vX", the model, the folder): a notice drawn
		// for a moment elsewhere has colours of its own.
		lines := strings.Split(m.tmux("capture-pane", "-e", "-p", "-t", m.target), "\n")
		set := map[string]bool{}
		for i, l := range lines {
			if strings.Contains(sgr.ReplaceAllString(l, ""), "Claude Code v") {
				for _, h := range lines[i:min(i+3, len(lines))] {
					for _, c := range sgr.FindAllString(h, -1) {
						set[strconv.Quote(c)] = true
					}
				}
				break
			}
		}
		return set
	}
	// colours is what six captures of the header 300 ms apart show: the colours in every one
	// (always), and in any (ever). The mascot blinks now and then, its eyes drawn in colours
	// of their own for a moment, which some captures catch.
	type seen struct{ always, ever map[string]bool }
	colours := func() seen {
		s := seen{header(), map[string]bool{}}
		maps.Copy(s.ever, s.always)
		for range 5 {
			time.Sleep(300 * time.Millisecond)
			now := header()
			maps.Copy(s.ever, now)
			maps.DeleteFunc(s.always, func(c string, _ bool) bool { return !now[c] })
		}
		return s
	}
	prompt := `(?m)^❯[\s\x{00a0}]*$`
	launch := func(theme string, boxed bool) seen {
		t.Helper()
		host := claudeReturningUser(t, e.Work)
		host["theme"] = theme
		b, _ := json.Marshal(host)
		if err := os.WriteFile(filepath.Join(e.Home, ".claude.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		m.clearPane()
		if boxed {
			tag := m.Start("run claude")
			m.WaitFor(prompt)
			noDialog(t, m, "agentbox run claude")
			c := colours()
			m.Ask("/exit")
			if code := m.Wait(tag); code != 0 {
				t.Fatalf("agentbox run claude, /exit: exit %d\n%s", code, m.Screen())
			}
			return c
		}
		m.Type(fmt.Sprintf("ANTHROPIC_BASE_URL=%s ANTHROPIC_AUTH_TOKEN=%s CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 %s; echo T1T=$?", up.URL, hostCredential, bin))
		m.WaitFor(prompt)
		c := colours()
		m.Ask("/exit")
		m.WaitFor(`T1T=0\b`)
		return c
	}
	boxed, stock := map[string]seen{}, map[string]seen{}
	other := map[string]string{"light": "dark", "dark": "light"}
	for _, theme := range []string{"light", "dark"} {
		boxed[theme], stock[theme] = launch(theme, true), launch(theme, false)
	}
	// A theme's own colours: on the stock header in every capture in that theme, and in none
	// in the other.
	own := map[string][]string{}
	for theme := range other {
		for c := range stock[theme].always {
			if !stock[other[theme]].ever[c] {
				own[theme] = append(own[theme], c)
			}
		}
		slices.Sort(own[theme])
		if len(own[theme]) == 0 {
			t.Fatalf("the stock Claude Code's header has no colour of its own in the %s theme (%v; %v in the other): the comparison shows nothing", theme, stock[theme].always, stock[other[theme]].ever)
		}
	}
	for theme := range other {
		for _, c := range own[theme] {
			if !boxed[theme].ever[c] {
				t.Errorf("theme %s: the boxed Claude Code's header never shows %s, the theme's own colour on the stock one's (%v)", theme, c, own[theme])
			}
		}
		for _, c := range own[other[theme]] {
			if boxed[theme].ever[c] {
				t.Errorf("theme %s: the boxed Claude Code's header shows %s, the %s theme's own colour (%v)", theme, c, other[theme], own[other[theme]])
			}
		}
	}
}
