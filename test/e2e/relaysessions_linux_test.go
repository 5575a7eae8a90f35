//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store"
)

const streamBody = `{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

// relayEnvWith is relayEnv with a fake upstream of the given options (the host credential is
// always required).
func relayEnvWith(t *testing.T, opts llmtest.Options) (*Env, *llmtest.Server) {
	t.Helper()
	e := NewEnv(t)
	opts.Credential = hostCredential
	up := llmtest.NewAnthropic(opts)
	t.Cleanup(up.Close)
	credFile := filepath.Join(e.Home, "anthropic.key")
	if err := os.WriteFile(credFile, []byte(hostCredential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e, fmt.Sprintf("gateway:\n  anthropic:\n    url: %s\n    credential:\n      file: %s\n", up.URL, credFile))
	logDaemonOnFailure(t, e)
	return e, up
}

func needCurl(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
}

func needNode(t *testing.T) {
	if _, err := os.Stat("/usr/bin/node"); err != nil {
		t.Skip("node is not installed")
	}
}

func (e *Env) exists(name string) bool {
	_, err := os.Stat(filepath.Join(e.Work, name))
	return err == nil
}

func (e *Env) read(name string) string {
	b, _ := os.ReadFile(filepath.Join(e.Work, name))
	return string(b)
}

func (e *Env) touch(name string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.Work, name), nil, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// waitGo is a box script fragment that waits for the test to create the file go.
const waitGo = `while [ ! -e go ]; do sleep 0.05; done; `

// sseEvents returns the event names of a server-sent event stream, in order.
func sseEvents(stream string) []string {
	var names []string
	for _, block := range strings.Split(stream, "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				names = append(names, name)
			}
		}
	}
	return names
}

// TestRelayRevokeMidStream: revoking a launch while its box reads a stream through the relay
// ends the stream with an `event: error` (pairing_invalid) and closes it; the upstream request
// is cancelled; the box's next request is 403 pairing_invalid.
func TestRelayRevokeMidStream(t *testing.T) {
	needCurl(t)
	held := make(chan struct{})
	upCanceled := make(chan struct{})
	var once sync.Once
	e, up := relayEnvWith(t, llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Repeat: 1 << 20} },
		// The stream sends its first 20 events, then stays open (in progress) until the
		// relay goes away.
		Pace: func(ctx context.Context, i int, _ string) error {
			if i < 20 {
				return nil
			}
			once.Do(func() { close(held) })
			<-ctx.Done()
			select {
			case <-upCanceled:
			default:
				close(upCanceled)
			}
			return ctx.Err()
		},
	})
	script := `curl -sSN -X POST "$AGENTBOX_RELAY_URL/sandbox/anthropic/v1/messages" -H 'content-type: application/json' ` +
		`-H 'anthropic-version: 2023-06-01' -H "x-api-key: $AGENTBOX_PAIRING" -d '` + streamBody + `' > stream.out 2> stream.err; ` +
		`echo "exit=$?" > stream.exit; ` + waitGo + `{ ` + curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`) + `; } > next; touch done`
	id := e.Detach("sh", "--", "-c", script)
	eventually(t, "the stream in progress in the box", func() bool {
		select {
		case <-held:
		default:
			return false
		}
		return strings.Count(e.read("stream.out"), "event: content_block_delta") >= 10
	})
	if e.exists("stream.exit") {
		t.Fatalf("the stream ended before the revocation: %s", e.read("stream.out"))
	}
	n := len(up.Requests())
	if r := e.Run("", "revoke", id); r.Code != 0 {
		t.Fatalf("revoke: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	eventually(t, "the stream to close", func() bool { return e.exists("stream.exit") })
	out := e.read("stream.out")
	names := sseEvents(out)
	if len(names) == 0 || names[len(names)-1] != "error" {
		t.Fatalf("the stream did not end with an error event: events %v\n%s", names, tail(out, 600))
	}
	last := out[strings.LastIndex(out, "event: error"):]
	if !strings.Contains(last, "pairing_invalid") {
		t.Errorf("the final error event does not say pairing_invalid: %q", last)
	}
	for _, ev := range names {
		if ev == "message_stop" {
			t.Errorf("the revoked stream claims to have finished (message_stop)")
		}
	}
	t.Logf("curl: %s %s; last event %q", strings.TrimSpace(e.read("stream.exit")), e.read("stream.err"), last)
	eventually(t, "the upstream request cancelled", func() bool {
		select {
		case <-upCanceled:
			return true
		default:
			return false
		}
	})
	e.touch("go")
	eventually(t, "the next request", func() bool { return e.exists("done") })
	next := e.read("next")
	if !strings.HasPrefix(next, "403\n") || !strings.Contains(next, "pairing_invalid") {
		t.Fatalf("after revocation: want 403 pairing_invalid, got %q", next)
	}
	if len(up.Requests()) != n {
		t.Errorf("a request after revocation reached the upstream")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestRelaySurvivesDaemonKill: after the daemon is killed with SIGKILL and a new one starts
// (the next agentbox command), a running box's launch session still works: its next relay
// request succeeds with the same pairing.
//
// It also guards issue 21's leftover of held record counts: the box refuses to be recorded
// past audit.maxRowsPerLaunch (100) by flooding its egress proxy with refused CONNECTs, and
// the daemon is killed while the flood's counts past the cap are held back (they are written
// only when the launch ends). They lived in the daemon's memory only, so after the restart the
// launch showed and stored 99 refusals of 250 (checked against the code before the journal);
// now the new daemon writes their summary from the journal (internal/recordlimit) before it
// re-adopts the launch: 250 refusals, the refused hosts named, and no journal left to replay
// twice.
func TestRelaySurvivesDaemonKill(t *testing.T) {
	needCurl(t)
	const flood, maxRows = 250, 100
	e, up := relayEnvWith(t, llmtest.Options{})
	cfg, err := os.ReadFile(filepath.Join(e.Config, "agentbox", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e, string(cfg)+fmt.Sprintf("audit:\n  maxRowsPerLaunch: %d\n", maxRows))
	req := curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`)
	id := e.Detach("bash", "--", "-c", `{ `+req+`; } > first; `+egressRefusals(flood)+`touch ready; `+waitGo+`{ `+req+`; } > second; touch done; `+
		`while [ ! -e end ]; do sleep 0.05; done`)
	eventually(t, "the first request and the flood", func() bool { return e.exists("ready") })
	if first := e.read("first"); !strings.HasPrefix(first, "200\n") {
		t.Fatalf("first request: %q", first)
	}
	// Every refusal counted (a count is a record written or held back and journaled), and the
	// rows under the cap committed: what is left in the daemon's memory is the 151 held back.
	e.WaitLaunch(id, "counting the flood", func(l api.Launch) bool { return l.Egress != nil && l.Egress.Refused == flood })
	st, err := store.Open(filepath.Join(e.State, "agentbox", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eventually(t, fmt.Sprintf("the launch's first %d rows committed", maxRows), func() bool {
		return len(brokerRows(t, st, id)) == maxRows
	})
	pid := e.DaemonPid()
	if pid == 0 {
		t.Fatal("no daemon pid")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	e.waitDaemonGone(t, pid)
	// As a daemon killed while it compacted the journal leaves it: the compaction's temporary
	// file (atomicfile's name) beside the journal, which the next daemon removes with it.
	held := filepath.Join(e.State, "agentbox", "held")
	if err := os.WriteFile(filepath.Join(held, "."+id+".egress.tmp-424242"), []byte("{\"k\":\"cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "run", "true"); r.Code != 0 {
		t.Fatalf("agentbox run after the kill: exit %d: %s", r.Code, r.Stderr)
	}
	if np := e.DaemonPid(); np == pid || np == 0 {
		t.Fatalf("no new daemon (pid file says %d)", np)
	}
	l, _ := e.Launch(id)
	if l.State != api.StateRunning {
		t.Fatalf("after the restart the launch is %q, want running", l.State)
	}
	if l.Egress == nil || l.Egress.Refused != flood {
		t.Errorf("after the restart the launch counts %+v egress refusals, want %d: the counts held back when the daemon was killed are lost", l.Egress, flood)
	}
	var refused, summaries int64
	targets := map[string]int64{}
	for _, r := range brokerRows(t, st, id) {
		if r.Kind != "egress" || r.Decision != "refuse" {
			continue
		}
		if r.Count == 0 {
			refused++
			continue
		}
		refused += r.Count
		summaries++
		for _, c := range r.Targets {
			targets[c.Name] += c.Count
		}
	}
	if refused != flood || summaries != 1 || len(targets) != 3 || targets["h0.evil.test:443"] == 0 {
		t.Errorf("stored after the restart: %d refusals in %d summaries naming %v, want %d in one summary naming the 3 refused hosts", refused, summaries, targets, flood)
	}
	left, _ := filepath.Glob(filepath.Join(held, id+".*"))
	temps, _ := filepath.Glob(filepath.Join(held, "."+id+".*"))
	if left = append(left, temps...); len(left) != 0 {
		t.Errorf("journals left after the restart: %v, want them removed once written", left)
	}
	if logs, _ := os.ReadFile(filepath.Join(e.State, "agentbox", "daemon.log")); strings.Contains(string(logs), "not a journal of held records") {
		t.Errorf("the daemon took the compaction's temporary file for a journal of its own:\n%s", logs)
	}
	n := len(up.Requests())
	e.touch("go")
	eventually(t, "the second request", func() bool { return e.exists("done") })
	if second := e.read("second"); !strings.HasPrefix(second, "200\n") {
		t.Fatalf("the box's relay request after the daemon restart: %q", second)
	}
	reqs := up.Requests()
	if len(reqs) != n+1 || reqs[len(reqs)-1].Header.Get("X-Api-Key") != hostCredential {
		t.Errorf("the upstream did not get the second request with the host credential")
	}
	e.touch("end")
	e.WaitLaunch(id, "exited", func(l api.Launch) bool { return ended(l) })
	if tot, err := st.EgressTotals(context.Background(), id); err != nil || tot[id].Refused != flood {
		t.Errorf("stored after the launch ended: %+v (%v), want %d refusals, counted once", tot[id], err, flood)
	}
}

// brokerRow is the part of a relay, git or egress audit row the tests read.
type brokerRow struct {
	Kind     string `json:"-"`
	Target   string `json:"target"`
	Decision string `json:"decision"`
	Count    int64  `json:"count"`
	Targets  []struct {
		Name  string `json:"name"`
		Count int64  `json:"count"`
	} `json:"targets"`
	OtherTargets int64 `json:"otherTargets"`
}

// brokerRows returns launch id's audit rows of the relay, git and egress brokers.
func brokerRows(t *testing.T, st *store.Store, id string) []brokerRow {
	t.Helper()
	audits, err := st.ListAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []brokerRow
	for _, a := range audits {
		if a.Kind != "relay" && a.Kind != "git" && a.Kind != "egress" {
			continue
		}
		r := brokerRow{Kind: a.Kind}
		if err := json.Unmarshal(a.Detail, &r); err != nil {
			t.Fatalf("%s row %s: %v", a.Kind, a.Detail, err)
		}
		out = append(out, r)
	}
	return out
}

// TestRelaySessionsMax: sessions.max (default 64) bounds live sessions, launch sessions
// included: with a box running, 63 sessions by hand fill the registry; the next `session
// create` and the next launch are refused naming sessions.max; when the box ends its slot is
// free again, and the 65th session then is refused.
func TestRelaySessionsMax(t *testing.T) {
	e := NewEnv(t)
	logDaemonOnFailure(t, e)
	// An ended launch does not keep its session's slot.
	if r := e.Run("", "run", "true"); r.Code != 0 {
		t.Fatalf("run true: exit %d: %s", r.Code, r.Stderr)
	}
	id := e.Detach("sh", "--", "-c", waitGo)
	for i := range 63 {
		if r := e.Run("", "session", "create", "--client", "t"); r.Code != 0 || !strings.Contains(r.Stdout, "abp_") {
			t.Fatalf("session create #%d (with one launch session live): exit %d\n%s\n%s", i+1, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := e.Run("", "session", "create", "--client", "t")
	if r.Code == 0 || !strings.Contains(r.Stderr, "sessions.max") {
		t.Fatalf("the 65th live session (64 by hand and a launch): want a refusal naming sessions.max, got exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "abp_") {
		t.Fatalf("a refused create printed a pairing: %s", r.Stdout)
	}
	t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
	r = e.Run("", "run", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "sessions.max") {
		t.Fatalf("a launch beyond sessions.max: want a refusal naming sessions.max, got exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("launch refused: %s", strings.TrimSpace(r.Stderr))
	e.touch("go")
	e.WaitLaunch(id, "exited", func(l api.Launch) bool { return ended(l) })
	eventually(t, "the ended launch's slot", func() bool {
		return e.Run("", "session", "create", "--client", "t").Code == 0
	})
	r = e.Run("", "session", "create", "--client", "t")
	if r.Code == 0 || !strings.Contains(r.Stderr, "sessions.max") || !strings.Contains(r.Stderr, "64") {
		t.Fatalf("the 65th session: want a refusal naming sessions.max and 64, got exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// nodeStream is a Node.js program that streams a Messages response through the relay with
// fetch, touches the file "first" at the first text delta, and prints the status, the events
// and the text.
const nodeStream = `
const fs = require('fs');
(async () => {
  const r = await fetch(process.env.AGENTBOX_RELAY_URL + '/sandbox/anthropic/v1/messages', {
    method: 'POST',
    headers: {'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': process.env.AGENTBOX_PAIRING},
    body: JSON.stringify({model: 'claude-test', max_tokens: 16, stream: true, messages: [{role: 'user', content: 'hi'}]}),
  });
  console.log('status ' + r.status + ' ' + r.headers.get('content-type'));
  const dec = new TextDecoder();
  let buf = '', events = [], text = '', first = false, chunks = 0;
  for await (const chunk of r.body) {
    chunks++;
    buf += dec.decode(chunk, {stream: true});
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const name = (ev.match(/^event: (.*)$/m) || [])[1];
      const data = (ev.match(/^data: (.*)$/m) || [])[1];
      events.push(name);
      if (name === 'content_block_delta') {
        text += JSON.parse(data).delta.text;
        if (!first) { fs.writeFileSync('first', ''); first = true; }
      }
    }
  }
  console.log('events ' + events.join(','));
  console.log('text ' + text);
  console.log('chunks ' + chunks);
})().catch(e => { console.log('error ' + e); process.exit(1); });
`

// TestRelayNodeStream: Node.js fetch in a box streams a response through the relay: the first
// text delta reaches the box while the upstream is still holding the rest of the stream, and
// the whole stream arrives in order.
func TestRelayNodeStream(t *testing.T) {
	needNode(t)
	var e *Env
	sawFirst := make(chan bool, 1)
	e, _ = relayEnvWith(t, llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Text: "0123456789abcdefghijklmnopqrstuvwxyz", Chunk: 4}
		},
		// Hold the stream after the first delta until the box has read it: the box sees the
		// stream as it is produced, not buffered to the end.
		Pace: func(ctx context.Context, i int, name string) error {
			if i != 5 {
				return nil
			}
			for {
				if e.exists("first") {
					sawFirst <- true
					return nil
				}
				select {
				case <-ctx.Done():
					sawFirst <- false
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
		},
	})
	if err := os.WriteFile(filepath.Join(e.Work, "stream.js"), []byte(nodeStream), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.Box(`node stream.js`)
	if r.Code != 0 {
		t.Fatalf("node: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	select {
	case ok := <-sawFirst:
		if !ok {
			t.Fatal("the upstream stream was cancelled before the box read its first delta")
		}
	default:
		t.Fatal("the upstream never paced the stream")
	}
	want := []string{
		"status 200 text/event-stream; charset=utf-8",
		"events message_start,content_block_start,ping," + strings.Repeat("content_block_delta,", 9) + "content_block_stop,message_delta,message_stop",
		"text 0123456789abcdefghijklmnopqrstuvwxyz",
	}
	for _, w := range want {
		if !strings.Contains(r.Stdout, w+"\n") {
			t.Errorf("node output lacks %q:\n%s", w, r.Stdout)
		}
	}
}
