// Command agentprompt measures, in one run and side by side, how long the real Claude Code
// takes from the command line to its input prompt on screen in a real terminal (tmux): boxed
// (`agentbox run claude`, a warm daemon) and the stock `claude` unboxed, for the same returning
// user (a ~/.claude.json with onboarding done and the workspace trusted), both answering
// through a stand-in Anthropic upstream (internal/relay/llm/llmtest). Launches alternate, so
// that both see the same machine load. It prints a Markdown table for docs/benchmarks.md.
//
//	go run ./bench/agentprompt -claude /path/to/claude -n 10
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

var (
	prompt    = regexp.MustCompile(`(?m)^❯[\s\x{00a0}]*$`)
	exitTyped = regexp.MustCompile(`(?m)^❯[\s\x{00a0}]/exit`)
)

func main() {
	n := flag.Int("n", 10, "launches of each")
	bin := flag.String("agentbox", "bin/agentbox", "agentbox binary")
	claude := flag.String("claude", "", "the real claude executable (scripts/install-agents.sh DIR: DIR/bin/claude)")
	sameEnv := flag.Bool("same-env", false, "run the stock claude with the variables the profile adds beyond the relay (no non-essential traffic, no auto-updater), so that only the box differs")
	flag.Parse()
	if *claude == "" {
		fmt.Fprintln(os.Stderr, "agentprompt: -claude is required (scripts/install-agents.sh DIR, then -claude DIR/bin/claude)")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*bin)
	check(err)
	claudeBin, err := filepath.Abs(*claude)
	check(err)

	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	root, err := os.MkdirTemp("/tmp", "abprompt")
	check(err)
	home, work, cfg := mk(root, "home"), mk(root, "work"), mk(root, "config")
	env := []string{"PATH=" + filepath.Dir(claudeBin) + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "TERM=xterm-256color",
		"XDG_RUNTIME_DIR=" + mk(root, "run"), "XDG_STATE_HOME=" + mk(root, "state"), "XDG_CONFIG_HOME=" + cfg, "PS1=$ ", "ENV="}
	key := filepath.Join(home, "anthropic.key")
	check(os.WriteFile(key, []byte("sk-bench\n"), 0o600))
	check(os.MkdirAll(filepath.Join(cfg, "agentbox"), 0o700))
	check(os.WriteFile(filepath.Join(cfg, "agentbox", "config.yaml"),
		fmt.Appendf(nil, "gateway:\n  anthropic:\n    url: %s\n    credential:\n      file: %s\n", up.URL, key), 0o600))
	user, _ := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.333", "numStartups": 12, "theme": "dark",
		"lastReleaseNotesSeen": "2.1.333", "hasSeenAutoDefaultNotice": true, "fullscreenUpsellSeenCount": 3,
		"migrationVersion": 15, "opusProMigrationComplete": true, "hasResetAutoModeOptInForDefaultOffer": true,
		"customApiKeyResponses": map[string]any{"approved": []string{}},
		"projects":              map[string]any{work: map[string]any{"hasTrustDialogAccepted": true}},
	})
	check(os.WriteFile(filepath.Join(home, ".claude.json"), user, 0o600))

	sock := filepath.Join(root, "tmux.sock")
	conf := filepath.Join(root, "tmux.conf")
	check(os.WriteFile(conf, []byte("set -g status off\nset -g history-limit 5000\nset -g default-terminal xterm-256color\n"), 0o644))
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			check(fmt.Errorf("tmux %v: %v: %s", args, err, out))
		}
		return string(out)
	}
	c := exec.Command("tmux", "-S", sock, "-f", conf, "new-session", "-d", "-s", "b", "-x", "120", "-y", "40", "-c", work, "sh")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		check(fmt.Errorf("tmux: %v: %s", err, out))
	}
	cleanups = append(cleanups, func() {
		exec.Command("tmux", "-S", sock, "kill-server").Run()
		stop := exec.Command(abs, "daemon", "stop")
		stop.Env = env
		stop.Run()
		os.RemoveAll(root)
	})
	defer cleanups[0]()

	// launch types cmd, times it to the prompt, then quits with /exit and waits for the shell.
	step := 0
	launch := func(cmd string) time.Duration {
		step++
		tmux("send-keys", "-t", "b", "clear", "Enter")
		time.Sleep(200 * time.Millisecond)
		tmux("clear-history", "-t", "b")
		done := fmt.Sprintf("D%dD", step)
		tmux("send-keys", "-t", "b", "-l", cmd+"; echo "+done+"=$?")
		start := time.Now()
		tmux("send-keys", "-t", "b", "Enter")
		for !prompt.MatchString(tmux("capture-pane", "-p", "-t", "b")) {
			if time.Since(start) > 2*time.Minute {
				check(fmt.Errorf("%s: no prompt after 2 minutes:\n%s", cmd, tmux("capture-pane", "-p", "-t", "b")))
			}
			time.Sleep(5 * time.Millisecond)
		}
		d := time.Since(start)
		// Quit as a person does: /exit, and Enter once it shows (again while it still shows: an
		// Enter that comes with a burst of typed text may be taken for part of a paste).
		tmux("send-keys", "-t", "b", "-l", "/exit")
		last := time.Time{}
		exited := regexp.MustCompile(done + `=\d`)
		for !exited.MatchString(tmux("capture-pane", "-p", "-t", "b")) {
			if time.Since(start) > 3*time.Minute {
				check(fmt.Errorf("%s: did not exit:\n%s", cmd, tmux("capture-pane", "-p", "-t", "b")))
			}
			if time.Since(last) > 2*time.Second && exitTyped.MatchString(tmux("capture-pane", "-p", "-t", "b")) {
				time.Sleep(300 * time.Millisecond)
				tmux("send-keys", "-t", "b", "Enter")
				last = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		return d
	}
	boxed := abs + " run claude"
	stock := fmt.Sprintf("ANTHROPIC_BASE_URL=%s ANTHROPIC_AUTH_TOKEN=sk-bench %s", up.URL, claudeBin)
	if *sameEnv {
		stock = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 " + stock
	}
	launch(boxed) // starts the daemon, proves readiness
	launch(stock)
	var b, s []time.Duration
	for range *n {
		b = append(b, launch(boxed))
		s = append(s, launch(stock))
	}
	fmt.Printf("| to Claude Code's prompt on screen (n=%d, alternating) | median | min | max |\n|---|---|---|---|\n", *n)
	row := func(name string, ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		med := ds[len(ds)/2]
		fmt.Printf("| %s | %s | %s | %s |\n", name, ms(med), ms(ds[0]), ms(ds[len(ds)-1]))
		return med
	}
	mb := row("`agentbox run claude`", b)
	ms0 := row("`claude` unboxed", s)
	fmt.Printf("\nboxed / unboxed (medians): %.2f×\n", float64(mb)/float64(ms0))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func mk(root, name string) string {
	d := filepath.Join(root, name)
	check(os.MkdirAll(d, 0o700))
	return d
}

// cleanups run before a failure exits (the tmux server, the daemon, the directories).
var cleanups []func()

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentprompt:", err)
		for _, c := range cleanups {
			c()
		}
		os.Exit(1)
	}
}
