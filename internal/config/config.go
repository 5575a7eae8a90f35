// Package config holds agentbox's typed configuration and system policy: strict decoding of the
// user's config.yaml and the admin's policy.yaml, validation, precedence (defaults < user <
// policy, a key set in the policy is locked) and the JSON Schema generated from the types.
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/profile"
)

// Config is agentbox's configuration. Its zero value is valid and means the defaults: every
// field says what its zero value means, so code that builds a Config by hand (tests, the
// readiness probe) need not call Defaults. Load returns a Config with every field explicit.
//
// Adding a key is adding a field: the decoder, the precedence rules, the sources shown by
// `agentbox config show` and the JSON Schema all follow the struct by reflection. The yaml
// name comes from the json tag; a struct-typed field is a nested mapping whose keys merge one
// by one, any other type (string, number, duration, list, map) is one value that a later layer
// replaces whole. A string may list its values with `jsonschema:"enum=a,enum=b"` and an integer
// its bounds with `jsonschema:"minimum=…,maximum=…"`, a duration its bounds with
// `duration:"min=…,max=…"` (Go durations); the decoder enforces them all.
type Config struct {
	// Engine is the mechanism that builds boxes. "" means native.
	Engine string `json:"engine,omitempty" jsonschema:"enum=native,enum=bwrap" jsonschema_description:"Mechanism that builds boxes: native (namespaces, Landlock, seccomp) or bwrap (bubblewrap)."`
	// Egress is the network mode of boxes. "" means deny.
	Egress string `json:"egress,omitempty" jsonschema:"enum=deny,enum=allow" jsonschema_description:"Network of boxes: deny (loopback only; traffic leaves through agentbox's brokers) or allow (host network, logged at every launch)."`
	// EgressAllow lists what boxes with egress deny may reach through the launch's egress
	// proxy (docs/egress.md): host[:port], *.domain[:port] or an IP address[:port]; no port
	// means 443 and 80. Nil means none: no proxy runs and boxes are unchanged.
	EgressAllow []string `json:"egressAllow,omitempty" jsonschema_description:"Hosts boxes may reach through the egress proxy (HTTPS_PROXY in the box): host[:port], *.domain[:port] or an IP address; no port means 443 and 80. Empty: no proxy. See docs/egress.md."`
	// Console configures the console relay between the box and the user's terminal.
	Console Console `json:"console,omitzero" jsonschema_description:"Console relay between the box and the user's terminal."`
	// StopGrace is how long a stopped box gets between SIGTERM and SIGKILL. Zero means 5s.
	StopGrace Duration `json:"stopGrace,omitempty" jsonschema_description:"Time a stopped box gets between SIGTERM and SIGKILL (Go duration: 5s, 1m30s)."`
	// Launches configures the records of launches (`agentbox launches`).
	Launches Launches `json:"launches,omitzero" jsonschema_description:"Records of launches (agentbox launches)."`
	// Audit configures the audit log (relay, git and egress rows).
	Audit Audit `json:"audit,omitzero" jsonschema_description:"Audit log of the brokers (relay, git and egress requests)."`
	// Sessions bounds the pairing sessions the daemon holds.
	Sessions Sessions `json:"sessions,omitzero" jsonschema_description:"Pairing sessions held by the daemon."`
	// Limits bounds what one box may hold in memory-backed file systems, and its processes.
	Limits Limits `json:"limits,omitzero" jsonschema_description:"Sizes of the memory-backed file systems (tmpfs) of each box, and its processes."`
	// Integrity configures the integrity watch of protected configuration.
	Integrity Integrity `json:"integrity,omitzero" jsonschema_description:"Integrity watch of the executable configuration each box must not change."`
	// Protect says how boxes present the workspace's protected paths.
	Protect Protect `json:"protect,omitzero" jsonschema_description:"How boxes present the workspace's protected paths."`
	// Programs are program profiles by ID, with the schema of the built-in ones (see
	// docs/profiles.md); an entry with a built-in's ID replaces it. Nil means the built-in
	// profiles only.
	Programs map[string]profile.Profile `json:"programs,omitempty" jsonschema_description:"Program profiles by id (the schema of the built-in ones); an entry with a built-in id replaces it."`
	// Models names the model of each program whose profile requires one (models.copilot,
	// models.opencode: provider/model). Nil means none: such a program is refused until set.
	Models map[string]string `json:"models,omitempty" jsonschema_description:"Model of each program whose profile requires one (copilot: a model id; opencode: provider/model)."`
	// Gateway configures the model gateways of the LLM relay (credentials stay host-side).
	Gateway Gateway `json:"gateway,omitzero" jsonschema_description:"Model gateways of the LLM relay; credentials stay on the host."`
	// Git configures the git relay and git over ssh.
	Git Git `json:"git,omitzero" jsonschema_description:"Git relay (allowlists, push policy, host-side credentials) and git over ssh."`
	// Managed are the locks `agentbox daemon --system` delivers into the agents' own managed
	// settings. Only the system policy may set them.
	Managed Managed `json:"managed,omitzero" jsonschema_description:"Locks delivered into the agents' managed settings by agentbox daemon --system (system policy only)."`
	// Containment is wrap mode: the managed programs and the violation posture
	// (containment.go). Only the system policy may set it.
	Containment Containment `json:"containment,omitzero" jsonschema_description:"Wrap mode: programs that run boxed by policy, and the posture towards native runs of them (system policy only)."`
}

// Integrity configures the integrity watch.
type Integrity struct {
	// Interval is how often a running box's integrity roots are verified (besides inotify
	// events and the box's exit). Zero means 60s. It is 1s to 24h: a shorter one had the
	// daemon verify without pause, a core's worth of CPU while a box ran (review 16, F8).
	Interval Duration `json:"interval,omitempty" duration:"min=1s,max=24h" jsonschema_description:"How often a running box's protected configuration is verified, besides on file events and at exit (Go duration from 1s to 24h: 60s, 5m)."`
}

// Protect says how boxes present the workspace's protected paths (docs/integrity.md).
type Protect struct {
	// Instructions says whether the agents' instruction and prompt files (CLAUDE.md, AGENTS.md,
	// GEMINI.md, .github/copilot-instructions.md, command and skill folders: the profiles'
	// workspaceInstructions) are writable in the box, and reported at exit when the launch
	// changed them, or pinned read-only like executable configuration. "" means writable.
	Instructions string `json:"instructions,omitempty" jsonschema:"enum=writable,enum=readonly" jsonschema_description:"Instruction and prompt files (CLAUDE.md, AGENTS.md, GEMINI.md, .github/copilot-instructions.md, command and skill folders): writable (the default; what a launch changed is listed at exit) or readonly (pinned like executable configuration)."`
}

// Console configures the console relay.
type Console struct {
	// Clipboard says whether OSC 52 clipboard escapes from the box reach the terminal. "" means deny.
	Clipboard string `json:"clipboard,omitempty" jsonschema:"enum=deny,enum=allow" jsonschema_description:"OSC 52 clipboard escapes written by the box: deny (dropped by the console relay) or allow."`
	// DetachKeys is the key sequence that detaches a terminal from a box's console, leaving
	// the program running (console.ParseDetachKeys). "" means ctrl-p,ctrl-q; "none" turns it off.
	DetachKeys string `json:"detachKeys,omitempty" jsonschema_description:"Keys that detach your terminal from a box and leave its program running (agentbox attach ID returns): comma-separated, each one character or ctrl-<a-z, @, [, \\, ], ^, _>; none turns them off."`
}

// Launches configures the launch records.
type Launches struct {
	// Retention is how long the record of an ended launch is kept: the daemon deletes older
	// ones at its start and every hour. Zero means 720h (30 days). At least 1h: the launch's
	// proposed changes go with its record, and a shorter one deleted them before the user
	// could review them (tests age records in the store instead).
	Retention Duration `json:"retention,omitempty" duration:"min=1h,max=87600h" jsonschema_description:"How long the record of an ended launch is kept; the daemon deletes older ones at its start and every hour (Go duration from 1h to 87600h, default 720h: 30 days)."`
}

// Audit configures the audit log.
type Audit struct {
	// Retention is how long an audit row is kept: the daemon deletes older ones at its start
	// and every hour. Zero means 720h (30 days). At least 1h: a shorter one deleted the record
	// of what a box sent before anyone could read it.
	Retention Duration `json:"retention,omitempty" duration:"min=1h,max=87600h" jsonschema_description:"How long an audit row (a relay, git or egress request) is kept; the daemon deletes older ones at its start and every hour (Go duration from 1h to 87600h, default 720h: 30 days)."`
	// MaxRowsPerLaunch caps the audit rows and log lines a launch's brokers write in all,
	// summaries included (internal/recordlimit): past it requests are only counted, and the
	// count is written when the launch ends. Zero means 20000.
	MaxRowsPerLaunch int `json:"maxRowsPerLaunch,omitempty" jsonschema:"minimum=100,maximum=10000000" jsonschema_description:"Most audit rows (and request log lines) the brokers write for one launch; past it requests are counted and the count is written when the launch ends (default 20000)."`
}

// Sessions bounds the pairing-session registry.
type Sessions struct {
	// Max is the largest number of live sessions, launch sessions included. Zero means 64.
	Max int `json:"max,omitempty" jsonschema:"minimum=1,maximum=1024" jsonschema_description:"Largest number of live pairing sessions, launch sessions included."`
	// IdleTimeout is how long a session created by hand lives without use. Zero means 30m.
	IdleTimeout Duration `json:"idleTimeout,omitempty" jsonschema_description:"How long a session created by hand (agentbox session create) lives without use (default 30m)."`
	// AllowedClients lists the client ids that may hold sessions (a launch's client id is its
	// program profile). Empty admits every client.
	AllowedClients []string `json:"allowedClients,omitempty" jsonschema_description:"Client ids (program profiles) that may hold pairing sessions; empty admits all."`
}

// Defaults returns the configuration that applies where no file sets a key.
func Defaults() Config {
	return Config{
		Engine:      EngineNative,
		Egress:      EgressDeny,
		Console:     Console{Clipboard: ClipboardDeny, DetachKeys: console.DefaultDetachKeys},
		StopGrace:   Duration(5 * time.Second),
		Launches:    Launches{Retention: Duration(720 * time.Hour)},
		Audit:       Audit{Retention: Duration(720 * time.Hour), MaxRowsPerLaunch: 20000},
		Sessions:    Sessions{Max: 64},
		Integrity:   Integrity{Interval: Duration(60 * time.Second)},
		Limits:      Limits{TmpMiB: 2048, HomeMiB: 2048, ShmMiB: 64, Processes: 2048},
		Protect:     Protect{Instructions: InstructionsWritable},
		Managed:     Managed{ClaudeCode: ClaudeCodeManaged{AutoUpdates: AutoUpdatesOff}},
		Containment: Containment{Violations: ViolationsReport, ScanInterval: Duration(10 * time.Second)},
	}
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	d := Defaults()
	for _, l := range leaves() {
		v := c.fieldByIndex(l.index)
		if v.IsZero() {
			v.Set(d.fieldByIndex(l.index))
		}
	}
	return c
}

// Values of the enumerated keys. The decoder accepts exactly the values a field lists in its
// `jsonschema:"enum=…"` tag.
const (
	EngineNative         = "native"
	EngineBwrap          = "bwrap"
	EgressDeny           = "deny"
	EgressAllow          = "allow"
	ClipboardDeny        = "deny"
	ClipboardAllow       = "allow"
	InstructionsWritable = "writable"
	InstructionsReadOnly = "readonly"
	AutoUpdatesOff       = "off"
	AutoUpdatesOn        = "on"
)

// Duration is a time.Duration written as a Go duration string ("5s", "1m30s"). Durations in
// the configuration are positive; convert with time.Duration(d).
type Duration time.Duration

// String returns d as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// Duration returns d as a time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a positive Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := parseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want a Go duration such as 5s or 1m30s)", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("invalid duration %q (must be positive)", s)
	}
	return Duration(v), nil
}

// JSONSchema describes Duration in the generated schema.
func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:    "string",
		Pattern: `^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`,
	}
}
