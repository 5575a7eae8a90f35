// Package client is the typed client of agentbox's local API: it checks who owns the socket
// before every request and maps error answers back to typed errors.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/safesocket"
)

// ErrDaemonUnreachable means no daemon answers on the socket.
var ErrDaemonUnreachable = errors.New("agentbox daemon is not running")

// Client talks to the daemon of the calling user. The zero value is not usable: use New.
type Client struct {
	// Socket is the path of the daemon's API socket.
	Socket string
}

// SocketPath returns the API socket path of the calling user.
func SocketPath() (string, error) {
	dir, err := safesocket.RuntimeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "agentbox.sock"), nil
}

// New returns a client for the calling user's daemon.
func New() (*Client, error) {
	sock, err := SocketPath()
	if err != nil {
		return nil, err
	}
	return NewAt(sock), nil
}

// NewAt returns a client for the daemon listening at sock.
func NewAt(sock string) *Client {
	return &Client{Socket: sock}
}

// roundTrip sends req on a connection of its own to the daemon and returns the answer, whose
// body reads from that connection (closing the body closes it). One request per connection,
// written and read on the caller's goroutine: net/http's Transport would hand the request and
// the answer between three goroutines, which costs a launch more than the exchange itself.
// The daemon must run as the caller's uid (SO_PEERCRED), as the socket's owner does.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if uc, ok := conn.(*net.UnixConn); ok {
		_, uid, _, err := safesocket.PeerCred(uc)
		switch {
		case err == nil && uid != os.Getuid():
			return fail(fmt.Errorf("the daemon at %s runs as uid %d, not as you (uid %d): refused", c.Socket, uid, os.Getuid()))
		case err != nil && !errors.Is(err, safesocket.ErrNotSupported):
			return fail(err)
		}
	}
	req.Close = true // one request per connection
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fail(err)
	}
	resp.Body = &connBody{ReadCloser: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// connBody is an answer's body that closes its connection when it is closed.
type connBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *connBody) Close() error {
	b.stop()
	b.ReadCloser.Close()
	return b.conn.Close()
}

// Check verifies that the socket and its directory belong to the caller.
func (c *Client) Check() error {
	if err := safesocket.CheckOwner(filepath.Dir(c.Socket), true); err != nil {
		return err
	}
	return safesocket.CheckOwner(c.Socket, false)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if err := c.Check(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w (no socket at %s)", ErrDaemonUnreachable, c.Socket)
		}
		return err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agentbox"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.roundTrip(ctx, req)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Errorf("%w (%v)", ErrDaemonUnreachable, opErr.Err)
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
			return eb.Error
		}
		return &api.Error{Code: api.CodeInternal, Message: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// Ping reports whether the daemon answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Info(ctx)
	return err
}

// Info returns the daemon's description of itself (nil with an error).
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var info api.Info
	if err := c.do(ctx, http.MethodGet, api.RouteInfo, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Readiness returns whether the daemon admits launches, with the facts of its last probe (nil
// with an error).
func (c *Client) Readiness(ctx context.Context) (*api.Readiness, error) {
	var r api.Readiness
	if err := c.do(ctx, http.MethodGet, api.RouteReadiness, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Launch asks the daemon to start a box.
func (c *Client) Launch(ctx context.Context, req *api.LaunchRequest) (*api.LaunchResponse, error) {
	var resp api.LaunchResponse
	return &resp, c.do(ctx, http.MethodPost, api.RouteLaunches, req, &resp)
}

// Launches lists every launch, newest first.
func (c *Client) Launches(ctx context.Context) ([]api.Launch, error) {
	return c.ListLaunches(ctx, LaunchQuery{})
}

// LaunchQuery selects launches; its zero value selects every launch.
type LaunchQuery struct {
	// Limit caps the number listed (newest first); 0 means no cap.
	Limit int
	// States keeps launches in these states (api.States); nil means any.
	States []string
	// HideProbes drops the launches of agentbox's escape probe (selftest).
	HideProbes bool
}

// ListLaunches lists the launches q selects, newest first.
func (c *Client) ListLaunches(ctx context.Context, q LaunchQuery) ([]api.Launch, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set(api.QueryLimit, strconv.Itoa(q.Limit))
	}
	if len(q.States) > 0 {
		v.Set(api.QueryState, strings.Join(q.States, ","))
	}
	if q.HideProbes {
		v.Set(api.QueryHideProbes, "1")
	}
	path := api.RouteLaunches
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var ls []api.Launch
	if err := c.do(ctx, http.MethodGet, path, nil, &ls); err != nil {
		return nil, err
	}
	return ls, nil
}

// Prune deletes the records of launches that ended more than olderThan ago (0: every ended
// launch).
func (c *Client) Prune(ctx context.Context, olderThan time.Duration) (*api.PruneResult, error) {
	var r api.PruneResult
	if err := c.do(ctx, http.MethodPost, api.RoutePrune, api.PruneRequest{OlderThan: olderThan}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Get returns one launch; id may be a unique prefix.
func (c *Client) Get(ctx context.Context, id string) (*api.Launch, error) {
	var l api.Launch
	return &l, c.do(ctx, http.MethodGet, api.RouteLaunch+url.PathEscape(id), nil, &l)
}

// WaitEnded returns launch id once the daemon has settled its end (api.WaitEnded), or as it
// is after api.MaxEndWait; a daemon from before api.QueryWait answers at once.
func (c *Client) WaitEnded(ctx context.Context, id string) (*api.Launch, error) {
	var l api.Launch
	return &l, c.do(ctx, http.MethodGet, api.RouteLaunch+url.PathEscape(id)+"?"+api.QueryWait+"="+api.WaitEnded, nil, &l)
}

// Stop stops a launch's box (its whole tree) and waits until it has settled.
func (c *Client) Stop(ctx context.Context, id string) (*api.Launch, error) {
	var l api.Launch
	return &l, c.do(ctx, http.MethodPost, api.RouteLaunch+url.PathEscape(id)+"/stop", nil, &l)
}

// Config returns the daemon's effective configuration, each value with its source.
func (c *Client) Config(ctx context.Context) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, api.RouteConfig, nil, &raw)
}

// WaitReady polls until the daemon answers or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		err := c.Ping(ctx)
		// A starting daemon's socket exists for a moment before it is made 0600 (its
		// directory is 0700, so nobody else can reach it): keep waiting, not failing.
		if err == nil || !errors.Is(err, ErrDaemonUnreachable) && !errors.Is(err, safesocket.ErrBadMode) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: gave up waiting: %v", ErrDaemonUnreachable, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Console returns the console socket of a running launch and the detach keys, for `agentbox
// attach`.
func (c *Client) Console(ctx context.Context, id string) (*api.LaunchResponse, error) {
	var resp api.LaunchResponse
	if err := c.do(ctx, http.MethodGet, api.RouteLaunch+url.PathEscape(id)+"/console", nil, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// CreateSession creates a session by hand; the answer is the only time its pairing is shown.
func (c *Client) CreateSession(ctx context.Context, clientID string) (*api.SessionCreated, error) {
	var s api.SessionCreated
	return &s, c.do(ctx, http.MethodPost, "/v0/sessions", api.SessionRequest{ClientID: clientID}, &s)
}

// Sessions lists the live sessions (never their pairings).
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var ss []api.Session
	return ss, c.do(ctx, http.MethodGet, "/v0/sessions", nil, &ss)
}

// RevokeSession revokes a session: its next request is refused and its requests in flight end.
func (c *Client) RevokeSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v0/sessions/"+url.PathEscape(id), nil, nil)
}

// RevokeLaunch revokes a launch's session; the box keeps running without relay access.
func (c *Client) RevokeLaunch(ctx context.Context, id string) (*api.Session, error) {
	var s api.Session
	return &s, c.do(ctx, http.MethodPost, api.RouteLaunch+url.PathEscape(id)+"/revoke", nil, &s)
}

// Violations returns wrap mode's violation scanner: posture, counts and recent violations.
func (c *Client) Violations(ctx context.Context) (*api.Violations, error) {
	var v api.Violations
	return &v, c.do(ctx, http.MethodGet, api.RouteViolations, nil, &v)
}

// ScanViolations asks the daemon to scan for native runs of managed programs now; Found lists
// what this scan recorded.
func (c *Client) ScanViolations(ctx context.Context) (*api.Violations, error) {
	var v api.Violations
	return &v, c.do(ctx, http.MethodPost, api.RouteViolationsScan, nil, &v)
}

// Changes returns a launch's proposed changes, each as a diff against the host's path now.
func (c *Client) Changes(ctx context.Context, id string) (*api.Changes, error) {
	var out api.Changes
	return &out, c.do(ctx, http.MethodGet, api.RouteLaunch+url.PathEscape(id)+"/changes", nil, &out)
}

// Apply applies a launch's proposed changes on the host (all of them when paths is empty).
func (c *Client) Apply(ctx context.Context, id string, paths []string) (*api.ApplyResult, error) {
	var out api.ApplyResult
	return &out, c.do(ctx, http.MethodPost, api.RouteLaunch+url.PathEscape(id)+"/apply", &api.ApplyRequest{Paths: paths}, &out)
}
