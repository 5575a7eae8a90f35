package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "serve-helper" {
		os.Exit(serveHelper(os.Args[2]))
	}
	os.Exit(m.Run())
}

// serveHelper serves a daemon's info on path (any request), says so on stdout, until killed.
func serveHelper(path string) int {
	ln := testenv.Announce(path)
	if ln == nil {
		return 1
	}
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"version":"test","socket":"` + path + `"}`))
	}))
	return 1
}

// TestRoundTrip: a request goes out and its answer comes back on a connection of its own; an
// error answer comes back typed; a cancelled context ends a request the daemon does not answer.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	sock := filepath.Join(dir, "agentbox.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o600)
	hang := make(chan struct{})
	defer close(hang)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case api.RouteInfo:
			if r.Header.Get("Connection") != "close" {
				http.Error(w, "want one request per connection", http.StatusBadRequest)
				return
			}
			w.Write([]byte(`{"version":"v-test"}`))
		case api.RouteLaunches:
			<-hang
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no such thing"}}`))
		}
	}))
	c := NewAt(sock)
	info, err := c.Info(context.Background())
	if err != nil || info.Version != "v-test" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	var ae *api.Error
	if _, err := c.Get(context.Background(), "abcdef"); !errors.As(err, &ae) || ae.Code != "not_found" {
		t.Fatalf("Get of a missing launch = %v, want the typed not_found", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Launches(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request the daemon never answers: %v, want the context's deadline", err)
	}
	ln.Close()
	if _, err := c.Info(context.Background()); !errors.Is(err, ErrDaemonUnreachable) {
		t.Fatalf("no daemon: %v, want ErrDaemonUnreachable", err)
	}
}

// TestRefusesDaemonOfAnotherUser: a socket that looks like ours (our directory, our file) but
// on which another user's process listens is refused (SO_PEERCRED): nothing is sent to it.
func TestRefusesDaemonOfAnotherUser(t *testing.T) {
	base := testenv.ListenAsOtherUser(t, "agentbox.sock", "serve-helper")
	sock := filepath.Join(base, "agentbox.sock")
	os.Chown(sock, 0, 0)
	os.Chmod(sock, 0o600)
	os.Chmod(base, 0o700)
	_, err := NewAt(sock).Info(context.Background())
	if err == nil || !strings.Contains(err.Error(), "runs as uid 1001") {
		t.Fatalf("Info from another user's daemon = %v, want refused naming uid 1001", err)
	}
}
