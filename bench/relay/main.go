//go:build linux

// Command relay measures the daemon's relay from inside a real box against the same client
// talking to the upstream directly: the added latency of a small LLM request, the delay of each
// server-sent event, the throughput of a large streamed body, the time from revocation to the
// end of a stream in flight and to the next refusal, and a git clone through the git relay
// against a direct clone from git http-backend.
//
// Two more paths run beside direct and relay, in the same run: a bare copy forwarder in a
// process of its own (the floor of any relay that must see the bytes it passes on: one more
// process, one more read and write of every byte, nothing else), and the client in a box that
// shares the host's network, straight to the upstream (what the box alone costs). Every in-box
// measurement starts after the launch's aftermath (settle).
//
//	go run ./bench/relay -bin bin/agentbox
//
// It needs node (the in-box client), git with git-http-backend, and a working agentbox (it
// starts its own isolated daemon). Results are printed as Markdown.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

//go:embed bench.js
var benchJS []byte

const (
	hostCredential = "sk-bench-host-secret-0123456789"
	gitUser        = "robot"
	gitSecret      = "ghp_benchS3cret0123456789"
)

var (
	bin         = flag.String("bin", "bin/agentbox", "agentbox binary")
	nSmall      = flag.Int("n", 1000, "small requests per path and round")
	nWarm       = flag.Int("warm", 200, "warm-up requests before the small requests are timed")
	smallRounds = flag.Int("small-rounds", 3, "rounds of the small-request phase")
	nEvents     = flag.Int("events", 1000, "events in the paced stream")
	bulkMB      = flag.Int("mb", 100, "size of the streamed body, MB")
	nRevoke     = flag.Int("revokes", 5, "revocation rounds")
	gitMB       = flag.Int("git-mb", 56, "size of the generated git repository, MiB")
	gitRuns     = flag.Int("git-runs", 3, "clones per side")
	skipGit     = flag.Bool("no-git", false, "skip the git benchmark")
	curlRuns    = flag.Int("curl-runs", 5, "100 MB streams read by curl per side")
	fwdTo       = flag.String("forward", "", "run as a floor forwarding to this address (internal)")
	fwdMode     = flag.String("forward-mode", "copy", "the floor's kind: copy or proxy (internal)")
	nConc       = flag.Int("streams", 64, "boxes streaming at once (each box is one session; 64 is the default bound)")
	concEv      = flag.Int("stream-events", 1000, "events in each concurrent stream (one every 2 ms once all are open)")
)

// env is an isolated agentbox environment with its own daemon.
type env struct {
	root, work string
	vars       []string
}

func newEnv() *env {
	root, err := os.MkdirTemp("/tmp", "abbench")
	check(err)
	os.Chmod(root, 0o755)
	e := &env{root: root}
	dirs := map[string]string{}
	for _, d := range []string{"run", "state", "config", "home", "work"} {
		p := filepath.Join(root, d)
		check(os.Mkdir(p, 0o700))
		dirs[d] = p
	}
	e.work = dirs["work"]
	e.vars = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + dirs["home"],
		"XDG_RUNTIME_DIR=" + dirs["run"], "XDG_STATE_HOME=" + dirs["state"], "XDG_CONFIG_HOME=" + dirs["config"]}
	return e
}

func (e *env) home() string   { return filepath.Join(e.root, "home") }
func (e *env) config() string { return filepath.Join(e.root, "config") }

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(*bin, args...)
	c.Env, c.Dir = e.vars, e.work
	return c
}

// box runs a shell script in a box and returns its stdout.
func (e *env) box(script string) string {
	var out, errb bytes.Buffer
	c := e.cmd("run", "sh", "--", "-c", script)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		fatalf("box %q: %v\n%s\n%s", script, err, out.String(), errb.String())
	}
	return out.String()
}

// settle starts every in-box measurement: it waits until the launch's own aftermath is over.
// The daemon replaces its spare shim 250 ms after a program starts (three processes starting
// on two cores), which a measurement started at once would share the machine with.
const settle = "sleep 0.5; "

// boxAllow runs a shell script in a box that shares the host's network (egress allow) and
// returns its stdout.
func (e *env) boxAllow(script string) string {
	out, err := e.cmd("run", "--egress", "allow", "sh", "--", "-c", script).Output()
	if err != nil {
		fatalf("box (egress allow) %q: %v\n%s", script, err, out)
	}
	return string(out)
}

func (e *env) close() {
	e.cmd("daemon", "stop").Run()
	os.RemoveAll(e.root)
}

// cleanups stop the daemon and remove the temporary directories, also on a fatal error.
var cleanups []func()

func cleanup() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func fatalf(format string, args ...any) {
	cleanup()
	log.Fatalf(format, args...)
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

// upstream is the fake Anthropic API with the replies and pacing of each phase, chosen by the
// request's model.
type upstream struct {
	*llmtest.Server
	mu    sync.Mutex
	sent  []float64 // epoch ms at which each event of the "events" stream was written
	bulkN int

	// The concurrent phase: each stream's first event waits until open streams are open.
	concMu   sync.Mutex
	open     int
	allOpen  chan struct{}
	released time.Time
}

func newUpstream() *upstream {
	u := &upstream{}
	bulkText := strings.Repeat("a", 16384)
	u.Server = llmtest.NewAnthropic(llmtest.Options{
		Credential: hostCredential,
		Respond: func(r llmtest.Request) llmtest.Reply {
			var b struct{ Model string }
			json.Unmarshal(r.Body, &b)
			switch b.Model {
			case "events":
				// Each delta is one event: *nEvents events in all, with the 6 of the frame.
				return llmtest.Reply{Text: "x", Repeat: *nEvents - 6}
			case "bulk":
				return llmtest.Reply{Text: bulkText, Chunk: len(bulkText), Repeat: *bulkMB * 1000 * 1000 / len(bulkText)}
			case "revoke":
				return llmtest.Reply{Repeat: 1 << 30}
			case "concurrent":
				return llmtest.Reply{Text: "x", Repeat: *concEv - 6}
			}
			return llmtest.Reply{}
		},
		Pace: func(ctx context.Context, i int, _ string) error {
			// Pace sees no request: the phases run one at a time and set paceMode.
			switch paceMode() {
			case "events":
				time.Sleep(time.Millisecond)
				u.mu.Lock()
				if i == 0 {
					u.sent = u.sent[:0]
				}
				u.sent = append(u.sent, nowMs())
				u.mu.Unlock()
			case "revoke":
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			case "concurrent":
				if i == 0 {
					u.concMu.Lock()
					u.open++
					if u.open == *nConc {
						u.released = time.Now()
						close(u.allOpen)
					}
					ch := u.allOpen
					u.concMu.Unlock()
					select {
					case <-ch:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
			return nil
		},
	})
	return u
}

var (
	modeMu sync.Mutex
	mode   string
)

func paceMode() string { modeMu.Lock(); defer modeMu.Unlock(); return mode }
func setMode(m string) { modeMu.Lock(); mode = m; modeMu.Unlock() }
func (u *upstream) sentTimes() []float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]float64(nil), u.sent...)
}

func pct(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	return s[int(math.Round(p*float64(len(s)-1)))]
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// floorProcess starts a floor in its own process (this program again, with -forward and
// -forward-mode) and returns its URL and pid. It listens on host loopback and forwards to
// target, measured in the same run as the relay:
//
//   - "copy", a bare forwarder: it reads and writes every byte in user space with 64 KiB
//     buffers (no splice) and does nothing else (no HTTP, no credential, no event parsing),
//     the floor of any relay in a process of its own that must see the bytes it passes on;
//   - "proxy", a bare httputil.ReverseProxy (net/http's server, reverse proxy and transport,
//     with their defaults), the floor of a relay built on it, as the relay is.
func floorProcess(target, mode string) (string, string) {
	self, err := os.Executable()
	check(err)
	c := exec.Command(self, "-forward", target, "-forward-mode", mode)
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	check(err)
	check(c.Start())
	cleanups = append(cleanups, func() { c.Process.Kill(); c.Wait() })
	var addr string
	if _, err := fmt.Fscanln(out, &addr); err != nil {
		fatalf("floor %s: %v", mode, err)
	}
	return "http://" + addr, fmt.Sprint(c.Process.Pid)
}

// forward is a floor's process: it prints its address and serves until killed.
func forward(target, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Println(ln.Addr())
	if mode == "proxy" {
		u, err := url.Parse("http://" + target)
		check(err)
		check(http.Serve(ln, httputil.NewSingleHostReverseProxy(u)))
		return
	}
	pipe := func(dst, src net.Conn) {
		// The wrappers hide ReadFrom and WriteTo, which would splice.
		io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, 64<<10))
		dst.(*net.TCPConn).CloseWrite()
	}
	for {
		c, err := ln.Accept()
		check(err)
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{})
			go func() { pipe(u, c); close(done) }()
			pipe(c, u)
			<-done
		}()
	}
}

// hostNode runs bench.js on the host, directly against the upstream.
func hostNode(dir string, args ...string) []byte {
	c := exec.Command("node", append([]string{filepath.Join(dir, "bench.js")}, args...)...)
	c.Stderr = os.Stderr
	out, err := c.Output()
	check(err)
	return out
}

// boxNode runs bench.js in a box, against the relay.
func (e *env) boxNode(allow bool, args ...string) []byte {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = `"` + a + `"`
	}
	script := settle + `exec node bench.js ` + strings.Join(q, " ")
	if allow {
		return []byte(e.boxAllow(script))
	}
	return []byte(e.box(script))
}

const relayBase = `$AGENTBOX_RELAY_URL/sandbox/anthropic`

func main() {
	flag.Parse()
	log.SetFlags(0)
	if *fwdMode != "copy" && *fwdMode != "proxy" {
		log.Fatalf("-forward-mode %q: want copy or proxy", *fwdMode)
	}
	for name, v := range map[string]int{"-n": *nSmall, "-small-rounds": *smallRounds, "-curl-runs": *curlRuns, "-mb": *bulkMB, "-events": *nEvents} {
		if v < 1 {
			log.Fatalf("%s %d: want at least 1", name, v)
		}
	}
	if *nWarm < 0 {
		log.Fatalf("-warm %d: want 0 or more", *nWarm)
	}
	if *fwdTo != "" {
		forward(*fwdTo, *fwdMode)
		return
	}
	abs, err := filepath.Abs(*bin)
	check(err)
	*bin = abs
	load0, _ := os.ReadFile("/proc/loadavg")
	kernel, _ := exec.Command("uname", "-r").Output()
	nproc, _ := exec.Command("nproc").Output()
	fmt.Printf("### Run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("Machine: %s cores, kernel %s, load average at start %s\n",
		strings.TrimSpace(string(nproc)), strings.TrimSpace(string(kernel)), strings.Join(strings.Fields(string(load0))[:3], " "))

	defer cleanup()
	up := newUpstream()
	cleanups = append(cleanups, up.Close)
	e := newEnv()
	cleanups = append(cleanups, e.close)
	check(os.WriteFile(filepath.Join(e.work, "bench.js"), benchJS, 0o644))
	credFile := filepath.Join(e.home(), "anthropic.key")
	check(os.WriteFile(credFile, []byte(hostCredential+"\n"), 0o600))
	var rm *gitRemote
	cfg := fmt.Sprintf("gateway:\n  anthropic:\n    url: %s\n    credential:\n      file: %s\n", up.URL, credFile)
	if !*skipGit {
		rm = newGitRemote()
		cleanups = append(cleanups, rm.close)
		gitCred := filepath.Join(e.home(), "git-token")
		check(os.WriteFile(gitCred, []byte(gitSecret+"\n"), 0o600))
		cfg += fmt.Sprintf("git:\n  allow:\n    - %s\n  credentials:\n    - prefix: %s\n      username: %s\n      file: %s\n", rm.srv.URL, rm.srv.URL, gitUser, gitCred)
	}
	check(os.MkdirAll(filepath.Join(e.config(), "agentbox"), 0o700))
	check(os.WriteFile(filepath.Join(e.config(), "agentbox", "config.yaml"), []byte(cfg), 0o600))
	e.box("true") // start the daemon

	// 1. Small requests, in rounds: a round runs every path once, one after the other, so that
	// all saw the same machine; each path's samples are pooled over the rounds.
	setMode("small")
	fwd, fwdPid := floorProcess(strings.TrimPrefix(up.URL, "http://"), "copy")
	rp, _ := floorProcess(strings.TrimPrefix(up.URL, "http://"), "proxy")
	n, warm := fmt.Sprint(*nSmall), fmt.Sprint(*nWarm)
	paths := []struct {
		name string
		run  func() []byte
	}{
		{"direct to the fake upstream (host)", func() []byte { return hostNode(e.work, "small", up.URL, hostCredential, n, warm) }},
		{"through the relay (in a box)", func() []byte { return e.boxNode(false, "small", relayBase, "$AGENTBOX_PAIRING", n, warm) }},
		{"floor: a bare copy forwarder (host, no HTTP)", func() []byte { return hostNode(e.work, "small", fwd, hostCredential, n, warm) }},
		{"in a box (egress allow), direct", func() []byte { return e.boxNode(true, "small", up.URL, hostCredential, n, warm) }},
		{"floor: a bare httputil.ReverseProxy (host)", func() []byte { return hostNode(e.work, "small", rp, hostCredential, n, warm) }},
	}
	samples := make([][]float64, len(paths))
	for range *smallRounds {
		for i, p := range paths {
			var v struct{ Ms []float64 }
			check(json.Unmarshal(p.run(), &v))
			samples[i] = append(samples[i], v.Ms...)
		}
	}
	fmt.Printf("\n**Small request** (non-streaming Messages call; %d rounds, each path per round %d sequential requests on one keep-alive Node.js fetch client after %d warm-up; box start-up excluded):\n\n", *smallRounds, *nSmall, *nWarm)
	fmt.Println("| path | p50 ms | p90 ms | p99 ms | mean ms |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, xs []float64) {
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", name, pct(xs, .5), pct(xs, .9), pct(xs, .99), mean(xs))
	}
	added := func(name string, xs []float64) {
		d := samples[0]
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", name, pct(xs, .5)-pct(d, .5), pct(xs, .9)-pct(d, .9), pct(xs, .99)-pct(d, .99), mean(xs)-mean(d))
	}
	for i, p := range paths {
		row(p.name, samples[i])
	}
	added("**added by the relay**", samples[1])
	added("added by the bare forwarder", samples[2])
	added("added by the box alone (egress allow)", samples[3])
	added("added by a bare httputil.ReverseProxy", samples[4])

	// 2. Per-event delay: the upstream writes one event per ms; delay = receipt − write.
	setMode("events")
	eventDelays := func(out []byte) []float64 {
		var r struct{ Times []float64 }
		check(json.Unmarshal(out, &r))
		sent := up.sentTimes()
		if len(sent) != len(r.Times) {
			fatalf("events: the upstream wrote %d, the client got %d", len(sent), len(r.Times))
		}
		d := make([]float64, len(sent))
		for i := range sent {
			d[i] = r.Times[i] - sent[i]
		}
		return d
	}
	dEv := eventDelays(hostNode(e.work, "events", up.URL, hostCredential))
	rEv := eventDelays(e.boxNode(false, "events", relayBase, "$AGENTBOX_PAIRING"))
	fmt.Printf("\n**Per-event delay** (a stream of %d SSE events, one written every ~1 ms, each flushed; delay = the client's receipt time − the upstream's write time, same host clock):\n\n", len(dEv))
	fmt.Println("| path | p50 ms | p90 ms | p99 ms | max ms |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| direct | %.3f | %.3f | %.3f | %.3f |\n", pct(dEv, .5), pct(dEv, .9), pct(dEv, .99), pct(dEv, 1))
	fmt.Printf("| relay | %.3f | %.3f | %.3f | %.3f |\n", pct(rEv, .5), pct(rEv, .9), pct(rEv, .99), pct(rEv, 1))
	fmt.Printf("| **added** | **%.3f** | %.3f | **%.3f** | |\n", pct(rEv, .5)-pct(dEv, .5), pct(rEv, .9)-pct(dEv, .9), pct(rEv, .99)-pct(dEv, .99))

	// 3. Throughput of a large streamed body.
	setMode("bulk")
	var bd, br struct {
		Bytes float64
		Ms    float64
	}
	fmt.Printf("\n**Streamed body** (one Messages stream of ~%d MB of 16 KiB text deltas, read by Node.js fetch):\n\n", *bulkMB)
	fmt.Println("| path | bytes | s | MB/s |")
	fmt.Println("|---|---|---|---|")
	for i := 0; i < 2; i++ {
		check(json.Unmarshal(hostNode(e.work, "bulk", up.URL, hostCredential), &bd))
		check(json.Unmarshal(e.boxNode(false, "bulk", relayBase, "$AGENTBOX_PAIRING"), &br))
		fmt.Printf("| direct (run %d) | %.0f | %.2f | %.0f |\n", i+1, bd.Bytes, bd.Ms/1000, bd.Bytes/1e6/(bd.Ms/1000))
		fmt.Printf("| relay (run %d) | %.0f | %.2f | %.0f |\n", i+1, br.Bytes, br.Ms/1000, br.Bytes/1e6/(br.Ms/1000))
		check(json.Unmarshal(hostNode(e.work, "bulk", fwd, hostCredential), &bd))
		fmt.Printf("| floor: bare copy forwarder (run %d) | %.0f | %.2f | %.0f |\n", i+1, bd.Bytes, bd.Ms/1000, bd.Bytes/1e6/(bd.Ms/1000))
	}
	// The same with curl, a client that costs less CPU per byte.
	curl := func(base, key string) string {
		return `curl -sS -N -o /dev/null -w '%{size_download} %{time_total}' -X POST "` + base + `/v1/messages" -H 'content-type: application/json' ` +
			`-H 'anthropic-version: 2023-06-01' -H "x-api-key: ` + key + `" -d '{"model":"bulk","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'`
	}
	sides := []string{"direct", "relay", "floor: bare copy forwarder", "in a box (egress allow), direct"}
	rates := map[string][]float64{}
	// CPU seconds the relaying process spent: the daemon for a box's stream, less what it spent
	// on a box that streamed nothing (its launch); the forwarder for its stream.
	daemonPid := e.daemonPid()
	var relayCPU, launchCPU, fwdCPU []float64
	for i := 0; i < *curlRuns; i++ {
		c0 := cpuSec(daemonPid)
		e.box("true")
		launchCPU = append(launchCPU, cpuSec(daemonPid)-c0)
		for _, side := range sides {
			var out []byte
			switch side {
			case "direct":
				out, err = exec.Command("sh", "-c", curl(up.URL, hostCredential)).Output()
				check(err)
			case "relay":
				c0 := cpuSec(daemonPid)
				out = []byte(e.box(settle + curl(relayBase, "$AGENTBOX_PAIRING")))
				relayCPU = append(relayCPU, cpuSec(daemonPid)-c0)
			case "floor: bare copy forwarder":
				c0 := cpuSec(fwdPid)
				out, err = exec.Command("sh", "-c", curl(fwd, hostCredential)).Output()
				check(err)
				fwdCPU = append(fwdCPU, cpuSec(fwdPid)-c0)
			default:
				out = []byte(e.boxAllow(settle + curl(up.URL, hostCredential)))
			}
			var n, s float64
			fmt.Sscan(string(out), &n, &s)
			fmt.Printf("| %s, curl (run %d) | %.0f | %.2f | %.0f |\n", side, i+1, n, s, n/1e6/s)
			rates[side] = append(rates[side], n/1e6/s)
		}
	}
	fmt.Printf("\n**curl, medians of %d runs** (the sides alternate, so all saw the same machine):\n\n", *curlRuns)
	fmt.Println("| path | median MB/s | ÷ direct |")
	fmt.Println("|---|---|---|")
	for _, side := range sides {
		fmt.Printf("| %s | %.0f | %.0f %% |\n", side, pct(rates[side], .5), 100*pct(rates[side], .5)/pct(rates["direct"], .5))
	}
	fmt.Printf("\nCPU of the relaying process per stream, medians: the daemon %.3f s (a box's stream %.3f s less its launch %.3f s), the bare forwarder %.3f s.\n",
		pct(relayCPU, .5)-pct(launchCPU, .5), pct(relayCPU, .5), pct(launchCPU, .5), pct(fwdCPU, .5))

	// 4. Revocation: a stream in flight (an event every 10 ms) in a detached box; the host
	// runs `agentbox revoke ID` at t0.
	setMode("revoke")
	var toEnd, toNext, cli []float64
	for i := 0; i < *nRevoke; i++ {
		mark := fmt.Sprintf("streaming%d", i)
		res := fmt.Sprintf("revoke%d.json", i)
		c := e.cmd("run", "-d", "sh", "--", "-c", `node bench.js revoke "`+relayBase+`" "$AGENTBOX_PAIRING" `+mark+` > `+res+`.tmp && mv `+res+`.tmp `+res)
		idb, err := c.Output()
		check(err)
		id := strings.TrimSpace(string(idb))
		waitFile(filepath.Join(e.work, mark))
		t0 := nowMs()
		if out, err := e.cmd("revoke", id).CombinedOutput(); err != nil {
			fatalf("revoke: %v %s", err, out)
		}
		t1 := nowMs()
		waitFile(filepath.Join(e.work, res))
		var r struct {
			TEnd, TNext float64
			Status      int
			ErrorEvent  bool
		}
		b, _ := os.ReadFile(filepath.Join(e.work, res))
		check(json.Unmarshal(b, &r))
		if r.Status != 403 || !r.ErrorEvent {
			fatalf("revocation round %d: next status %d, error event %v", i, r.Status, r.ErrorEvent)
		}
		toEnd = append(toEnd, r.TEnd-t0)
		toNext = append(toNext, r.TNext-t0)
		cli = append(cli, t1-t0)
	}
	fmt.Printf("\n**Revocation** (%d rounds; t0 = the host starts `agentbox revoke ID` while the box reads a stream; the stream ends with `event: error` and the next request is 403):\n\n", *nRevoke)
	fmt.Println("| from t0 to | min ms | median ms | max ms |")
	fmt.Println("|---|---|---|---|")
	fmt.Printf("| `agentbox revoke` returned | %.1f | %.1f | %.1f |\n", pct(cli, 0), pct(cli, .5), pct(cli, 1))
	fmt.Printf("| the box's stream ended | %.1f | %.1f | %.1f |\n", pct(toEnd, 0), pct(toEnd, .5), pct(toEnd, 1))
	fmt.Printf("| the box's next request got 403 | %.1f | %.1f | %.1f |\n", pct(toNext, 0), pct(toNext, .5), pct(toNext, 1))

	// 5. git clone.
	if rm != nil {
		size := rm.bigRepo("big.git", *gitMB<<20)
		url := rm.srv.URL + "/big.git"
		var dg, rg []float64
		for i := 0; i < *gitRuns; i++ {
			dir, err := os.MkdirTemp(e.root, "clone")
			check(err)
			t := time.Now()
			gitHost(e.root, "-c", "http.extraHeader=Authorization: Basic "+basic(), "clone", "-q", url, dir+"/c")
			dg = append(dg, time.Since(t).Seconds())
			os.RemoveAll(dir)
		}
		out := e.box(fmt.Sprintf(`for i in $(seq %d); do s=$(date +%%s%%N); git clone -q %s c || exit 1; t=$(date +%%s%%N); echo $(( (t-s)/1000000 )); rm -rf c; done`, *gitRuns, url))
		for _, f := range strings.Fields(out) {
			var ms float64
			fmt.Sscan(f, &ms)
			rg = append(rg, ms/1000)
		}
		fmt.Printf("\n**git clone** of a generated repository (git fast-import, %d files of 1 MiB random data; pack %.1f MiB), from git http-backend (net/http/cgi, basic auth), %d clones per side, one box for the relayed ones:\n\n", *gitMB, float64(size)/(1<<20), *gitRuns)
		fmt.Println("| path | min s | median s | max s | MiB/s (median) |")
		fmt.Println("|---|---|---|---|---|")
		fmt.Printf("| direct (host git) | %.2f | %.2f | %.2f | %.0f |\n", pct(dg, 0), pct(dg, .5), pct(dg, 1), float64(size)/(1<<20)/pct(dg, .5))
		fmt.Printf("| through the git relay (in a box) | %.2f | %.2f | %.2f | %.0f |\n", pct(rg, 0), pct(rg, .5), pct(rg, 1), float64(size)/(1<<20)/pct(rg, .5))
	}
	// 6. Streams at once: nConc detached boxes, each its own session (the default bound is 64
	// live sessions, launches' included), each streaming one response with curl through its
	// relay channel; the upstream holds every stream's first event until all are open, then
	// writes an event every 2 ms on each. Errors: a launch refused, a status other than 200, a
	// stream without its end (message_stop) or with events missing.
	if *nConc > 0 {
		concurrentStreams(e, up)
	}
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nLoad average at the end: %s\n", strings.Join(strings.Fields(string(load1))[:3], " "))
}

// concurrentStreams runs phase 6 and prints its table.
func concurrentStreams(e *env, up *upstream) {
	setMode("concurrent")
	up.allOpen = make(chan struct{})
	// The boxes of the earlier phases have ended (and their sessions with them) before this
	// phase takes the bound's worth.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := e.cmd("session", "list", "--json").Output()
		check(err)
		var ss []json.RawMessage
		check(json.Unmarshal(out, &ss))
		if len(ss) == 0 {
			break
		}
		if time.Now().After(deadline) {
			fatalf("concurrent streams: %d sessions still live from earlier phases", len(ss))
		}
		time.Sleep(100 * time.Millisecond)
	}
	daemonPid := e.daemonPid()
	rssBefore := rssKB(daemonPid)
	var peak int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rssKB(daemonPid); r > peak {
				peak = r
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	body := `{"model":"concurrent","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	t0 := time.Now()
	var launchErrs int
	for i := 0; i < *nConc; i++ {
		script := fmt.Sprintf(`curl -sS -N -o stream.%d -w '%%{http_code}' -X POST "%s/v1/messages" -H 'content-type: application/json' `+
			`-H 'anthropic-version: 2023-06-01' -H "x-api-key: $AGENTBOX_PAIRING" -d '%s' > code.%d.tmp; mv code.%d.tmp code.%d`, i, relayBase, body, i, i, i)
		if out, err := e.cmd("run", "-d", "sh", "--", "-c", script).CombinedOutput(); err != nil {
			launchErrs++
			log.Printf("concurrent streams: launch %d: %v: %s", i, err, out)
		}
	}
	launched := time.Since(t0)
	var errs, done int
	for i := 0; i < *nConc-launchErrs; i++ {
		waitFile(filepath.Join(e.work, fmt.Sprintf("code.%d", i)))
		code, _ := os.ReadFile(filepath.Join(e.work, fmt.Sprintf("code.%d", i)))
		stream, _ := os.ReadFile(filepath.Join(e.work, fmt.Sprintf("stream.%d", i)))
		deltas := strings.Count(string(stream), "event: content_block_delta")
		if strings.TrimSpace(string(code)) != "200" || !strings.Contains(string(stream), "event: message_stop") || deltas != *concEv-6 {
			errs++
			log.Printf("concurrent streams: box %d: status %s, %d deltas of %d, end %v", i, code, deltas, *concEv-6, strings.Contains(string(stream), "event: message_stop"))
			continue
		}
		done++
	}
	streamed := time.Since(up.released)
	close(stopSampling)
	<-sampled
	// Let the boxes end, then the daemon's RSS at rest again.
	time.Sleep(2 * time.Second)
	rssAfter := rssKB(daemonPid)
	fmt.Printf("\n**Streams at once** (%d detached boxes, each its own session, each streaming one response of %d events with curl through its relay channel; the upstream holds every first event until all %d streams are open, then writes an event every 2 ms on each):\n\n", *nConc, *concEv, *nConc)
	fmt.Println("| | |")
	fmt.Println("|---|---|")
	fmt.Printf("| launches (sequential `agentbox run -d`) | %d in %.1f s, %d refused |\n", *nConc, launched.Seconds(), launchErrs)
	fmt.Printf("| streams complete (200, every event, message_stop) | %d of %d |\n", done, *nConc)
	fmt.Printf("| **errors** | **%d** |\n", errs+launchErrs)
	fmt.Printf("| all streams open → last stream read | %.2f s |\n", streamed.Seconds())
	fmt.Printf("| daemon RSS before / peak / 2 s after | %.1f / %.1f / %.1f MiB |\n", float64(rssBefore)/1024, float64(peak)/1024, float64(rssAfter)/1024)
}

// cpuSec is the CPU time pid has spent, user and system, in seconds (at the kernel's 10 ms
// resolution; 0 if unknown).
func cpuSec(pid string) float64 {
	n, err := strconv.Atoi(pid)
	if err != nil {
		return 0
	}
	ticks, err := proc.CPUTicks(n)
	if err != nil {
		return 0
	}
	return float64(ticks) / 100 // USER_HZ
}

// daemonPid is the pid of the environment's daemon.
func (e *env) daemonPid() string {
	b, err := os.ReadFile(filepath.Join(e.root, "run", "agentbox", "daemon.pid"))
	check(err)
	return strings.TrimSpace(string(b))
}

// rssKB is the VmRSS of pid in kB (0 if unknown).
func rssKB(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb
		}
	}
	return 0
}

func waitFile(p string) {
	end := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(end) {
			fatalf("gave up waiting for %s", p)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func basic() string {
	return base64.StdEncoding.EncodeToString([]byte(gitUser + ":" + gitSecret))
}

// gitRemote serves bare repositories with git http-backend behind basic auth.
type gitRemote struct {
	root string
	srv  *httptest.Server
}

func newGitRemote() *gitRemote {
	out, err := exec.Command("git", "--exec-path").Output()
	check(err)
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	root, err := os.MkdirTemp("", "abbenchgit")
	check(err)
	h := &cgi.Handler{Path: backend, Root: "/", InheritEnv: []string{"PATH"}, Stderr: io.Discard,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + root}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != gitUser || p != gitSecret {
			w.Header().Set("WWW-Authenticate", `Basic realm="bench"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return &gitRemote{root: root, srv: srv}
}

func (rm *gitRemote) close() { rm.srv.Close(); os.RemoveAll(rm.root) }

// bigRepo makes a bare repository of size bytes of incompressible 1 MiB blobs with
// fast-import, and returns the size of its pack.
func (rm *gitRemote) bigRepo(name string, size int) int64 {
	bare := filepath.Join(rm.root, name)
	gitHost(rm.root, "init", "-q", "--bare", "-b", "main", bare)
	var buf bytes.Buffer
	const blob = 1 << 20
	data := make([]byte, blob)
	n := size / blob
	for i := range n {
		rand.Read(data)
		fmt.Fprintf(&buf, "blob\nmark :%d\ndata %d\n", i+1, blob)
		buf.Write(data)
		buf.WriteByte('\n')
	}
	for c := 0; c*8 < n; c++ {
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(&buf, "commit refs/heads/main\ncommitter Gen <gen@example.com> %d +0000\ndata %d\n%s\n", 1700000000+c, len(msg), msg)
		for i := c * 8; i < min(n, c*8+8); i++ {
			fmt.Fprintf(&buf, "M 100644 :%d data/f%03d.bin\n", i+1, i)
		}
		buf.WriteByte('\n')
	}
	c := exec.Command("git", "fast-import", "--quiet")
	c.Dir, c.Env, c.Stdin = bare, gitEnv(rm.root), &buf
	if out, err := c.CombinedOutput(); err != nil {
		fatalf("fast-import: %v %s", err, out)
	}
	gitHost(bare, "repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "*.pack"))
	var total int64
	for _, p := range packs {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	return total
}

func gitEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0"}
}

func gitHost(dir string, args ...string) {
	c := exec.Command("git", args...)
	c.Dir, c.Env = dir, gitEnv(dir)
	if out, err := c.CombinedOutput(); err != nil {
		fatalf("git %v: %v %s", args, err, out)
	}
}
