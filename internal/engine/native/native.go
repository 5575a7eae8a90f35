// Package native is the Linux engine: namespaces, mounts, Landlock and seccomp, with box-init
// as PID 1 of the box and box-exec (internal/engine/execstage) as the stage that restricts and
// execs the program. The kernel work itself lives in the packages under internal/linux.
//
// The shim calls Engine.Start, which re-executes /proc/self/exe as `box-init` in new user, mount,
// pid, ipc, uts, cgroup (and, unless egress is allowed, network) namespaces (or hands the
// request to a box-init started ahead: Prestart). box-init starts `box-exec` at once, builds the
// box's filesystem on a fresh tmpfs root (internal/linux/mount), pivots into it, brings loopback
// up, starts the loopback forwarders, then hands box-exec the spec and the program's streams;
// box-exec drops every capability, sets no_new_privs, applies Landlock and seccomp and execs the
// program. Binaries that embed this engine must dispatch argv[1] "box-init" and "box-exec" to
// BoxInitMain and execstage.Main before anything else (cmd/agentbox and cmd/agentbox-box do,
// through internal/boxmain; engine test binaries do it in TestMain, see enginetest.Main). Other
// packages reach the engine through the registry (engine.Get, internal/engine/builtins).
package native

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/plan"
)

// Name is the engine's config name.
const Name = "native"

// Engine is the native Linux engine. Its zero value is ready to use.
type Engine struct{}

var (
	_ engine.Engine     = (*Engine)(nil)
	_ engine.Holder     = (*Engine)(nil)
	_ engine.Prestarter = (*Engine)(nil)
)

func init() {
	engine.Register(Name, func() engine.Engine { return &Engine{} })
}

// Name returns "native".
func (*Engine) Name() string { return Name }

// HoldsStart reports that the native engine honours engine.IO.Hold.
func (*Engine) HoldsStart() bool { return true }

// Request renders p as the box spec JSON (see spec.Spec).
func (*Engine) Request(p *plan.Plan) ([]byte, error) {
	s, err := spec.Build(p)
	if err != nil {
		return nil, fmt.Errorf("native request: %w", err)
	}
	return s.Render()
}

// Start starts the box described by req (bytes of Request) as a child of the calling process,
// which must stay the box's parent (the shim) for the box's life: if it dies, the box is killed.
// Start does not close the files in io; the caller closes its copies of the box's ends (the
// Control box end and, in pipe mode, the program's side of the stdio pipes) once Start returns.
func (e *Engine) Start(req []byte, io engine.IO) (*engine.Box, error) {
	return start(req, io)
}
