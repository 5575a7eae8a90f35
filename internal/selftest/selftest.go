// Package selftest runs the escape battery of internal/attack in real boxes through the
// user's own daemon and judges each attempt: the same registry and the same verdicts as the
// end-to-end attack tests, on the machine that will run the agents.
package selftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/attack"
)

// Status is the outcome of one attempt.
type Status string

// Outcomes.
const (
	// Pass: the box refused the attempt and the host found nothing left behind.
	Pass Status = "pass"
	// Fail: the attempt broke through, or left something on the host, or could not be judged.
	Fail Status = "fail"
	// Skip: the attempt could not run here (its target is missing); the reason says why.
	Skip Status = "skip"
)

// Result is the verdict on one attempt.
type Result struct {
	Attempt  string   `json:"attempt"`
	Category string   `json:"category"`
	Expected string   `json:"expected"`
	Observed string   `json:"observed"`
	Status   Status   `json:"status"`
	Evidence []string `json:"evidence,omitempty"`
}

// Report is the verdict on the whole battery.
type Report struct {
	Results []Result `json:"results"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Skipped int      `json:"skipped"`
}

// OK reports whether no attempt failed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Options say how to run the battery. The zero value runs every attempt with the calling
// process's binary and environment.
type Options struct {
	// Agentbox is the agentbox binary ("" means this process's executable). It both launches
	// the boxes (`agentbox run`) and runs in them (`agentbox attack-probe`).
	Agentbox string
	// Env is the environment of `agentbox run` ("" means os.Environ()); the battery adds the
	// fake secrets of the env attempt.
	Env []string
	// Dir is where the attempts' workspaces are made ("" means the system temp directory).
	Dir string
	// RuntimeDir is agentbox's runtime directory, the API socket's ("" means
	// $XDG_RUNTIME_DIR/agentbox of Env).
	RuntimeDir string
	// Parallel is how many boxes run at once (0 means 4).
	Parallel int
	// Run, when set, selects the attempts whose name it matches.
	Run *regexp.Regexp
	// Sessions makes the sessions of the pairing attempts (nil skips them).
	Sessions attack.Sessions
	// CallerTTY is the caller's terminal, for the terminal attempt ("" when none).
	CallerTTY string
	// Netns asks for the veth-pair target (root only).
	Netns bool
	// Progress, when set, is called after each attempt, from one goroutine at a time.
	Progress func(Result)
}

// Run runs the battery and returns the report. It fails only when the battery cannot start
// (no host targets); every attempt's own trouble is a failed Result.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Agentbox == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("selftest: own executable: %w", err)
		}
		o.Agentbox = exe
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	root, err := os.MkdirTemp(o.Dir, "agentbox-selftest-")
	if err != nil {
		return nil, fmt.Errorf("selftest: workspace root: %w", err)
	}
	defer os.RemoveAll(root)
	os.Chmod(root, 0o755)
	outside := filepath.Join(root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		return nil, err
	}
	home := envValue(o.Env, "HOME")
	if o.RuntimeDir == "" {
		o.RuntimeDir = runtimeDir(o.Env)
	}
	h, err := attack.SetUp(attack.HostOptions{
		Home: home, XDGRuntimeDir: envValue(o.Env, "XDG_RUNTIME_DIR"), RuntimeDir: o.RuntimeDir,
		Workspace: root, OutsideDirs: []string{outside}, Netns: o.Netns,
		CallerTTY: o.CallerTTY, Sessions: o.Sessions,
	})
	if err != nil {
		return nil, fmt.Errorf("selftest: host targets: %w", err)
	}
	defer h.Close()
	env := append(append([]string(nil), o.Env...), h.Env()...)

	var sel []attack.Attempt
	for _, a := range attack.All() {
		if o.Run == nil || o.Run.MatchString(a.Name) {
			sel = append(sel, a)
		}
	}
	results := make([]Result, len(sel))
	var mu sync.Mutex
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i, a := range sel {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res := runOne(ctx, o.Agentbox, env, root, h, a)
			mu.Lock()
			defer mu.Unlock()
			results[i] = res
			if o.Progress != nil {
				o.Progress(res)
			}
		}()
	}
	wg.Wait()
	rep := &Report{Results: results}
	for _, r := range results {
		switch r.Status {
		case Pass:
			rep.Passed++
		case Skip:
			rep.Skipped++
		default:
			rep.Failed++
		}
	}
	return rep, nil
}

// runOne runs one attempt in a box of its own, in a workspace of its own.
func runOne(ctx context.Context, bin string, env []string, root string, h *attack.Host, a attack.Attempt) Result {
	res := Result{Attempt: a.Name, Category: a.Category, Expected: a.Expect}
	failed := func(format string, args ...any) Result {
		res.Status, res.Observed = Fail, fmt.Sprintf(format, args...)
		return res
	}
	if why := h.Targets.Missing(a); why != "" {
		res.Status, res.Observed = Skip, "skipped: "+why
		return res
	}
	t := h.Targets
	t.Workspace = filepath.Join(root, a.Name)
	if err := os.Mkdir(t.Workspace, 0o755); err != nil {
		return failed("workspace: %v", err)
	}
	if a.Prepare != nil {
		if err := a.Prepare(t.Workspace); err != nil {
			return failed("prepare the workspace: %v", err)
		}
	}
	args, err := attack.ProbeArgs(t, a.Name)
	if err != nil {
		return failed("probe arguments: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--workspace", t.Workspace, bin, "--"}, args...)...)
	cmd.Env, cmd.Dir = env, t.Workspace
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return failed("agentbox run: %v: %s", err, lastLine(stderr.String()))
	}
	obs, err := attack.ParseReport(stdout.Bytes())
	if err != nil {
		return failed("report: %v", err)
	}
	o, ok := obs[a.Name]
	if !ok {
		return failed("no report from the box: %s", lastLine(stderr.String()+stdout.String()))
	}
	res.Evidence = o.Evidence
	err = a.Verdict(h, o)
	switch {
	case errors.Is(err, attack.ErrSkipped):
		res.Status, res.Observed = Skip, "skipped: "+o.Skipped
	case err != nil:
		res.Status, res.Observed = Fail, "BREACH: "+breachSummary(err, o)
	default:
		res.Status, res.Observed = Pass, "refused"
		if n := len(o.Evidence); n > 0 {
			res.Observed = fmt.Sprintf("refused (%d tries)", n)
		}
	}
	return res
}

// breachSummary is the first line that says what went through.
func breachSummary(err error, o attack.Observation) string {
	for _, ev := range o.Evidence {
		if strings.Contains(ev, "SUCCEEDED") || strings.HasPrefix(ev, "BREACH") {
			return ev
		}
	}
	return lastLine(err.Error())
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func envValue(env []string, k string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], k+"="); ok {
			return v
		}
	}
	return ""
}

// runtimeDir is agentbox's runtime directory in env (safesocket.RuntimeDir's rule, for the
// API-socket attempt's target path only).
func runtimeDir(env []string) string {
	if x := envValue(env, "XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "agentbox")
	}
	return ""
}

// Categories returns the categories of the results, sorted.
func (r *Report) Categories() []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range r.Results {
		if !seen[x.Category] {
			seen[x.Category] = true
			out = append(out, x.Category)
		}
	}
	sort.Strings(out)
	return out
}
