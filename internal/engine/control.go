package engine

// EventKind names a message the box sends its shim on the control channel.
type EventKind string

const (
	// EventPTY carries the PTY master (one fd in SCM_RIGHTS) in tty mode, sent before EventExec.
	EventPTY EventKind = "pty"
	// EventExec says the program has been exec'd: from here on every exit is the program's.
	EventExec EventKind = "exec"
	// EventError says start-up failed before the program was exec'd; Code and Message say why.
	EventError EventKind = "error"
)

// Event is one control message (JSON, one per SOCK_SEQPACKET datagram).
type Event struct {
	Kind    EventKind `json:"kind"`
	Code    string    `json:"code,omitempty"`
	Message string    `json:"message,omitempty"`
	// Pid is the program's pid in the box's pid namespace (EventExec).
	Pid int `json:"pid,omitempty"`
}
