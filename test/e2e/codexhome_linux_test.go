package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// TestCodexHostHomeWritesNoDrift: the host's own Codex writes its ~/.codex while a box of Codex
// runs (the stock codex 0.171.0 leaves a background app server, `codex app-server
// --managed-daemon`, which keeps writing its logs there). The box's integrity watch covers
// ~/.codex (the folder of the host's ~/.codex/AGENTS.md, bound read-only and watched), but
// nothing in it is the workspace's: the launch records no drift and announces no alert, and the
// host's files stay where they are. Before, every file the host wrote there was taken for
// Codex's project configuration (.codex/), reported created and modified, and at exit removed,
// and the watch tried to move it aside (84 alerts for one `agentbox run codex`, seen by hand).
// The host's writes happen while the upstream holds its answer back, so inside the launch.
func TestCodexHostHomeWritesNoDrift(t *testing.T) {
	t.Parallel() // its own daemon and upstream; mostly waits (parallelTests)
	e, _ := agentEnv(t, "codex")
	hostCodex := filepath.Join(e.Home, ".codex")
	if err := os.MkdirAll(hostCodex, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostCodex, "AGENTS.md"), []byte("Be brief.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostFiles := []string{"logs_2.sqlite-wal", "history.jsonl", "config.toml"}
	up := llmtest.NewOpenAI(llmtest.Options{BeforeReply: func(ctx context.Context, r llmtest.Request) error {
		// The host's Codex, while the box's waits for its answer.
		for _, f := range hostFiles {
			if err := os.WriteFile(filepath.Join(hostCodex, f), []byte(time.Now().String()+"\n"), 0o600); err != nil {
				return err
			}
		}
		time.Sleep(time.Second) // the watch's events come within its debounce (50 ms)
		return nil
	}})
	defer up.Close()
	useGateway(t, e, "openai", up.URL, "")

	r := e.Run("", "run", "codex", "--", "exec", "--skip-git-repo-check", "say hello")
	if r.Code != 0 || !strings.Contains(r.Stdout, "Hello from the fake upstream") {
		t.Fatalf("agentbox run codex: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if len(up.Requests()) == 0 {
		t.Fatal("the upstream saw no request: the host wrote nothing while the box ran")
	}
	if strings.Contains(r.Stderr, "integrity alert") {
		t.Errorf("the launch announced integrity alerts for the host's own files:\n%s", r.Stderr)
	}
	l := e.Run("", "launches", "--json", "--all")
	var launches []struct {
		ID          string            `json:"id"`
		Drift       bool              `json:"drift"`
		DriftEvents []json.RawMessage `json:"driftEvents"`
	}
	if err := json.Unmarshal([]byte(l.Stdout), &launches); err != nil || len(launches) == 0 {
		t.Fatalf("agentbox launches --json: %v\n%s\n%s", err, l.Stdout, l.Stderr)
	}
	for _, x := range launches {
		if x.Drift || len(x.DriftEvents) > 0 {
			t.Errorf("launch %s records drift: %s", x.ID, x.DriftEvents)
		}
	}
	for _, f := range append(hostFiles, "AGENTS.md") {
		if _, err := os.Lstat(filepath.Join(hostCodex, f)); err != nil {
			t.Errorf("the host's ~/.codex/%s: %v", f, err)
		}
	}
}
