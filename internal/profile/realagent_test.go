package profile

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestClaudeWiringBeatsWorkspaceSettings runs the real Claude Code (scripts/install-agents.sh)
// with the claude profile's relay wiring, unboxed, against a fake Anthropic upstream mounted
// where the relay serves it, from a workspace whose .claude/settings.json points Claude Code
// elsewhere (env.ANTHROPIC_BASE_URL, env.ANTHROPIC_API_KEY, apiKeyHelper). The request must
// reach the relay URL with the pairing, and nothing the settings file names. (Without
// CLAUDE_CODE_PROVIDER_MANAGED_BY_HOST=1 in the profile, Claude Code 2.1.332 follows the
// settings file and this test fails.)
func TestClaudeWiringBeatsWorkspaceSettings(t *testing.T) {
	t.Parallel()
	bin := testenv.InstalledAgentCLI(t, "claude")
	up := llmtest.NewAnthropic(llmtest.Options{})
	defer up.Close()
	var sawKey atomic.Value
	relay := httptest.NewServer(http.StripPrefix("/sandbox/anthropic", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawKey.Store(r.Header.Get("X-Api-Key") + "|" + r.Header.Get("Authorization"))
		up.Config.Handler.ServeHTTP(w, r)
	})))
	defer relay.Close()
	var diverted atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		diverted.Add(1)
		http.Error(w, "diverted", http.StatusTeapot)
	}))
	defer other.Close()

	home, ws := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"env": {"ANTHROPIC_BASE_URL": "` + other.URL + `", "ANTHROPIC_API_KEY": "planted"}, "apiKeyHelper": "echo planted"}`
	if err := os.WriteFile(filepath.Join(ws, ".claude", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	s := builtinSet(t)
	w, err := s.Get("claude").Wire(home, nil, Facts{Providers: relayProviders, RelayURL: relay.URL, Pairing: "pairing-for-test", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "say hello")
	cmd.Dir = ws
	cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/bin:/bin", "TERM=dumb"}, w.Env...)
	out, err := cmd.CombinedOutput()
	if diverted.Load() > 0 {
		t.Fatalf("the workspace settings diverted Claude Code (%d requests); output: %s", diverted.Load(), out)
	}
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if len(up.Requests()) == 0 {
		t.Fatalf("no request reached the relay URL; output: %s", out)
	}
	if k, _ := sawKey.Load().(string); !strings.Contains(k, "pairing-for-test") || strings.Contains(k, "planted") {
		t.Errorf("credential headers at the relay: %q", k)
	}
}

// TestGeminiWiringBeatsWorkspaceSettings runs the real Gemini CLI (scripts/install-agents.sh)
// with the gemini profile's relay wiring and the ~/.gemini/settings.json a box starts with, unboxed,
// against a fake Gemini API mounted where the relay serves it, from a trusted workspace whose
// .gemini/.env points Gemini CLI elsewhere (GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY) and whose
// .gemini/settings.json names a model. The request must reach the relay URL with the pairing
// and the workspace's model (the file was read), and nothing the .env names. A workspace that
// selects Vertex AI instead (security.auth.selectedType, with a .env supplying a project, a
// location, an API key and a Vertex URL) must stop Gemini CLI before it sends anything: the
// profile sets those variables, empty.
func TestGeminiWiringBeatsWorkspaceSettings(t *testing.T) {
	t.Parallel()
	bin := testenv.InstalledAgentCLI(t, "gemini")
	node, err := exec.LookPath("node")
	testenv.RequireTool(t, "gemini needs node on PATH", err)
	up := llmtest.NewGemini(llmtest.Options{Credential: "pairing-for-test"})
	defer up.Close()
	relay := httptest.NewServer(http.StripPrefix("/sandbox/gemini", up.Config.Handler))
	defer relay.Close()
	var diverted atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		diverted.Add(1)
		http.Error(w, "diverted", http.StatusTeapot)
	}))
	defer other.Close()

	home, ws := t.TempDir(), t.TempDir()
	s := builtinSet(t)
	p := s.Get("gemini")
	for _, pc := range p.PreCreates() {
		path := filepath.Join(home, pc.Rel)
		if pc.Dir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// ~/.gemini itself is box-owned state, not pre-created: its files' folder is made here.
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(pc.Content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The user settings a box starts with when the host has none (the gemini-settings seed,
	// harnessstate.TestGeminiSettings): the API key path, the update check and usage
	// statistics off.
	settingsFile := filepath.Join(home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settingsFile), 0o700); err != nil {
		t.Fatal(err)
	}
	const settings = `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}, "privacy": {"usageStatisticsEnabled": false}}`
	if err := os.WriteFile(settingsFile, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	// Trusted, as Gemini CLI's headless mode requires (else it refuses to start), in the trust
	// file the wiring points Gemini CLI at (in a box, the box-owned one seeded from the host's).
	trust := `{"` + ws + `": "TRUST_FOLDER"}`
	trustFile := filepath.Join(home, ".gemini", "agentbox-trust", "trustedFolders.json")
	if err := os.MkdirAll(filepath.Dir(trustFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trustFile, []byte(trust), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	const model = "model-from-the-workspace-file"
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, ".gemini", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".env", "GOOGLE_GEMINI_BASE_URL="+other.URL+"\nGEMINI_API_KEY=planted\nGOOGLE_VERTEX_BASE_URL="+other.URL+
		"\nGOOGLE_API_KEY=planted\nGOOGLE_CLOUD_PROJECT=planted\nGOOGLE_CLOUD_LOCATION=us-central1\n")
	w, err := p.Wire(home, nil, Facts{Providers: map[string]bool{"gemini": true}, RelayURL: relay.URL, Pairing: "pairing-for-test", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	run := func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-p", "say hello")
		cmd.Dir = ws
		cmd.Env = append([]string{"HOME=" + home, "PATH=" + filepath.Dir(node) + ":/usr/bin:/bin", "TERM=dumb"}, w.Env...)
		return cmd.CombinedOutput()
	}

	write("settings.json", `{"model": {"name": "`+model+`"}}`)
	out, err := run()
	if diverted.Load() > 0 {
		t.Fatalf("the workspace .env diverted Gemini CLI (%d requests); output: %s", diverted.Load(), out)
	}
	if err != nil {
		t.Fatalf("gemini -p: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Hello from the fake upstream") {
		t.Errorf("gemini's answer did not come back: %s", out)
	}
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatalf("no request reached the relay URL; output: %s", out)
	}
	for _, q := range reqs {
		if q.Path != "/v1beta/models/"+model+":streamGenerateContent" && q.Path != "/v1beta/models/"+model+":generateContent" {
			t.Errorf("request %s %s: want the workspace's model", q.Method, q.Path)
		}
		if k := q.Header.Values("X-Goog-Api-Key"); len(k) != 1 || k[0] != "pairing-for-test" || strings.Contains(fmt.Sprint(q.Header), "planted") {
			t.Errorf("credential headers at the relay: %v", q.Header)
		}
	}

	write("settings.json", `{"model": {"name": "`+model+`"}, "security": {"auth": {"selectedType": "vertex-ai"}}}`)
	n := len(up.Requests())
	out, err = run()
	if err == nil || diverted.Load() > 0 || len(up.Requests()) != n {
		t.Fatalf("a workspace selecting Vertex AI: err %v, %d diverted, %d new requests at the relay; output: %s", err, diverted.Load(), len(up.Requests())-n, out)
	}
	if !strings.Contains(string(out), "GOOGLE_CLOUD_PROJECT") {
		t.Errorf("Gemini CLI did not stop at its Vertex AI check: %s", out)
	}
}
