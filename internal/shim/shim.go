// Package shim is the per-box supervisor process: it starts the box through its engine, holds the
// console and the exit status, and outlives daemon restarts. It also holds the client the daemon
// uses to start and watch shims.
package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
)

// Defaults for zero Config fields.
const (
	DefaultStopGrace     = 10 * time.Second
	DefaultAttachTimeout = 30 * time.Second
)

// Codes of failures the shim itself reports in Status.Error (start-up failures of the box use
// the engine's codes, engine.Code*); the strings are api's table.
const (
	// CodeAttachTimeout: an attached launch saw no client within Config.AttachTimeout; the box
	// was never started.
	CodeAttachTimeout = api.CodeAttachTimeout
	// CodeStoppedBeforeStart: a stop request arrived before the box was started.
	CodeStoppedBeforeStart = api.CodeStoppedBeforeStart
	// CodeBoxLost: the box ended before its program was exec'd without saying why.
	CodeBoxLost = api.CodeBoxExitedBeforeExec
	// CodeForbidden: the peer of a shim-socket connection was refused.
	CodeForbidden = api.CodeForbidden
	// CodeDetached: attach to a detached launch without a console (started with -d not from
	// a terminal).
	CodeDetached = api.CodeLaunchDetached
	// CodeBadHello: the first line was not a hello the shim understands.
	CodeBadHello = api.CodeBadRequest
)

// Config is the shim's configuration, L/shim.json, written by the daemon. Its zero value is not
// usable: LaunchID and Engine are required.
type Config struct {
	// LaunchID is the launch's id (32 hex characters).
	LaunchID string `json:"launchID"`
	// Engine names the registered engine that starts the box (engine.Get).
	Engine string `json:"engine"`
	// Console is the console mode; "" means plan.ConsolePipe.
	Console plan.Console `json:"console,omitempty"`
	// Detached starts the box at once, without waiting for a client; false waits for the
	// first attach client before starting the box. A detached pipe-mode launch has no console:
	// stdin /dev/null, output appended to L/output.log, attach refused (CodeDetached). A
	// detached tty launch keeps its console: clients attach and detach at will, and the
	// program's output goes to L/output.log while none is attached.
	Detached bool `json:"detached,omitempty"`
	// Size is the PTY's size until a client attaches with its own (a detached tty launch
	// started from a terminal passes that terminal's); zero leaves the engine's default.
	Size console.WindowSize `json:"size,omitzero"`
	// StopGrace is how long a stop waits after SIGTERM before SIGKILL of the box's top process;
	// 0 means DefaultStopGrace. JSON: nanoseconds.
	StopGrace time.Duration `json:"stopGrace,omitempty"`
	// AttachTimeout is how long an attached launch waits for its first client; 0 means
	// DefaultAttachTimeout. JSON: nanoseconds.
	AttachTimeout time.Duration `json:"attachTimeout,omitempty"`
	// Clipboard is console.clipboard: "" or "deny" drops clipboard escape sequences (OSC 52) from
	// the program's output; "allow" passes them.
	Clipboard string `json:"clipboard,omitempty"`
}

// Validate reports whether c is usable.
func (c *Config) Validate() error {
	switch {
	case c.LaunchID == "":
		return errors.New("shim config: empty launchID")
	case c.Engine == "":
		return errors.New("shim config: empty engine")
	case c.Console != "" && c.Console != plan.ConsoleTTY && c.Console != plan.ConsolePipe:
		return fmt.Errorf("shim config: console %q is not tty or pipe", c.Console)
	case c.Clipboard != "" && c.Clipboard != console.ClipboardDeny && c.Clipboard != console.ClipboardAllow:
		return fmt.Errorf("shim config: clipboard %q is not deny or allow", c.Clipboard)
	case c.StopGrace < 0 || c.AttachTimeout < 0:
		return errors.New("shim config: negative duration")
	}
	return nil
}

func (c *Config) console() plan.Console {
	if c.Console == "" {
		return plan.ConsolePipe
	}
	return c.Console
}

// WriteConfig writes c to L/shim.json (0600), refusing to replace an existing file.
func WriteConfig(launchDir string, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(launchDir, launchdir.ShimConfigFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write shim config: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write shim config: %w", err)
	}
	return f.Close()
}

// ReadConfig reads and validates L/shim.json; unknown fields are refused.
func ReadConfig(launchDir string) (Config, error) {
	var c Config
	b, err := os.ReadFile(filepath.Join(launchDir, launchdir.ShimConfigFile))
	if err != nil {
		return c, fmt.Errorf("read shim config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("decode %s: %w", launchdir.ShimConfigFile, err)
	}
	return c, c.Validate()
}

// Status is a launch's status as the shim knows it: live over the socket (status and watch
// roles), and final in L/status.json.
type Status struct {
	LaunchID string `json:"launchID"`
	// State is api.StateStarting (box not started, or program not exec'd yet), api.StateRunning
	// (the program was exec'd), api.StateExited (the program ran and ended: ExitCode is set) or
	// api.StateFailed (the program never ran: Error says why).
	State string `json:"state"`
	// ExitCode is the program's own exit code, 128+n when signal n killed it; nil unless exited.
	ExitCode *int `json:"exitCode,omitempty"`
	// Execd is true once the box reported that the program was exec'd.
	Execd bool `json:"execd"`
	// ProgramPid is the program's pid inside the box's pid namespace (0 until exec'd).
	ProgramPid int `json:"programPid,omitempty"`
	// Error is the typed start-up failure when State is failed (engine codes, or the shim's).
	Error *api.Error `json:"error,omitempty"`
	// BoxPid is the host pid of the box's top process (0 before the box started).
	BoxPid  int `json:"boxPid,omitempty"`
	ShimPid int `json:"shimPid"`
	// Namespaces are the inode numbers of the box's namespaces ("pid", "user", "mnt", "net",
	// "ipc", "uts", "cgroup"), read from /proc/<boxPid>/ns right after the start.
	Namespaces map[string]uint64 `json:"namespaces,omitempty"`
	// Settled is true once no process of the box remains (verified by scanning /proc for the
	// box's pid namespace), or when the box never started.
	Settled bool `json:"settled"`
	// Stopped is true when the launch ended because of a stop request.
	Stopped bool      `json:"stopped,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Final reports whether s is the status of an ended launch.
func (s *Status) Final() bool {
	return s.State == api.StateExited || s.State == api.StateFailed
}

// ReadStatus reads L/status.json, the final status the shim wrote when the launch ended. A
// launch that has not ended (or whose shim died first) gives an error wrapping os.ErrNotExist.
func ReadStatus(launchDir string) (*Status, error) {
	b, err := os.ReadFile(filepath.Join(launchDir, launchdir.StatusFile))
	if err != nil {
		return nil, fmt.Errorf("read launch status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode %s: %w", launchdir.StatusFile, err)
	}
	return &s, nil
}

// Kinds of watch events (Event.Kind).
const (
	// EventStatus is the first event of every watch: the status when the watch began.
	EventStatus = "status"
	// EventStarted: the box started (BoxPid and Namespaces are known).
	EventStarted = "started"
	// EventExec: the program was exec'd.
	EventExec = "exec"
	// EventExit: the launch ended; Status is final (and already in L/status.json). Last event.
	EventExit = "exit"
)

// Event is one line the shim sends a watcher.
type Event struct {
	Kind   string `json:"event"`
	Status Status `json:"status"`
}

// Requests a watcher can send (Request.Op).
const (
	// OpStop stops the box: SIGTERM to its top process, SIGKILL after Config.StopGrace. Before
	// the box started, the launch ends as failed (CodeStoppedBeforeStart).
	OpStop = "stop"
	// OpSignal sends Request.Signal to the box's top process, which forwards it to the program.
	OpSignal = "signal"
)

// Request is one line a watcher sends the shim.
type Request struct {
	Op     string `json:"op"`
	Signal int    `json:"signal,omitempty"`
}

// spareArg is the argument of a spare shim (see Spare): it waits for its launch directory.
const spareArg = "-spare"
