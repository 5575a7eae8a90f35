// Package engine defines the seam between a launch plan and the mechanism that builds the box:
// the Engine interface, its registry, the error classes and the box-to-shim control channel.
package engine

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/agentbox/agentbox/internal/plan"
)

// Engine renders a plan into its own request bytes and starts boxes from them.
type Engine interface {
	// Name is the engine's config name ("native", "bwrap").
	Name() string
	// Request renders p as the engine's own request (the native engine's box spec JSON, the bwrap
	// engine's argv). It is deterministic: golden files pin its bytes.
	Request(p *plan.Plan) ([]byte, error)
	// Start starts the box described by req in the calling process, which becomes its parent
	// (the shim). The box reports its progress on io.Control (see Event).
	Start(req []byte, io IO) (*Box, error)
}

// IO wires a box to its shim.
type IO struct {
	// Stdin, Stdout and Stderr are the program's streams in pipe mode; nil in tty mode, where the
	// box allocates a PTY in its own devpts and sends the master over Control.
	Stdin, Stdout, Stderr *os.File
	// Control is the box side of a SOCK_SEQPACKET socketpair; the box sends Events on it.
	Control *os.File
	// Rows and Cols are the PTY's size in tty mode, set before the program starts (so its first
	// TIOCGWINSZ is right); zero leaves the kernel's 0×0 until the shim resizes the master.
	Rows, Cols uint16
	// Hold makes the box build itself, then wait for EventGo on Control (which carries the PTY
	// size) before it starts the program, so that a shim can build the box while its client is
	// still on the way. Only engines whose HoldsStart reports true honour it.
	Hold bool
}

// Check reports whether io gives a box with console c the streams it needs: a pipe console
// needs stdin, stdout and stderr. Its error wraps ErrBoxSetup.
func (io IO) Check(c plan.Console) error {
	if c == plan.ConsolePipe && (io.Stdin == nil || io.Stdout == nil || io.Stderr == nil) {
		return fmt.Errorf("%w: pipe console needs stdin, stdout and stderr", ErrBoxSetup)
	}
	return nil
}

// Holder is an engine that honours IO.Hold.
type Holder interface {
	HoldsStart() bool
}

// Default is the engine a configuration that names none uses, and the one a spare shim, which
// does not know its launch's configuration yet, prestarts a box of (Prestarter).
const Default = "native"

// Prestarter is an engine that can start a box ahead of its request: a spare shim starts one
// while it waits for its launch, so that the namespaces and the start-up of the box's init cost
// the launch no time. Like Start, Prestart must be called on the thread that stays the box's
// parent.
type Prestarter interface {
	// Prestart starts the default box (the namespaces of a box under egress: deny, the calling
	// user's ids), waiting for its request.
	Prestart() (Prestarted, error)
}

// Prestarted is a box started ahead of its request (Prestarter). It carries nothing of any
// launch until Start.
type Prestarted interface {
	// Start hands the box the request req and the program's streams in io, as Engine.Start
	// would start a box for them; io.Control is not used (the box reports on Control). It
	// returns ErrPrestartUnusable, and sends nothing, when the box cannot serve req (other
	// namespaces or ids, or it is gone): the caller discards it and starts a box the ordinary
	// way.
	Start(req []byte, io IO) (*Box, error)
	// Control is the caller's end of the box's control socket; after Start, the box's events
	// arrive on it.
	Control() *os.File
	// Discard ends an unused box and reaps it.
	Discard()
}

// ErrPrestartUnusable means a prestarted box cannot serve a request (Prestarted.Start).
var ErrPrestartUnusable = errors.New("prestarted box-init cannot serve this request")

// Box is a started box.
type Box struct {
	// Process is the box's top process (box-init, or bwrap); when it exits, the box is over.
	Process *os.Process
	// PidFD is a pidfd for Process, or -1.
	PidFD int
	// InitPid is the host pid of the box's PID 1 when that is not Process (the bwrap engine's
	// Process is its monitor, which stays in the host's namespaces); 0 means Process. The box's
	// namespaces are read from this process (/proc/<pid>/ns), its settlement checked by its pid
	// namespace.
	InitPid int
}

// NamespacePid returns the host pid whose namespaces are the box's: InitPid, or Process.Pid.
func (b *Box) NamespacePid() int {
	if b.InitPid > 0 {
		return b.InitPid
	}
	return b.Process.Pid
}

var (
	mu       sync.Mutex
	registry = map[string]func() Engine{}
)

// Register makes an engine available by name. A duplicate registration panics.
func Register(name string, factory func() Engine) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("engine: duplicate registration of " + name)
	}
	registry[name] = factory
}

// Get returns a new instance of the named engine.
func Get(name string) (Engine, error) {
	mu.Lock()
	defer mu.Unlock()
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownEngine, name, namesLocked())
	}
	return f(), nil
}

// Names lists the registered engines, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
