package console

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// FrameType is the first byte of every frame on an attach connection.
type FrameType byte

// Frame types. The values are part of the wire format and never change.
const (
	// FrameStdin carries bytes for the program's stdin (client → shim).
	FrameStdin FrameType = 1
	// FrameStdout carries bytes the program wrote to stdout, or to the PTY in tty mode (shim → client).
	FrameStdout FrameType = 2
	// FrameStderr carries bytes the program wrote to stderr in pipe mode (shim → client).
	FrameStderr FrameType = 3
	// FrameResize carries the client's window size: rows, cols as big-endian uint16 (client → shim).
	FrameResize FrameType = 4
	// FrameSignal carries one signal number as a byte; the shim signals the box (client → shim).
	FrameSignal FrameType = 5
	// FrameStdinEOF says the client's stdin ended; in pipe mode the shim closes the program's
	// stdin (client → shim). Empty payload.
	FrameStdinEOF FrameType = 6
	// FrameExit is the last frame of a connection: the launch is over (shim → client). Payload: Exit as JSON.
	FrameExit FrameType = 7
	// FrameDetach ends an attachment without hanging up the program. Client → shim: a clean
	// detach (no SIGHUP). Shim → client: another client took the console over. Empty payload.
	FrameDetach FrameType = 8
)

func (t FrameType) String() string {
	switch t {
	case FrameStdin:
		return "stdin"
	case FrameStdout:
		return "stdout"
	case FrameStderr:
		return "stderr"
	case FrameResize:
		return "resize"
	case FrameSignal:
		return "signal"
	case FrameStdinEOF:
		return "stdin-eof"
	case FrameExit:
		return "exit"
	case FrameDetach:
		return "detach"
	}
	return fmt.Sprintf("frame(%d)", byte(t))
}

// MaxFramePayload bounds a frame's payload; a larger length is a protocol error.
const MaxFramePayload = 1 << 20

// frameHeaderLen is the type byte plus the big-endian uint32 payload length.
const frameHeaderLen = 5

// ErrProtocol is returned for a malformed frame, hello or reply.
var ErrProtocol = errors.New("console protocol error")

// Frame is one decoded frame.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// ReadFrame reads one frame from r. The payload is freshly allocated. At a clean end of the
// stream (no byte of a new frame) it returns io.EOF; a frame cut short is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFramePayload {
		return Frame{}, fmt.Errorf("%w: %s frame of %d bytes exceeds %d", ErrProtocol, FrameType(h[0]), n, MaxFramePayload)
	}
	f := Frame{Type: FrameType(h[0]), Payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, nil
}

// AppendFrame appends the encoding of one frame to dst.
func AppendFrame(dst []byte, t FrameType, payload []byte) []byte {
	dst = append(dst, byte(t))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// FrameWriter writes whole frames to an underlying writer; it is safe for concurrent use, and a
// frame is never interleaved with another.
type FrameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewFrameWriter returns a FrameWriter writing to w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame writes one frame. Payloads longer than MaxFramePayload are split into several
// frames of the same type (only data frames may be that long).
func (fw *FrameWriter) WriteFrame(t FrameType, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for {
		chunk := payload
		if len(chunk) > MaxFramePayload {
			chunk = chunk[:MaxFramePayload]
		}
		fw.buf = AppendFrame(fw.buf[:0], t, chunk)
		if _, err := fw.w.Write(fw.buf); err != nil {
			return err
		}
		payload = payload[len(chunk):]
		if len(payload) == 0 {
			return nil
		}
	}
}

// WindowSize is a terminal size in character cells.
type WindowSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Payload encodes the size as a FrameResize payload.
func (ws WindowSize) Payload() []byte {
	var b [4]byte
	binary.BigEndian.PutUint16(b[0:], ws.Rows)
	binary.BigEndian.PutUint16(b[2:], ws.Cols)
	return b[:]
}

// ParseWindowSize decodes a FrameResize payload.
func ParseWindowSize(p []byte) (WindowSize, error) {
	if len(p) != 4 {
		return WindowSize{}, fmt.Errorf("%w: resize payload of %d bytes", ErrProtocol, len(p))
	}
	return WindowSize{Rows: binary.BigEndian.Uint16(p[0:]), Cols: binary.BigEndian.Uint16(p[2:])}, nil
}

// Exit is the payload of FrameExit. Exactly one of two outcomes: the program ran and ended with
// Code (its own exit code, 128+n when a signal killed it), or ErrorCode is set and the program
// never ran (a typed start-up failure; Code is then meaningless).
type Exit struct {
	Code      int    `json:"code"`
	ErrorCode string `json:"errorCode,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Roles a connection names in its Hello.
const (
	// RoleAttach is a console client: frames both ways after the reply.
	RoleAttach = "attach"
	// RoleWatch is the daemon: status events from the shim and stop/signal requests to it, as
	// JSON lines after the reply.
	RoleWatch = "watch"
	// RoleStatus asks for the current status; the reply carries it and the shim closes.
	RoleStatus = "status"
	// RoleListener is the daemon handing the shim the relay's shared loopback listener to
	// hold, or taking it back after a restart (internal/shim, HoldListener and TakeListener):
	// after the reply, one message of one byte from the daemon, then one reply line from the
	// shim, each with the listener's descriptor (SCM_RIGHTS) when it is handed.
	RoleListener = "listener"
)

// ProtocolVersion is the version a client puts in its Hello.
const ProtocolVersion = 1

// Hello is the first line (JSON) a client sends on the shim socket.
type Hello struct {
	Version int    `json:"version"`
	Role    string `json:"role"`
	// Size is the client's window size (attach); zero when the client has no terminal.
	Size WindowSize `json:"size"`
	// StdoutTTY and StderrTTY say that the client's stdout or stderr is a terminal (attach): in
	// pipe mode the shim filters clipboard sequences only from a stream bound for a terminal, so
	// output redirected to a file or a pipe stays byte for byte the program's.
	StdoutTTY bool `json:"stdoutTTY,omitempty"`
	StderrTTY bool `json:"stderrTTY,omitempty"`
}

// ReplyError is a refusal carried in a Reply.
type ReplyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ReplyError) Error() string { return e.Message + " [" + e.Code + "]" }

// Reply is the shim's answer (one JSON line) to a Hello.
type Reply struct {
	OK bool `json:"ok"`
	// Console is the box's console mode ("tty" or "pipe").
	Console string `json:"console,omitempty"`
	// Status is the shim's current status (internal/shim.Status) when OK.
	Status json.RawMessage `json:"status,omitempty"`
	Error  *ReplyError     `json:"error,omitempty"`
}

// maxLine bounds a hello, reply or watch line.
const maxLine = 64 << 10

// ReadLine reads one newline-terminated line of at most 64 KiB from br, without the newline.
func ReadLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxLine)
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// WriteJSONLine writes v as one JSON line.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
