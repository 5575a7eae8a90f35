//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// TestLoad is a load benchmark, not a timed test: it puts one daemon under load and reports
// what it costs (results in docs/benchmarks.md, "Load"). It runs only with AGENTBOX_LOAD=1
// (it takes minutes and a quiet machine; the harness's Env needs a *testing.T, hence a test
// rather than a go test -bench function):
//
//   - 10 boxes launched at once (`agentbox run -d`), then sessions made by hand up to the
//     64-session bound (the launches' own sessions count), and the 65th refused;
//   - LOAD_RPS relay requests per second (default 1000) for LOAD_SECONDS (default 60) from
//     a client using one manual session on the relay's loopback listener, against the fake
//     upstream (internal/relay/llm/llmtest), open loop: a request starts every 1/RPS whatever
//     the previous ones do (at most 256 in flight);
//   - the daemon's RSS, descriptors (/proc/PID/fd) and threads (/proc/PID/status) before,
//     at peak and after the boxes are stopped and the sessions revoked. The daemon has no
//     goroutine endpoint: threads, descriptors and RSS stand in.
//
// Errors, a 65th session accepted, and leaked descriptors or threads fail it; durations are
// reported, never asserted. Run:
//
//	AGENTBOX_LOAD=1 AGENTBOX_BIN=$PWD/bin/agentbox go test -count=1 -run '^TestLoad$' -v -timeout 20m ./test/e2e
func TestLoad(t *testing.T) {
	if os.Getenv("AGENTBOX_LOAD") != "1" {
		t.Skip("a load benchmark: set AGENTBOX_LOAD=1 to run it (LOAD_RPS, LOAD_SECONDS)")
	}
	b := t
	rps := envInt("LOAD_RPS", 1000)
	secs := envInt("LOAD_SECONDS", 60)
	e, _ := relayEnvWith(t, llmtest.Options{Credential: hostCredential})
	e.startDaemon()
	pid := e.DaemonPid()
	warm := e.createSession("load-warm")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	post := func(s api.SessionCreated) error {
		req, _ := http.NewRequest("POST", s.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(messagesBody))
		req.Header.Set("X-Agentbox-Pairing", s.Pairing)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := post(warm); err != nil {
		b.Fatalf("warm-up request: %v", err)
	}
	client.CloseIdleConnections()
	base := sample(pid)
	b.Logf("daemon %d at rest: %s", pid, base)

	// 10 boxes at once.
	var wg sync.WaitGroup
	ids := make([]string, 10)
	var launchErrs atomic.Int32
	t0 := time.Now()
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out, err := e.Command(ctx, "run", "-d", "sleep", "--", "1000").Output()
			ids[i] = strings.TrimSpace(string(out))
			if err != nil || len(ids[i]) != 32 {
				launchErrs.Add(1)
				b.Errorf("launch %d: %v %q", i, err, out)
			}
		}()
	}
	wg.Wait()
	launchTime := time.Since(t0)
	for _, id := range ids {
		if id != "" {
			e.WaitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning })
		}
	}
	withBoxes := sample(pid)
	b.Logf("10 concurrent launches: %v wall, %d errors; daemon: %s", launchTime.Round(time.Millisecond), launchErrs.Load(), withBoxes)

	// Sessions by hand up to the bound.
	live := 0
	for _, s := range e.sessions() {
		if s.State == "live" {
			live++
		}
	}
	var manual []api.SessionCreated
	for live < 64 {
		manual = append(manual, e.createSession(fmt.Sprintf("load-%d", len(manual))))
		live++
	}
	r := e.Run("", "session", "create", "--client", "load-65", "--json")
	if r.Code == 0 || !strings.Contains(r.Stderr, api.CodeTooManySessions) {
		b.Errorf("the 65th session: exit %d, %q %q; want refused with %s", r.Code, r.Stdout, r.Stderr, api.CodeTooManySessions)
	} else {
		b.Logf("65th session refused: %s", strings.TrimSpace(r.Stderr))
	}
	withSessions := sample(pid)
	b.Logf("64 live sessions (%d by hand): daemon: %s", len(manual)+1, withSessions)

	// The relay load, open loop.
	s := manual[0]
	total := rps * secs
	var errs, done atomic.Int64
	var errMu sync.Mutex
	errKinds := map[string]int{}
	lat := make([]time.Duration, total)
	inflight := make(chan struct{}, 256)
	var peak procSample
	stopSampling := make(chan struct{})
	go func() {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tk.C:
				peak = peak.max(sample(pid))
			}
		}
	}()
	start := time.Now()
	interval := time.Second / time.Duration(rps)
	var lwg sync.WaitGroup
	for i := 0; i < total; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		inflight <- struct{}{}
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			defer func() { <-inflight }()
			t := time.Now()
			err := post(s)
			lat[i] = time.Since(t)
			done.Add(1)
			if err != nil {
				errs.Add(1)
				errMu.Lock()
				errKinds[err.Error()]++
				errMu.Unlock()
			}
		}()
	}
	lwg.Wait()
	elapsed := time.Since(start)
	close(stopSampling)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.Logf("relay: %d requests in %v (%.0f/s achieved, %d/s asked), %d errors %v; latency p50 %v p90 %v p99 %v max %v",
		done.Load(), elapsed.Round(time.Millisecond), float64(done.Load())/elapsed.Seconds(), rps, errs.Load(), errKinds,
		q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
	b.Logf("daemon peak during the load: %s", peak)
	if errs.Load() > 0 {
		b.Errorf("%d of %d relay requests failed: %v", errs.Load(), total, errKinds)
	}

	// Back to rest: boxes stopped, sessions revoked, client connections closed.
	client.CloseIdleConnections()
	for _, id := range ids {
		if id != "" {
			e.Run("", "stop", id)
		}
	}
	for _, m := range manual {
		e.Run("", "session", "revoke", m.ID)
	}
	var after procSample
	deadlineAt := time.Now().Add(30 * time.Second)
	for {
		after = sample(pid)
		if after.fds-after.sockets <= base.fds-base.sockets || time.Now().After(deadlineAt) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Logf("daemon after stop and revoke: %s (at rest before: %s)", after, base)
	// The relay keeps up to 16 idle connections to the upstream (llm.Gateway's transport,
	// MaxIdleConnsPerHost): sockets may grow by that much; nothing else may.
	if after.sockets > base.sockets+16 || after.fds-after.sockets > base.fds-base.sockets {
		b.Errorf("descriptors leaked: %d (%d sockets) at rest before, %d (%d sockets) after: %s",
			base.fds, base.sockets, after.fds, after.sockets, fdKinds(pid))
	}
	// The Go runtime keeps the OS threads it made for blocking calls: more threads after a
	// burst than before is expected; a leak shows as growth from one round to the next.
	b.Logf("threads: %d at rest before, %d at peak, %d after", base.threads, peak.threads, after.threads)
}

// procSample is a daemon's footprint.
type procSample struct {
	rssKB, fds, sockets, threads int
}

func (p procSample) String() string {
	return fmt.Sprintf("RSS %d KiB, %d fds (%d sockets), %d threads", p.rssKB, p.fds, p.sockets, p.threads)
}

func (p procSample) max(o procSample) procSample {
	return procSample{max(p.rssKB, o.rssKB), max(p.fds, o.fds), max(p.sockets, o.sockets), max(p.threads, o.threads)}
}

func sample(pid int) procSample {
	var s procSample
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	s.fds = len(ents)
	for _, d := range ents {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, d.Name())); strings.HasPrefix(l, "socket:") {
			s.sockets++
		}
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			s.rssKB = atoi(f[1])
		case "Threads:":
			s.threads = atoi(f[1])
		}
	}
	return s
}

// fdKinds summarises a process's descriptors: TCP sockets by state and peer port (from ss),
// and the other kinds by their link's prefix.
func fdKinds(pid int) string {
	kinds := map[string]int{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, d := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, d.Name()))
		k, _, _ := strings.Cut(l, ":")
		if strings.HasPrefix(l, "/") {
			k = l
		}
		kinds[k]++
	}
	out, _ := exec.Command("ss", "-tanpH").Output()
	tcp := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 5 {
			_, local, _ := strings.Cut(f[3], "]:")
			if local == "" {
				local = f[3][strings.LastIndexByte(f[3], ':')+1:]
			}
			peer := f[4][strings.LastIndexByte(f[4], ':')+1:]
			tcp[f[0]+" local:"+local+" peer:"+peer]++
		}
	}
	return fmt.Sprintf("%v; tcp %v", kinds, tcp)
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
