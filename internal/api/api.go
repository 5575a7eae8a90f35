// Package api holds the wire types of the local API, its routes and the mapping between error
// classes, HTTP status codes and stable error codes.
package api

import "time"

// Prefix is the versioned prefix of every route.
const Prefix = "/v0/"

// Routes of the local API.
const (
	RouteLaunches = "/v0/launches"  // GET list, POST create
	RouteLaunch   = "/v0/launches/" // GET /v0/launches/{id}, POST /v0/launches/{id}/stop
	RouteInfo     = "/v0/info"      // GET
	RouteConfig   = "/v0/config"    // GET effective config with sources
)

// LaunchRequest asks the daemon to start a program in a box.
type LaunchRequest struct {
	// Program is the name or path the user typed; Path is the client's resolution of it on its
	// PATH (absolute). The daemon re-checks Path.
	Program   string   `json:"program"`
	Path      string   `json:"path"`
	Args      []string `json:"args"`
	Workspace string   `json:"workspace"`
	Cwd       string   `json:"cwd,omitempty"`
	// Env is the client's environment; the plan keeps only allowlisted keys.
	Env []string `json:"env,omitempty"`
	// TTY asks for a PTY (the client's stdin and stdout are terminals).
	TTY bool `json:"tty"`
	// Detach starts the box without a client: no stdin, output kept in the launch's log.
	Detach bool `json:"detach"`
	// Egress overrides the configured egress mode ("deny" | "allow"); "" keeps the config's.
	Egress string `json:"egress,omitempty"`
}

// LaunchResponse answers a LaunchRequest.
type LaunchResponse struct {
	ID string `json:"id"`
	// ShimSocket is the unix socket the client attaches to for the console (attached launches).
	ShimSocket string `json:"shimSocket"`
}

// Launch states.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateExited   = "exited"
	StateFailed   = "failed" // never reached the program: see Error
	StateLost     = "lost"   // the shim vanished without a status
)

// Launch is one launch as the store and `agentbox launches` see it.
type Launch struct {
	ID        string    `json:"id"`
	Program   string    `json:"program"`
	Args      []string  `json:"args,omitempty"`
	Profile   string    `json:"profile"`
	Workspace string    `json:"workspace"`
	Engine    string    `json:"engine"`
	State     string    `json:"state"`
	Detached  bool      `json:"detached"`
	ShimPid   int       `json:"shimPid,omitempty"`
	BoxPid    int       `json:"boxPid,omitempty"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitempty"`
	// ExitCode is the program's own exit code (128+n for a signal); nil while running or failed.
	ExitCode *int `json:"exitCode,omitempty"`
	// Settled is true once no process of the box remains (verified).
	Settled bool   `json:"settled"`
	Error   *Error `json:"error,omitempty"`
}

// Info describes the daemon.
type Info struct {
	Version     string            `json:"version"`
	Engine      string            `json:"engine"`
	Socket      string            `json:"socket"`
	Pid         int               `json:"pid"`
	UID         int               `json:"uid"`
	Kernel      map[string]string `json:"kernel"` // kernel features seen: release, landlockABI, userns, …
	Launches    int               `json:"launches"`
	RuntimeDir  string            `json:"runtimeDir"`
	StateDir    string            `json:"stateDir"`
	ConfigFiles []string          `json:"configFiles,omitempty"`
	// ConfigError is the reason the current config files were refused (the daemon keeps its
	// last good configuration); "" when they are valid.
	ConfigError string `json:"configError,omitempty"`
}

// Error is the body of every non-2xx answer: {"error": {...}}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Message + " (" + e.Hint + ")"
	}
	return e.Message
}

// ErrorBody wraps Error on the wire.
type ErrorBody struct {
	Error *Error `json:"error"`
}
