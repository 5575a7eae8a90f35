// Package attack holds the attempts to break out of a box: each one is a small in-box program
// (run through `agentbox attack-probe`) plus the host-side targets it aims at and the host-side
// check of what it left behind. The end-to-end suite and `agentbox selftest` run the same
// attempts from this one registry.
package attack

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ProbeCommand is the hidden agentbox entry that runs attempts inside a box (see ProbeMain).
const ProbeCommand = "attack-probe"

// ErrNotSupported is returned on platforms without boxes.
var ErrNotSupported = errors.New("attack probes are not supported on this platform")

// ErrSkipped is returned by Verdict for an attempt that could not run here (its target could
// not be set up, or the kernel lacks what it needs even outside a box).
var ErrSkipped = errors.New("attempt skipped")

// Categories of attempts.
const (
	CategoryFilesystem = "filesystem"
	CategorySecrets    = "secrets"
	CategoryNetwork    = "network"
	CategoryProcess    = "process"
	CategoryTerminal   = "terminal"
	CategoryKernel     = "kernel"
	CategoryCleanup    = "cleanup"
)

// Attempt is one way of trying to break the box. Run executes inside the box, as the boxed
// program; Check, when set, runs on the host after the box has ended and looks for what a
// successful attempt would have left there (a file, a connection, a dead process).
type Attempt struct {
	Name     string // stable, used on the probe's command line and as the test name
	Category string
	// Expect says what must happen for the box to hold.
	Expect string
	// Needs names the Targets field the attempt cannot run without ("" means none); see
	// Targets.Missing.
	Needs string
	Run   func(c *Context) Observation
	Check func(h *Host, o Observation) error
	// Prepare, when set, runs on the host before the box starts and fills the attempt's
	// workspace with what it aims at (a git repository, agent settings). Without it the
	// attempt still runs, against what the workspace holds (protected paths that are absent
	// get placeholders).
	Prepare func(workspace string) error
}

// Observation is what an attempt saw from inside the box.
type Observation struct {
	Attempt string `json:"attempt"`
	// Blocked is true when every try of the attempt was refused.
	Blocked bool `json:"blocked"`
	// Evidence lists each try and its result, for people.
	Evidence []string `json:"evidence"`
	// Facts are values the host-side check needs (a namespace inode, a pid).
	Facts map[string]string `json:"facts,omitempty"`
	// Skipped says why the attempt did not run (its target is missing); "" means it ran.
	Skipped string `json:"skipped,omitempty"`
}

// Targets describes the host-side targets to the in-box probe. It travels on the probe's
// command line, so it holds no secret: only paths, addresses, pids and the fake secrets'
// marker.
type Targets struct {
	Home       string `json:"home"`       // the host $HOME the box was launched with
	Workspace  string `json:"workspace"`  // the box's workspace (same path inside)
	RuntimeDir string `json:"runtimeDir"` // agentbox's host runtime dir (API socket, launch dirs)
	// SecretFiles are host files (under Home, or /root when run by root) holding a fake
	// secret that starts with SecretMarker.
	SecretFiles  []string `json:"secretFiles,omitempty"`
	SecretMarker string   `json:"secretMarker"`
	// SecretEnv names the variables set to fake secrets in the client's environment.
	SecretEnv []string `json:"secretEnv,omitempty"`
	// OutsideDirs are host directories outside the workspace; a file appearing in one is a
	// breach.
	OutsideDirs []string `json:"outsideDirs,omitempty"`
	TCP         string   `json:"tcp,omitempty"`        // a host listener on 127.0.0.1
	Netns       string   `json:"netns,omitempty"`      // a listener in a namespace behind a veth pair
	Abstract    string   `json:"abstract,omitempty"`   // a host abstract unix socket (name without '@')
	PathSocket  string   `json:"pathSocket,omitempty"` // a host pathname socket under $XDG_RUNTIME_DIR
	HostPid     int      `json:"hostPid,omitempty"`    // a host process the box must not signal
	// Inject is what the terminal attempt tries to push into its terminal's input.
	Inject string `json:"inject,omitempty"`
	UDP    string `json:"udp,omitempty"`  // a host UDP socket on 127.0.0.1 that counts datagrams
	TCP6   string `json:"tcp6,omitempty"` // a host listener on [::1]
	// SysVKey is the key of a host SysV shared memory segment, message queue and semaphore set.
	SysVKey int `json:"sysvKey,omitempty"`
	// PosixShm is a host file under /dev/shm holding the secret marker.
	PosixShm string `json:"posixShm,omitempty"`
	// CallerTTY is the terminal of the process that launched the box ("" when it had none).
	CallerTTY string `json:"callerTTY,omitempty"`
	// RevokedPairing is the pairing of a session revoked before the box started: worthless
	// by design, so it may travel on the command line.
	RevokedPairing string `json:"revokedPairing,omitempty"`
	// ForeignPairing is the pairing of a live session made by hand (not this launch's); it is
	// revoked when the host targets are closed.
	ForeignPairing string `json:"foreignPairing,omitempty"`
	// Unavailable says, by field name, why a target could not be set up.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// Missing returns why the target an attempt needs is absent, or "".
func (t *Targets) Missing(a Attempt) string {
	if a.Needs == "" {
		return ""
	}
	var have bool
	switch a.Needs {
	case "tcp":
		have = t.TCP != ""
	case "netns":
		have = t.Netns != ""
	case "abstract":
		have = t.Abstract != ""
	case "pathSocket":
		have = t.PathSocket != ""
	case "hostPid":
		have = t.HostPid != 0
	case "udp":
		have = t.UDP != ""
	case "tcp6":
		have = t.TCP6 != ""
	case "sysv":
		have = t.SysVKey != 0
	case "posixShm":
		have = t.PosixShm != ""
	case "revokedPairing":
		have = t.RevokedPairing != ""
	case "foreignPairing":
		have = t.ForeignPairing != ""
	default:
		return "unknown target " + a.Needs
	}
	if have {
		return ""
	}
	if why := t.Unavailable[a.Needs]; why != "" {
		return why
	}
	return "target " + a.Needs + " was not set up"
}

// All returns every attempt, in a stable order.
func All() []Attempt { return append([]Attempt(nil), attempts...) }

// Lookup returns the named attempt.
func Lookup(name string) (Attempt, bool) {
	for _, a := range attempts {
		if a.Name == name {
			return a, true
		}
	}
	return Attempt{}, false
}

// ProbeArgs returns the arguments that make the agentbox binary run the named attempts in a
// box: `agentbox run /path/to/agentbox -- <ProbeArgs…>`.
func ProbeArgs(t Targets, names ...string) ([]string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	args := []string{ProbeCommand, "-targets", base64.RawURLEncoding.EncodeToString(b)}
	return append(args, names...), nil
}

// DecodeTargets decodes the -targets argument of the probe.
func DecodeTargets(s string) (Targets, error) {
	var t Targets
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return t, fmt.Errorf("targets: %w", err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("targets: %w", err)
	}
	return t, nil
}

// reportPrefix starts every observation line the probe prints, so that a report can be found
// in output the program shares with a terminal.
const reportPrefix = "agentbox-attack: "

// FormatObservation returns o as one report line.
func FormatObservation(o Observation) string {
	b, _ := json.Marshal(o)
	return reportPrefix + string(b) + "\n"
}

// ParseReport returns the observations in a probe's output, by attempt name.
func ParseReport(out []byte) (map[string]Observation, error) {
	obs := map[string]Observation{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		i := strings.Index(line, reportPrefix)
		if i < 0 {
			continue
		}
		var o Observation
		if err := json.Unmarshal([]byte(line[i+len(reportPrefix):]), &o); err != nil {
			return nil, fmt.Errorf("report line %q: %w", line, err)
		}
		obs[o.Attempt] = o
	}
	return obs, sc.Err()
}

// Verdict returns nil when the box held against the attempt: the probe saw every try refused
// and the host-side check found nothing left behind.
func (a Attempt) Verdict(h *Host, o Observation) error {
	var errs []error
	if o.Attempt != a.Name {
		return fmt.Errorf("%s: no observation from the box", a.Name)
	}
	if o.Skipped != "" {
		return fmt.Errorf("%w: %s: %s", ErrSkipped, a.Name, o.Skipped)
	}
	if !o.Blocked {
		errs = append(errs, fmt.Errorf("%s: the box did not refuse it (expected: %s):\n  %s", a.Name, a.Expect, strings.Join(o.Evidence, "\n  ")))
	}
	if a.Check != nil && h != nil {
		if err := a.Check(h, o); err != nil {
			errs = append(errs, fmt.Errorf("%s: host-side check: %w", a.Name, err))
		}
	}
	return errors.Join(errs...)
}
