package native

import (
	"os"

	"github.com/agentbox/agentbox/internal/plan"
)

// The pieces of box-init that another engine's in-box init reuses to start the program and report
// on the control channel exactly as the native engine does (the bwrap engine's init). They are
// thin wrappers: the behaviour lives in the unexported functions box-init itself calls.

// ExecProcess is a box-exec started ahead of its program (StartExecProcess).
type ExecProcess = execProcess

// StartExecProcess starts box-exec early (see startExecProcess).
func StartExecProcess() (*ExecProcess, error) { return startExecProcess() }

// ForwardedSignals are the signals box-init passes on to the program's process group.
func ForwardedSignals() []os.Signal { return append([]os.Signal(nil), forwardedSignals...) }

// ReadSpecFD reads spec bytes from the memfd at fd.
func ReadSpecFD(fd int) ([]byte, error) { return readSpecFD(fd) }

// Memfile returns a sealed memfd holding b (close-on-exec).
func Memfile(name string, b []byte) (*os.File, error) { return memfile(name, b) }

// CloseInherited closes every descriptor from lowest up that is not close-on-exec.
func CloseInherited(lowest int) error { return closeInherited(lowest) }

// StartForwards listens on each forward's in-box loopback port and relays to its unix socket.
func StartForwards(fwds []plan.Forward) error { return startForwards(fwds) }

// OpenBindSource opens the source of a bind as box-init does: an O_PATH descriptor, resolved
// beneath beneath (RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS) when it is set, so that a symlink
// cannot lead the bind out of it.
func OpenBindSource(source, beneath string) (int, error) {
	return openSource(Mount{Kind: KindBind, Source: source, Beneath: beneath})
}
