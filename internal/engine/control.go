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
	// EventEnded says the box has ended while its init still exits: the program exited with
	// Exit, every other process of the box is gone (the init, PID 1 of the box's pid namespace,
	// killed them and saw them go), the protected paths' last passes are done, and the init
	// has closed its copies of the box's output. The init sends it only then, and nothing of the
	// box runs after it; what is left of the init's exit (the kernel's release of its inotify
	// instances) does not hold up the launch's end. An init that does not send it ends the
	// launch when it is reaped.
	EventEnded EventKind = "ended"
	// EventStart goes the other way, shim to box, to a box-init started ahead of its request
	// (Prestarter): the spec in a sealed memfd, then, in pipe mode, the program's stdin,
	// stdout and stderr (SCM_RIGHTS), and the PTY size in Rows and Cols.
	EventStart EventKind = "start"
	// EventGo goes shim to box too, to a box started with IO.Hold: start the program now; Rows
	// and Cols are the PTY size.
	EventGo EventKind = "go"
	// EventBuilt goes from the box's init to its box-exec (internal/engine/execstage): the box is built
	// and pivoted into, so the program's Landlock rules can be opened by their in-box paths.
	EventBuilt EventKind = "built"
)

// Event is one control message (JSON, one per SOCK_SEQPACKET datagram).
type Event struct {
	Kind    EventKind `json:"kind"`
	Code    string    `json:"code,omitempty"`
	Message string    `json:"message,omitempty"`
	// Pid is the program's pid in the box's pid namespace (EventExec).
	Pid int `json:"pid,omitempty"`
	// Rows and Cols are the PTY size (EventStart, EventGo).
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	// Hold is IO.Hold, for a prestarted box (EventStart).
	Hold bool `json:"hold,omitempty"`
	// Exit is the program's exit code, 128+n for a signal (EventEnded).
	Exit int `json:"exit,omitempty"`
}
