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
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

var (
	// promptGlyph starts Claude Code's input line (U+276F).
	promptGlyph = []byte("❯")
	prompt      = regexp.MustCompile(`(?m)^❯[\s\x{00a0}]*$`)
	exitTyped   = regexp.MustCompile(`(?m)^❯[\s\x{00a0}]/exit`)
)

func main() {
	n := flag.Int("n", 10, "launches of each")
	bin := flag.String("agentbox", "bin/agentbox", "agentbox binary")
	claude := flag.String("claude", "", "the real claude executable (scripts/install-agents.sh DIR: DIR/bin/claude)")
	verbose := flag.Bool("v", false, "print each launch's times on stderr")
	sameEnv := flag.Bool("same-env", false, "run the stock claude with the variables the profile adds beyond the relay (no non-essential traffic, no auto-updater), so that only the box differs")
	base := flag.String("base", "", "also alternate `agentbox run claude` with this agentbox binary (a build before a change: before and after in the same run), with runtime and state directories of its own (its own daemon)")
	detect := flag.String("detect", "stream", "how the prompt is seen: stream (the pane's output read as tmux gets it, through pipe-pane, then one capture-pane to confirm the prompt line) or poll (capture-pane every 5 ms, as before the twenty-ninth session: each capture costs the machine about 2 ms of CPU, taken from the launch it times)")
	split := flag.Bool("split", false, "also split each launch's time at the claude process's exec, found by scanning /proc every 2 ms (about 1 ms of CPU a scan: on two cores it slows the launches it times; the split's own figures are right, the totals of a -split run are not comparable with a run without)")
	boxEnv := flag.Bool("box-env", false, "also alternate a third command: the stock claude unboxed with exactly the boxed claude's environment (read from the first boxed launch's process; the relay's URL and pairing replaced by the upstream's), so that the environment's part of the difference shows apart from the box's")
	flag.Parse()
	if *detect != "stream" && *detect != "poll" {
		fmt.Fprintf(os.Stderr, "agentprompt: -detect %q: want stream or poll\n", *detect)
		os.Exit(2)
	}
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
	home, work, cfg, rt := mk(root, "home"), mk(root, "work"), mk(root, "config"), mk(root, "run")
	env := []string{"PATH=" + filepath.Dir(claudeBin) + ":" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8", "TERM=xterm-256color",
		"XDG_RUNTIME_DIR=" + rt, "XDG_STATE_HOME=" + mk(root, "state"), "XDG_CONFIG_HOME=" + cfg, "PS1=$ ", "ENV="}
	// The base build's daemon has directories of its own: one daemon per runtime directory.
	var baseAbs, baseRT, baseEnv string
	if *base != "" {
		baseAbs, err = filepath.Abs(*base)
		check(err)
		baseRT = mk(root, "run-base")
		baseEnv = "XDG_RUNTIME_DIR=" + baseRT + " XDG_STATE_HOME=" + mk(root, "state-base")
	}
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
	// The pane's output as tmux reads it from the terminal, appended to a file the launches
	// read from where it ended before their Enter (-detect stream).
	paneOut := filepath.Join(root, "pane.out")
	if *detect == "stream" {
		tmux("pipe-pane", "-t", "b", "cat >> "+paneOut)
	}
	cleanups = append(cleanups, func() {
		exec.Command("tmux", "-S", sock, "kill-server").Run()
		stop := exec.Command(abs, "daemon", "stop")
		stop.Env = env
		stop.Run()
		if baseAbs != "" {
			stop := exec.Command(baseAbs, "daemon", "stop")
			stop.Env = append(slices.Clone(env), strings.Fields(baseEnv)...)
			stop.Run()
		}
		os.RemoveAll(root)
	})
	defer cleanups[0]()

	// onFound, when set, is called with the next launch's claude process, once.
	var onFound func(pid int)
	// launch types cmd, times it to the prompt, finds the claude process it started, then quits
	// with /exit and waits for the shell.
	step := 0
	seen := map[int]bool{}
	// rt is the runtime directory of the launch's daemon ("": an unboxed one).
	launch := func(name, cmd, rt string) sample {
		step++
		tmux("send-keys", "-t", "b", "clear", "Enter")
		time.Sleep(200 * time.Millisecond)
		tmux("clear-history", "-t", "b")
		done := fmt.Sprintf("D%dD", step)
		tmux("send-keys", "-t", "b", "-l", cmd+"; echo "+done+"=$?")
		var stream *paneStream
		if *detect == "stream" {
			stream = openPaneStream(paneOut)
			defer func() {
				if stream != nil {
					stream.Close()
				}
			}()
		}
		before := agentboxCPU(home, rt)
		start := time.Now()
		tmux("send-keys", "-t", "b", "Enter")
		// With -split, when the claude process execs (its command name becomes claude), polled
		// beside the screen: it splits the time to the prompt into the way to Claude Code and
		// its own start.
		execAt := make(chan time.Duration, 1)
		stopPoll := make(chan struct{})
		go func() {
			for *split {
				if claudeExeced(home, seen) {
					execAt <- time.Since(start)
					return
				}
				select {
				case <-stopPoll:
					execAt <- 0
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
			execAt <- 0
		}()
		screen := func() string { return tmux("capture-pane", "-p", "-t", "b") }
		var at time.Duration
		polled := false
		for {
			if time.Since(start) > 2*time.Minute {
				check(fmt.Errorf("%s: no prompt after 2 minutes:\n%s", name, screen()))
			}
			if stream == nil {
				if prompt.MatchString(screen()) {
					at = time.Since(start)
					break
				}
				time.Sleep(5 * time.Millisecond)
				continue
			}
			// The prompt's glyph in what the pane received: the time it came, when a capture
			// then shows the prompt line; when it does not (the glyph drawn elsewhere first, or
			// an earlier frame's arriving late), captures every 5 ms from then on, as -detect
			// poll, and the launch is counted as polled (printed with the results).
			t, ok := stream.next(promptGlyph, start)
			switch {
			case ok && prompt.MatchString(screen()):
				at = t
			case ok:
				stream.Close()
				stream = nil
				polled = true
				continue
			case prompt.MatchString(screen()):
				// A second without the glyph while the prompt shows: the stream does not
				// carry the pane's output (pipe-pane's cat gone, a full disk).
				check(fmt.Errorf("%s: the screen shows the prompt but the pane's output stream (%s) has not carried its glyph: use -detect poll", name, paneOut))
			default:
				continue
			}
			break
		}
		smp := sample{prompt: at, polled: polled}
		var roles map[string]time.Duration
		smp.own, roles = agentboxCPU(home, rt).since(before)
		close(stopPoll)
		smp.exec = <-execAt
		var pid int
		smp.cpu, pid, smp.found = claudeProcess(home, seen)
		if smp.found && onFound != nil {
			onFound(pid)
			onFound = nil
		}
		if *verbose {
			execd := ""
			if *split {
				execd = fmt.Sprintf(" (claude exec'd at %s)", ms(smp.exec))
			}
			fmt.Fprintf(os.Stderr, "%s: prompt %s%s, its CPU %s (found %v, polled %v), agentbox's processes' CPU %s\n", name, ms(smp.prompt), execd, ms(smp.cpu), smp.found, smp.polled, ms(smp.own))
			if smp.own > 0 {
				fmt.Fprintf(os.Stderr, "  agentbox's processes by role: %v\n", roles)
			}
		}
		// Quit as a person does: /exit, and Enter once it shows (again while it still shows: an
		// Enter that comes with a burst of typed text may be taken for part of a paste).
		tmux("send-keys", "-t", "b", "-l", "/exit")
		last := time.Time{}
		exited := regexp.MustCompile(done + `=\d`)
		for !exited.MatchString(tmux("capture-pane", "-p", "-t", "b")) {
			if time.Since(start) > 3*time.Minute {
				check(fmt.Errorf("%s: did not exit:\n%s", name, tmux("capture-pane", "-p", "-t", "b")))
			}
			if time.Since(last) > 2*time.Second && exitTyped.MatchString(tmux("capture-pane", "-p", "-t", "b")) {
				time.Sleep(300 * time.Millisecond)
				tmux("send-keys", "-t", "b", "Enter")
				last = time.Now()
			}
			time.Sleep(20 * time.Millisecond)
		}
		return smp
	}
	boxed := abs + " run claude"
	stock := fmt.Sprintf("ANTHROPIC_BASE_URL=%s ANTHROPIC_AUTH_TOKEN=sk-bench %s", up.URL, claudeBin)
	if *sameEnv {
		stock = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 " + stock
	}
	// The boxed claude's environment, for -box-env: the relay's URL and pairing replaced by the
	// upstream's and the bench's token.
	var inBoxEnv string
	if *boxEnv {
		onFound = func(pid int) {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			check(err)
			vars := []string{"env", "-i"}
			for _, kv := range strings.Split(string(raw), "\x00") {
				k, _, _ := strings.Cut(kv, "=")
				switch k {
				case "":
					continue
				case "ANTHROPIC_BASE_URL":
					kv = k + "=" + up.URL
				case "ANTHROPIC_AUTH_TOKEN":
					kv = k + "=sk-bench"
				}
				vars = append(vars, "'"+strings.ReplaceAll(kv, "'", `'\''`)+"'")
			}
			inBoxEnv = strings.Join(vars, " ") + " " + claudeBin
		}
	}
	baseCmd := baseEnv + " " + baseAbs + " run claude"
	launch("boxed", boxed, rt) // starts the daemon, proves readiness
	launch("stock", stock, "")
	if baseAbs != "" {
		launch("boxed, base build", baseCmd, baseRT)
	}
	var b, s, e, bb []sample
	if *boxEnv {
		if inBoxEnv == "" {
			check(fmt.Errorf("-box-env: the boxed claude's environment was not read"))
		}
		launch("stock, the box's environment", inBoxEnv, "")
	}
	for range *n {
		b = append(b, launch("boxed", boxed, rt))
		s = append(s, launch("stock", stock, ""))
		if baseAbs != "" {
			bb = append(bb, launch("boxed, base build", baseCmd, baseRT))
		}
		if *boxEnv {
			e = append(e, launch("stock, the box's environment", inBoxEnv, ""))
		}
	}
	fmt.Printf("| to Claude Code's prompt on screen (n=%d, alternating) | median | min | max |\n|---|---|---|---|\n", *n)
	row := func(name string, ss []sample) time.Duration {
		ds := field(ss, func(x sample) time.Duration { return x.prompt })
		fmt.Printf("| %s | %s | %s | %s |\n", name, ms(median(ds)), ms(ds[0]), ms(ds[len(ds)-1]))
		return median(ds)
	}
	mb := row("`agentbox run claude`", b)
	ms0 := row("`claude` unboxed", s)
	if baseAbs != "" {
		row("`agentbox run claude`, the base build", bb)
	}
	if *boxEnv {
		row("`claude` unboxed, the boxed one's environment", e)
	}
	// Each boxed launch against the stock one right after it: the load changes less within a
	// pair than across the run.
	var ratios []float64
	for i := range b {
		ratios = append(ratios, float64(b[i].prompt)/float64(s[i].prompt))
	}
	slices.Sort(ratios)
	fmt.Printf("\nboxed / unboxed (medians): %.2f×; the median of the %d pairs' ratios: %.2f× (%.2f–%.2f)\n",
		float64(mb)/float64(ms0), len(ratios), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
	if *detect == "stream" {
		count := func(ss []sample) (n int) {
			for _, x := range ss {
				if x.polled {
					n++
				}
			}
			return n
		}
		if nb, ns := count(b), count(s); nb+ns > 0 {
			fmt.Printf("prompts seen by capture-pane polling after a glyph the screen did not confirm: boxed %d, unboxed %d of %d each\n", nb, ns, *n)
		}
	}
	if baseAbs != "" {
		// The base build's launch against the stock one right before it, and against this
		// build's in the same round.
		var rs, rb []float64
		for i := range bb {
			rs = append(rs, float64(bb[i].prompt)/float64(s[i].prompt))
			rb = append(rb, float64(b[i].prompt)/float64(bb[i].prompt))
		}
		slices.Sort(rs)
		slices.Sort(rb)
		fmt.Printf("base build / unboxed (medians): %.2f×; the median of the pairs' ratios: %.2f×\n", float64(median(field(bb, func(x sample) time.Duration { return x.prompt })))/float64(ms0), rs[len(rs)/2])
		fmt.Printf("this build / base build, the median of the rounds' ratios: %.2f× (%.2f–%.2f)\n", rb[len(rb)/2], rb[0], rb[len(rb)-1])
	}
	// The CPU time (user and system) claude's process had used by its prompt, which the load
	// changes least: more of it in the box is work the box makes Claude Code do.
	fmt.Printf("\n| CPU of claude's process by its prompt (n=%d) | median | min | max |\n|---|---|---|---|\n", *n)
	cpu := func(name string, ss []sample) {
		var ds []time.Duration
		for _, x := range ss {
			if x.found {
				ds = append(ds, x.cpu)
			}
		}
		if len(ds) < len(ss) {
			check(fmt.Errorf("%s: the claude process was not found in %d of %d launches", name, len(ss)-len(ds), len(ss)))
		}
		slices.Sort(ds)
		fmt.Printf("| %s | %s | %s | %s |\n", name, ms(median(ds)), ms(ds[0]), ms(ds[len(ds)-1]))
	}
	cpu("`agentbox run claude`", b)
	cpu("`claude` unboxed", s)
	if baseAbs != "" {
		cpu("`agentbox run claude`, the base build", bb)
	}
	if *boxEnv {
		cpu("`claude` unboxed, the boxed one's environment", e)
	}
	// agentbox's own processes' CPU time from Enter to the prompt: on two cores, what they use
	// while Claude Code starts is taken from it.
	fmt.Println()
	for _, x := range []struct {
		name string
		ss   []sample
	}{{"", b}, {" (the base build)", bb}} {
		if len(x.ss) == 0 {
			continue
		}
		own := field(x.ss, func(x sample) time.Duration { return x.own })
		fmt.Printf("CPU of agentbox's own processes from Enter to the prompt%s (the CLI, the daemon, its shims, box-inits and exec stages; not claude): median %s (%s–%s)\n",
			x.name, ms(median(own)), ms(own[0]), ms(own[len(own)-1]))
	}
	// The two parts of the time to the prompt: from Enter until claude's process execs (for a
	// boxed launch, agentbox's launch: the CLI, the daemon, the shim, box-init, the exec stage),
	// and from its exec to its prompt (Claude Code's own start, in the box or not).
	if !*split {
		return
	}
	fmt.Printf("\n| part of the time to the prompt (n=%d, medians) | Enter → claude execs | claude execs → prompt |\n|---|---|---|\n", *n)
	splitRow := func(name string, ss []sample) {
		fmt.Printf("| %s | %s | %s |\n", name, ms(median(field(ss, func(x sample) time.Duration { return x.exec }))),
			ms(median(field(ss, func(x sample) time.Duration { return x.prompt - x.exec }))))
	}
	splitRow("`agentbox run claude`", b)
	splitRow("`claude` unboxed", s)
	if baseAbs != "" {
		splitRow("`agentbox run claude`, the base build", bb)
	}
	if *boxEnv {
		splitRow("`claude` unboxed, the boxed one's environment", e)
	}
}

// sample is one launch: the time from Enter to Claude Code's prompt on screen, and the CPU
// time the claude process it started had used by then.
type sample struct {
	prompt, exec, cpu time.Duration
	// polled says the prompt was seen by capture-pane polling (-detect poll, or a glyph in
	// the stream that a capture did not confirm), to within the 5 ms poll and a capture's time.
	polled bool
	// own is the CPU time agentbox's own processes used from Enter to the prompt (boxed).
	own   time.Duration
	found bool
}

func field(ss []sample, f func(sample) time.Duration) []time.Duration {
	var ds []time.Duration
	for _, x := range ss {
		ds = append(ds, f(x))
	}
	slices.Sort(ds)
	return ds
}

func median(sorted []time.Duration) time.Duration { return sorted[len(sorted)/2] }

// tick is a clock tick of /proc/<pid>/stat (USER_HZ).
const tick = 10 * time.Millisecond

// claudeProcess finds this launch's claude process: the first started of those named claude,
// with HOME=home in their environment (this run's, boxed or not), not yet seen (an earlier
// launch's) and not ended, and returns the CPU time it has used, user and system. A boxed one
// counts from the fork of the box's exec stage, which may have been started ahead, with the
// spare box, before it execs claude: its start time is not the program's. found is false when
// there is none (or its environment cannot be read); pid is the process found.
func claudeProcess(home string, seen map[int]bool) (cpu time.Duration, pid int, found bool) {
	ents, _ := os.ReadDir("/proc")
	var best uint64
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil || seen[p] {
			continue
		}
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(c)) != "claude" || proc.Ended(p) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			continue
		}
		st, err := proc.StartTime(p)
		if err != nil || (pid != 0 && st >= best) {
			continue
		}
		pid, best = p, st
	}
	if pid == 0 {
		return 0, 0, false
	}
	seen[pid] = true
	t, err := proc.CPUTicks(pid)
	if err != nil {
		return 0, 0, false
	}
	return time.Duration(t) * tick, pid, true
}

// claudeExeced reports whether a process named claude with HOME=home runs that is not an
// earlier launch's (seen; read only: the caller's goroutine marks it later).
func claudeExeced(home string, seen map[int]bool) bool {
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil || seen[p] {
			continue
		}
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(c)) != "claude" {
			continue
		}
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p)); err == nil && slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			return true
		}
	}
	return false
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

// cpuSnapshot is the CPU time, user and system, of each process of agentbox's, by pid and
// start time.
type cpuSnapshot map[[2]uint64]procCPU

// procCPU is a process's role (its first argument: daemon, run, box-shim, box-init, box-exec)
// and CPU time in ticks.
type procCPU struct {
	role  string
	ticks uint64
}

// since returns the CPU time used since before, in all and by role: a process not in before
// counts whole.
func (after cpuSnapshot) since(before cpuSnapshot) (time.Duration, map[string]time.Duration) {
	var t uint64
	roles := map[string]time.Duration{}
	for k, v := range after {
		d := v.ticks - min(v.ticks, before[k].ticks)
		t += d
		roles[v.role] += time.Duration(d) * tick
	}
	return time.Duration(t) * tick, roles
}

// agentboxCPU reads the CPU time of agentbox's processes of this run (HOME=home) whose daemon
// has the runtime directory rt: the CLI (agentbox run), the daemon and every process beneath
// it (spare and launch shims, box-inits, exec stages) but the claude processes and theirs. An
// empty rt reads none. A process that ended between two
// snapshots is not counted (a launch's shim outlives its prompt; the previous launch's, reaped
// meanwhile, is not this launch's).
func agentboxCPU(home, rt string) cpuSnapshot {
	if rt == "" {
		return cpuSnapshot{}
	}
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	var roots []int
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		pp, err := proc.Parent(p)
		if err != nil {
			continue
		}
		children[pp] = append(children[pp], p)
		argv := strings.Split(readProc(p, "cmdline"), "\x00")
		if len(argv) < 2 || filepath.Base(argv[0]) != "agentbox" || (argv[1] != "daemon" && argv[1] != "run") {
			continue
		}
		if env := strings.Split(readProc(p, "environ"), "\x00"); slices.Contains(env, "HOME="+home) && slices.Contains(env, "XDG_RUNTIME_DIR="+rt) {
			roots = append(roots, p)
		}
	}
	snap := cpuSnapshot{}
	var walk func(p int)
	walk = func(p int) {
		if strings.TrimSpace(readProc(p, "comm")) == "claude" {
			return
		}
		st, err1 := proc.StartTime(p)
		t, err2 := proc.CPUTicks(p)
		if err1 == nil && err2 == nil {
			role := "?"
			if argv := strings.Split(readProc(p, "cmdline"), "\x00"); len(argv) > 1 {
				role = argv[1]
			}
			snap[[2]uint64{uint64(p), st}] = procCPU{role, t}
		}
		for _, c := range children[p] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return snap
}

func readProc(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	return string(b)
}

// paneStream reads what the pane received (tmux pipe-pane appends it to a file) from where it
// ended when the stream was opened: a read of a regular file every millisecond costs
// microseconds, where each capture-pane costs a tmux client's start and the server's render.
type paneStream struct {
	f       *os.File
	buf     []byte
	scanned int // bytes of buf already searched
}

func openPaneStream(path string) *paneStream {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	check(err)
	_, err = f.Seek(0, io.SeekEnd)
	check(err)
	return &paneStream{f: f}
}

func (p *paneStream) Close() { p.f.Close() }

// next waits for the next occurrence of glyph in the stream and returns the time since start
// at which the bytes holding it were read; ok is false when none came within a second (the
// caller checks its deadline and asks again).
func (p *paneStream) next(glyph []byte, start time.Time) (time.Duration, bool) {
	chunk := make([]byte, 64<<10)
	for wait := time.Now().Add(time.Second); time.Now().Before(wait); {
		n, err := p.f.Read(chunk)
		if n > 0 {
			at := time.Since(start)
			p.buf = append(p.buf, chunk[:n]...)
			// A glyph split across two reads is found at the second.
			from := max(0, p.scanned-len(glyph)+1)
			p.scanned = len(p.buf)
			if i := bytes.Index(p.buf[from:], glyph); i >= 0 {
				p.buf = p.buf[from+i+len(glyph):]
				p.scanned = len(p.buf)
				return at, true
			}
			// Only a glyph's first bytes can matter to the next read.
			if keep := len(glyph) - 1; len(p.buf) > keep {
				p.buf = p.buf[len(p.buf)-keep:]
				p.scanned = len(p.buf)
			}
			continue
		}
		if err != nil && err != io.EOF {
			check(err)
		}
		time.Sleep(time.Millisecond)
	}
	return 0, false
}
