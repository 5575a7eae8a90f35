package readiness

import (
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
)

// ProbeOptions configure one probe. RuntimeDir and Engine are required.
type ProbeOptions struct {
	// Engine is the registered engine to probe ("native", "bwrap").
	Engine string
	// Config is the configuration launches run under (egress: allow raises the Landlock
	// minimum to ABI 6). The zero value means the defaults.
	Config config.Config
	// RuntimeDir is agentbox's owner-checked runtime directory: the probe lock and the probe's
	// launch directories live there.
	RuntimeDir string
	// Executable is the host path of the agentbox binary the box runs as the attester; ""
	// means the running executable.
	Executable string
	// Home is the user's home directory (an empty tmpfs in the box, with the ~/.ssh canary on
	// the host); "" means os.UserHomeDir.
	Home string
	// Logger receives the probe's log; nil discards it.
	Logger *slog.Logger
	// AfterStart, if set, runs once the probe's box has started, before the attestation is
	// read (tests kill the prober there to leave leftovers behind).
	AfterStart func()
	// ModifyPlan, if set, changes the probe's plan after the requirements have been derived
	// from it: tests weaken the box this way to prove that the probe notices.
	ModifyPlan func(*plan.Plan)
}

// Result is the outcome of one probe.
type Result struct {
	Engine string
	// Err is nil when the probe proved every fact.
	Err *Error
	// Facts are the checked facts in a fixed order (none when the box never started).
	Facts []api.Fact
	// Kernel are the host facts (HostFacts).
	Kernel   map[string]string
	Started  time.Time
	Duration time.Duration
}

// OK reports whether the probe proved the boundary.
func (r *Result) OK() bool { return r != nil && r.Err == nil }

// Readiness renders r as the wire state it leads to.
func (r *Result) Readiness() api.Readiness {
	st := api.Readiness{State: api.ReadinessReady, Engine: r.Engine, ProbedAt: r.Started, Duration: r.Duration,
		Facts: r.Facts, Kernel: r.Kernel, Since: r.Started.Add(r.Duration)}
	if r.Err != nil {
		st.State = api.ReadinessUnavailable
		st.Reason, st.Detail, st.Hint = string(r.Err.Reason), r.Err.Detail, r.Err.Reason.Hint()
	}
	return st
}
