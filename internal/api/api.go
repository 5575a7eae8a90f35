// Package api holds the wire types of the local API, its routes and the mapping between error
// classes, HTTP status codes and stable error codes.
package api

import (
	"fmt"
	"strings"
	"time"
)

// Prefix is the versioned prefix of every route.
const Prefix = "/v0/"

// Routes of the local API.
const (
	RouteLaunches  = "/v0/launches"  // GET list, POST create
	RouteLaunch    = "/v0/launches/" // GET /v0/launches/{id}, POST /v0/launches/{id}/stop
	RouteInfo      = "/v0/info"      // GET
	RouteConfig    = "/v0/config"    // GET effective config with sources
	RouteReadiness = "/v0/readiness" // GET the readiness state and the last probe's facts
	// RoutePrune deletes the records of launches that ended (POST PruneRequest → PruneResult).
	RoutePrune = "/v0/launches/prune"
)

// Query parameters of GET /v0/launches. Without any, every launch is listed.
const (
	// QueryLimit caps the number of launches (newest first); 0 or absent: no cap.
	QueryLimit = "limit"
	// QueryState keeps launches in these states (comma-separated: starting, running, exited,
	// failed, lost); absent: any state.
	QueryState = "state"
	// QueryHideProbes, "1", drops the launches of agentbox's escape probe (selftest).
	QueryHideProbes = "hideProbes"
)

// QueryWait on GET /v0/launches/{id}, WaitEnded: the answer waits until the launch's end is
// settled (its brokers' end done, the check at exit among them) and carries its outcome, which
// the daemon commits right after; for at most MaxEndWait; a launch that is still
// running then is answered as it is. A daemon without it answers at once. The answer also
// carries the launch's egress counts and, once it has ended, Launch.Proposed: everything an
// attached run's summary prints, in one request.
const (
	QueryWait  = "wait"
	WaitEnded  = "ended"
	MaxEndWait = 10 * time.Second
)

// States lists every launch state.
var States = []string{StateStarting, StateRunning, StateExited, StateFailed, StateLost}

// PruneRequest asks the daemon to delete the records of launches that ended more than
// OlderThan ago (exited, failed or lost, and settled); 0 means every ended launch.
type PruneRequest struct {
	OlderThan time.Duration `json:"olderThanNs"`
}

// PruneResult answers a PruneRequest.
type PruneResult struct {
	// Pruned is the number of launch records deleted; Before the end time they ended before.
	Pruned int       `json:"pruned"`
	Before time.Time `json:"before"`
}

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
	// Detach starts the box without waiting for a client. With TTY the launch keeps its
	// console (attach and detach at will; output kept in the launch's log while no client is
	// attached); without, it has none: no stdin, output kept in the launch's log.
	Detach bool `json:"detach"`
	// Rows and Cols are the client's terminal size, for a detached TTY launch's PTY until a
	// client attaches; zero when unknown.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Egress overrides the configured egress mode ("deny" | "allow"); "" keeps the config's.
	Egress string `json:"egress,omitempty"`
	// RepoWorkspace says the user did not name the workspace: the daemon makes the top level
	// of the git repository holding Cwd the workspace (the program still starts in Cwd),
	// unless that top level is one it refuses. False keeps Workspace as it is (--workspace).
	RepoWorkspace bool `json:"repoWorkspace,omitempty"`
}

// LaunchResponse answers a LaunchRequest.
type LaunchResponse struct {
	ID string `json:"id"`
	// ShimSocket is the unix socket the client attaches to for the console (attached launches).
	ShimSocket string `json:"shimSocket"`
	// DetachKeys is the configured detach key sequence (console.detachKeys; "" from a daemon
	// that predates it: the default).
	DetachKeys string `json:"detachKeys,omitempty"`
	// Notices are lines for the user's terminal about choices the daemon made for this launch
	// (the repository's top level taken as the workspace, or why it was not); nil when none.
	Notices []string `json:"notices,omitempty"`
	// DaemonVersion and DaemonPid say which daemon started the launch, so that a CLI of
	// another version warns (as version does); "" and 0 from a daemon that predates them.
	DaemonVersion string `json:"daemonVersion,omitempty"`
	DaemonPid     int    `json:"daemonPid,omitempty"`
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
	Settled bool `json:"settled"`
	// Relay counts the launch's relay requests (kept while the daemon runs).
	Relay *RelayStats `json:"relay,omitempty"`
	// Egress counts the launch's tunnels and requests through the egress proxy (launches with
	// egressAllow; kept while the daemon runs, restored from the audit log for re-adopted boxes).
	Egress *EgressStats `json:"egress,omitempty"`
	Error  *Error       `json:"error,omitempty"`
	// Posture is the managed posture the launch started under (Claude Code launches; nil for
	// other programs and for launches recorded before posture existed).
	Posture *Posture `json:"posture,omitempty"`
	// Drift is set once the integrity watch saw a protected path or the workspace's executable
	// configuration change (docs/integrity.md); it never clears for the launch.
	Drift bool `json:"drift"`
	// DriftEvents are the integrity transitions recorded for the launch, oldest first (the
	// most recent MaxDriftEvents), including those of watched-only paths (HEAD) that do not
	// raise Drift.
	DriftEvents []DriftEvent `json:"driftEvents,omitempty"`
	// Stages are the launch pipeline's stages (internal/launch) that completed, in the order
	// they started, each with how long it took; recorded once the program runs or the launch
	// fails. Nil for launches recorded before stages were kept, and for a launch still
	// starting.
	Stages []Stage `json:"stages,omitempty"`
	// Proposed counts what the launch left to review in its proposed changes; set only in
	// the answer to GET /v0/launches/{id}?wait=ended (QueryWait), whose caller, an attached
	// run at its end, prints it. Nil elsewhere, and when the daemon could not read them.
	Proposed *ProposedCount `json:"proposed,omitempty"`
}

// ProposedCount counts a launch's proposed changes (Changes) without their contents.
type ProposedCount struct {
	// Changes is the number of proposed changes (len(Changes.Changes)).
	Changes int `json:"changes"`
	// Dropped is Changes.Dropped: what the box created at protected paths after its proposed
	// changes were full.
	Dropped int `json:"dropped,omitempty"`
	// Ignored counts, among Changes, the files the launch left in git-ignored places, moved
	// out of the workspace at exit; IgnoredDropped those removed past the bounds, not kept.
	Ignored        int `json:"ignored,omitempty"`
	IgnoredDropped int `json:"ignoredDropped,omitempty"`
}

// Stage is one completed stage of a launch's start (internal/launch, docs/internals.md).
type Stage struct {
	// Name names the stage: resolve, layout, prepare, brokers, plan, request, record, shim,
	// record-shim, ready, watch; then, once the launch has ended, those of its end: box (the
	// watch to the shim's final status), end-brokers (the check at exit among them),
	// box-init-exit, work-removal (after the answer to the client).
	Name string `json:"name"`
	// Duration is how long the stage took (wall-clock, never negative). Stages may overlap:
	// an attached launch's record and shim run at once when a spare shim is ready.
	Duration time.Duration `json:"durationNs"`
}

// Changes are the proposed changes of one launch (docs/integrity.md): what its box wrote at
// protected paths of the workspace (absent ones it created, and its staged copies of existing
// ones), kept out of it until applied.
type Changes struct {
	LaunchID  string           `json:"launchId"`
	Workspace string           `json:"workspace"`
	Changes   []ProposedChange `json:"changes"`
	// Dropped counts what the box created at protected paths after the launch's proposed
	// changes were full: moved out of the workspace, not kept; DroppedPaths names the first.
	Dropped      int      `json:"dropped,omitempty"`
	DroppedPaths []string `json:"droppedPaths,omitempty"`
	// IgnoredDropped counts the files the launch left in git-ignored places that were removed
	// from the workspace past the bounds (changes.MaxIgnoredFiles, MaxIgnoredBytes), not
	// kept; IgnoredDroppedPaths names the first.
	IgnoredDropped      int      `json:"ignoredDropped,omitempty"`
	IgnoredDroppedPaths []string `json:"ignoredDroppedPaths,omitempty"`
	// Running says the launch has not ended: what it proposes can change until it does (the
	// box may write a path again), and apply refuses until then. Review what it proposes once
	// it has ended.
	Running bool `json:"running,omitempty"`
}

// MaxChangesAnswer bounds the diffs of an answer to GET /v0/launches/{id}/changes (JSON
// bytes): past it a change is listed with a note instead of its diff (ProposedChange.NotShown).
const MaxChangesAnswer = 8 << 20

// ProposedChange is one path a box created, or one protected file it changed.
type ProposedChange struct {
	// Path is workspace-relative.
	Path string `json:"path"`
	// Kind is file or symlink.
	Kind string `json:"kind"`
	// Modifies says Path was a protected file when the launch started, which the box changed
	// (in its staged copy); false means the box created Path.
	Modifies bool `json:"modifies,omitempty"`
	// Diff renders the change against what the host has at Path now.
	Diff string `json:"diff"`
	// HostExists says the host has something at Path now.
	HostExists bool `json:"hostExists"`
	// Conflict says applying it is refused now: the host has something at a Path the box
	// created, or its file at a Path the box modified no longer holds what the box started
	// from.
	Conflict bool `json:"conflict,omitempty"`
	// Truncated says the box's file was too large to keep whole: it cannot be applied.
	Truncated bool `json:"truncated,omitempty"`
	// Ignored says the launch left the file in a git-ignored place of the workspace: it was
	// moved out at exit, and apply puts it back.
	Ignored bool `json:"ignored,omitempty"`
	// SHA256 is, for an Ignored file, the SHA-256 (hex) of the whole file as it was kept:
	// apply puts back exactly those bytes, or refuses.
	SHA256 string `json:"sha256,omitempty"`
	// Hidden says (with Modifies) Path is a tracked file whose change the host's git views
	// did not show: the host's file was put back at exit, and apply makes it the box's again.
	Hidden bool `json:"hidden,omitempty"`
	// NotShown says Diff holds a note instead of the diff: the answer reached its bound
	// (MaxChangesAnswer).
	NotShown bool `json:"notShown,omitempty"`
	// Partial says Diff does not show the box's whole file (it or the host's holds a NUL
	// byte, or it is longer than what a diff compares, or NotShown): `apply ID` without paths
	// refuses it (unless Ignored: put back by its hash), and applies it only named (`apply ID
	// PATH`), after the user read it at Stored.
	Partial bool `json:"partial,omitempty"`
	// Stored is where the box's file is kept (absolute): `agentbox changes ID --whole PATH`
	// prints it whole, its control characters written out.
	Stored string `json:"stored,omitempty"`
}

// ApplyRequest applies proposed changes; no Paths means all of them.
type ApplyRequest struct {
	Paths []string `json:"paths,omitempty"`
}

// ApplyResult lists the paths applied.
type ApplyResult struct {
	Applied []string `json:"applied"`
}

// MaxDriftEvents is the most drift events a Launch carries.
const MaxDriftEvents = 50

// DriftSourceCollect is the Source of an alert recorded when the launch ended and a staged
// copy of a protected file was not collected as a proposed change: the collection failed (the
// copy is kept, Detail says where and why) or the box made it larger than the bound.
const DriftSourceCollect = "collect"

// DriftSourceIgnored is the Source of an alert recorded when the launch ended about the files
// it left in git-ignored places of the workspace: some could not be looked at, were removed
// past the bounds instead of kept, or could not be moved out (Detail says which).
const DriftSourceIgnored = "ignored"

// DriftSourceUntracked is the Source of the event (no alert) recorded when the launch ended
// about the untracked files it created or changed that the user's git status does not name
// (inside an untracked folder it shows as one line, or status.showUntrackedFiles=no): Path is
// the workspace, Detail names the files (the first UntrackedNamed) and why.
const DriftSourceUntracked = "untracked"

// UntrackedNamed bounds the files a DriftSourceUntracked event names.
const UntrackedNamed = 20

// DriftEvent is one integrity transition of a launch.
type DriftEvent struct {
	Time time.Time `json:"time"`
	// Kind is modified, replaced (equal content, new identity), created or removed.
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Detail string `json:"detail,omitempty"`
	// Source is what found it: snapshot, periodic, inotify or exit, or DriftSourceCollect.
	Source string `json:"source"`
	// Alert is false for watched-only paths (HEAD, instruction files) and for the caches git
	// rebuilds that the check at exit moves aside from a git directory (a commit-graph, a
	// multi-pack-index, a pack's .bitmap or .rev): recorded, but Drift is not raised.
	Alert bool `json:"alert"`
}

// SessionRequest asks for a session created by hand.
type SessionRequest struct {
	ClientID string `json:"clientId"`
}

// Session is a pairing session as the API shows it (never its pairing).
type Session struct {
	ID       string    `json:"id"`
	ClientID string    `json:"clientId,omitempty"`
	LaunchID string    `json:"launchId,omitempty"`
	Kind     string    `json:"kind,omitempty"`
	State    string    `json:"state"`
	Created  time.Time `json:"created,omitzero"`
	LastUsed time.Time `json:"lastUsed,omitzero"`
}

// SessionCreated answers a SessionRequest: the only time the pairing is shown.
type SessionCreated struct {
	Session
	Pairing  string `json:"pairing"`
	RelayURL string `json:"relayUrl"`
}

// RelayStats counts a launch's requests through the relay (LLM and git).
type RelayStats struct {
	Requests     int   `json:"requests"`
	LastStatus   int   `json:"lastStatus,omitempty"`
	Canceled     int   `json:"canceled,omitempty"`
	InputTokens  int64 `json:"inputTokens,omitempty"`
	OutputTokens int64 `json:"outputTokens,omitempty"`
}

// EgressStats counts a launch's tunnels and requests through the egress proxy.
type EgressStats struct {
	Allowed int64 `json:"allowed"`
	Refused int64 `json:"refused"`
	// Failed were allowed but could not be resolved or reached.
	Failed    int64 `json:"failed,omitempty"`
	BytesUp   int64 `json:"bytesUp,omitempty"`
	BytesDown int64 `json:"bytesDown,omitempty"`
	// LastRefused is the host:port of the latest target the allowlist refused (what to add to
	// egressAllow), and LastRefusedReason why: host_not_allowed, port_not_allowed or
	// address_refused.
	LastRefused       string `json:"lastRefused,omitempty"`
	LastRefusedReason string `json:"lastRefusedReason,omitempty"`
	// Refusals are the distinct targets refused while this daemon served the launch, first
	// refused first (at most 16), each with the key that would allow it; nil when none (and for
	// launches that ended under an earlier daemon).
	Refusals []EgressRefusal `json:"refusals,omitempty"`
}

// EgressRefusal is a target the egress proxy refused.
type EgressRefusal struct {
	Target string `json:"target"` // host:port
	Key    string `json:"key"`    // the configuration key that would allow it: egressAllow or git.allow
	// Expected is set when the launch's profile names the target among its expectedRefusals
	// (a request the program makes at every start whatever its settings): still refused and
	// audited, but not announced at the end of the launch. Why is the profile's reason.
	Expected bool   `json:"expected,omitempty"`
	Why      string `json:"why,omitempty"`
}

// Info describes the daemon.
type Info struct {
	Version    string            `json:"version"`
	Engine     string            `json:"engine"`
	Socket     string            `json:"socket"`
	Pid        int               `json:"pid"`
	UID        int               `json:"uid"`
	Kernel     map[string]string `json:"kernel"` // kernel features seen: release, landlockABI, userns, …
	Launches   int               `json:"launches"`
	RuntimeDir string            `json:"runtimeDir"`
	StateDir   string            `json:"stateDir"`
	// BoxBinary is the executable shims start boxes from: the box helper (agentbox-box) beside
	// the daemon's binary, or that binary itself when no helper qualifies.
	BoxBinary   string   `json:"boxBinary,omitempty"`
	ConfigFiles []string `json:"configFiles,omitempty"`
	// ConfigError is the reason the current config files were refused (the daemon keeps its
	// last good configuration); "" when they are valid.
	ConfigError string `json:"configError,omitempty"`
	// Posture is the managed posture of Claude Code on this host, read for this request.
	Posture *Posture `json:"posture,omitempty"`
	// Readiness is whether the daemon admits launches (see Readiness); nil from a daemon
	// that predates it.
	Readiness *Readiness `json:"readiness,omitempty"`
	// Relay is the relay activity of the running launches, by launch id (nil from a daemon
	// without a relay).
	Relay map[string]*RelayStats `json:"relay,omitempty"`
	// Sessions is the number of live pairing sessions, launch sessions included.
	Sessions int `json:"sessions"`
	// RelayNotice, when set, says that the relay's loopback listener could not keep its
	// address across a daemon restart (another process took it) and which sessions issued
	// there were revoked; "" when nothing was.
	RelayNotice string `json:"relayNotice,omitempty"`
	// Violations is wrap mode's scanner: posture, counts, recent violations (nil from a daemon
	// that predates it).
	Violations *Violations `json:"violations,omitempty"`
}

// Readiness states.
const (
	ReadinessUnknown     = "unknown"     // no probe has finished yet and none runs
	ReadinessProbing     = "probing"     // a probe runs; launches wait for the first one
	ReadinessReady       = "ready"       // the last probe proved the boundary: launches are admitted
	ReadinessUnavailable = "unavailable" // the last probe failed: launches are refused with Reason
)

// Readiness is the daemon's proof, or disproof, that it can build and enforce the box.
type Readiness struct {
	State string `json:"state"`
	// Reason is the typed reason of an unavailable state (userns_unavailable, …), Detail what
	// exactly failed and Hint the one-line remediation.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	Hint   string `json:"hint,omitempty"`
	// Since is when the state was entered; NextRetry when an unavailable state is probed again.
	Since     time.Time `json:"since"`
	NextRetry time.Time `json:"nextRetry,omitzero"`
	// Engine is the engine probed; Cached says the ready state comes from a cached proof for
	// the same configuration, kernel and binary, not from a probe of this daemon.
	Engine string `json:"engine"`
	Cached bool   `json:"cached,omitempty"`
	// Attempts counts the probes since the daemon started.
	Attempts int `json:"attempts,omitempty"`
	// ProbedAt and Duration describe the probe the facts come from.
	ProbedAt time.Time     `json:"probedAt,omitzero"`
	Duration time.Duration `json:"durationNs,omitempty"`
	// Facts are the attested and host-verified facts of that probe, in a fixed order.
	Facts []Fact `json:"facts,omitempty"`
	// Kernel are the host facts the probe saw (release, landlockABI, userns limits, cgroup).
	Kernel map[string]string `json:"kernel,omitempty"`
}

// Fact is one checked fact of a readiness probe.
type Fact struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// LaunchIDLen is the length of a launch id: 128 bits in lower-case hex.
const LaunchIDLen = 32

// MinLaunchIDPrefix is the shortest prefix of a launch id that names a launch.
const MinLaunchIDPrefix = 4

// CheckLaunchID returns nil when id can name a launch: a whole launch id or a prefix of one,
// MinLaunchIDPrefix to LaunchIDLen lower-case hex digits. Otherwise it returns an Error
// (CodeBadRequest) naming what it got and what a launch id looks like: the CLI checks the
// argument before it builds a path of the local API with it (an empty id or one holding a
// slash reached another route, review 16, F7), and the daemon checks the path's id again.
func CheckLaunchID(id string) error {
	if len(id) >= MinLaunchIDPrefix && len(id) <= LaunchIDLen && !strings.ContainsFunc(id, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) {
		return nil
	}
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf("launch id %q is not one: a launch id is %d to %d lower-case hex digits (a whole id, or a prefix that names one launch)", id, MinLaunchIDPrefix, LaunchIDLen), Hint: "`agentbox launches` lists them"}
}

// SessionIDPrefix and SessionIDHex make a session id: "s_" and 16 lower-case hex digits
// (internal/relay/session makes them; `agentbox session list` shows them).
const (
	SessionIDPrefix = "s_"
	SessionIDHex    = 16
)

// CheckSessionID returns nil when id can name a session: SessionIDPrefix and SessionIDHex
// lower-case hex digits. Otherwise it returns an Error (CodeBadRequest) naming the argument,
// what it got and what a session id looks like: the CLI checks it before it builds a path of
// the local API with it (an empty id reached the collection's route), and the daemon checks
// the path's id again, whatever client sent it.
func CheckSessionID(id string) error {
	hex := strings.TrimPrefix(id, SessionIDPrefix)
	if len(id) == len(SessionIDPrefix)+SessionIDHex && strings.HasPrefix(id, SessionIDPrefix) && !strings.ContainsFunc(hex, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) {
		return nil
	}
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf("SESSION %q is not a session id: a session id is %q and %d lower-case hex digits", id, SessionIDPrefix, SessionIDHex), Hint: "`agentbox session list` lists them"}
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
