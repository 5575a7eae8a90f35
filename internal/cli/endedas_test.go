package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/safesocket"
)

// TestEndedAsAfterShimGone: a client that finds the shim of its launch gone (a box that failed
// at once, its launch directory removed before the client reached it) reports the end the
// daemon recorded — the refusal's reason, or the program's exit code — not "box shim is gone"
// (CI under load, e2e TestAttackSymlinkedHarnessEntry).
func TestEndedAsAfterShimGone(t *testing.T) {
	code := 3
	records := map[string]api.Launch{
		"refused": {ID: "refused", State: api.StateFailed, Error: &api.Error{Code: "box_setup_failed", Message: "a symlink there leads out of the home"}},
		"exited":  {ID: "exited", State: api.StateExited, ExitCode: &code},
		"running": {ID: "running", State: api.StateRunning},
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agentbox.sock")
	ln, err := safesocket.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Path[len(api.RouteLaunch):]
		if r.URL.Query().Get(api.QueryWait) != api.WaitEnded {
			http.Error(w, "want a wait for the end", http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(records[id])
	})}
	go srv.Serve(ln)
	defer srv.Close()
	c := client.NewAt(sock)
	gone := console.ErrShimGone

	var ae *api.Error
	if err := endedAs(context.Background(), c, "refused", gone); !errors.As(err, &ae) || ae.Message != records["refused"].Error.Message {
		t.Errorf("refused launch: %v; want the record's error", err)
	}
	var ee ExitError
	if err := endedAs(context.Background(), c, "exited", gone); !errors.As(err, &ee) || ee.Code != 3 {
		t.Errorf("exited launch: %v; want exit status 3", err)
	}
	if err := endedAs(context.Background(), c, "running", gone); !errors.Is(err, gone) {
		t.Errorf("running launch: %v; want the shim's error kept", err)
	}
	if err := endedAs(context.Background(), client.NewAt(filepath.Join(t.TempDir(), "none")), "refused", gone); !errors.Is(err, gone) {
		t.Errorf("no daemon: %v; want the shim's error kept", err)
	}
}
