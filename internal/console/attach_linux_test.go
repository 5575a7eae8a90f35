package console

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "listen-helper" {
		os.Exit(listenHelper(os.Args[2]))
	}
	if len(os.Args) > 2 && os.Args[1] == "attach-helper" {
		code, err := Attach(os.Args[2], os.Stdin, os.Stdout, os.Stderr, AttachOptions{})
		os.Stderr.WriteString("attach returned\n")
		if err != nil {
			os.Exit(125)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// listenHelper listens on path, says so on stdout, and answers every connection with an OK
// reply (as a shim would), until killed.
func listenHelper(path string) int {
	ln := testenv.Announce(path)
	if ln == nil {
		return 1
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			ReadLine(bufio.NewReader(c))
			WriteJSONLine(c, Reply{OK: true, Console: "pipe"})
		}()
	}
}

func listen(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				ReadLine(bufio.NewReader(c))
				WriteJSONLine(c, Reply{OK: true, Console: "pipe"})
			}()
		}
	}()
}

func TestCheckOwner(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "s.sock")
	listen(t, path)
	if err := CheckOwner(path); err != nil {
		t.Fatalf("own socket: %v", err)
	}
	if _, err := Dial(path, Hello{Role: RoleStatus}); err != nil {
		t.Fatalf("Dial own socket: %v", err)
	}

	t.Run("directory writable by others", func(t *testing.T) {
		os.Chmod(dir, 0o777)
		defer os.Chmod(dir, 0o700)
		if err := CheckOwner(path); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("got %v, want ErrNotOwner", err)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		f := filepath.Join(dir, "file")
		os.WriteFile(f, nil, 0o600)
		if err := CheckOwner(f); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("got %v, want ErrNotOwner", err)
		}
	})
	t.Run("directory is a symlink", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "link")
		os.Symlink(dir, link)
		if err := CheckOwner(filepath.Join(link, "s.sock")); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("got %v, want ErrNotOwner", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := Dial(filepath.Join(dir, "gone.sock"), Hello{Role: RoleStatus}); !errors.Is(err, ErrShimGone) {
			t.Fatalf("got %v, want ErrShimGone", err)
		}
	})
	t.Run("nobody listens", func(t *testing.T) {
		p := filepath.Join(dir, "stale.sock")
		ln, _ := net.Listen("unix", p)
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		if _, err := Dial(p, Hello{Role: RoleStatus}); !errors.Is(err, ErrShimGone) {
			t.Fatalf("got %v, want ErrShimGone", err)
		}
	})
	t.Run("socket of another user", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("needs root to chown")
		}
		p := filepath.Join(dir, "other.sock")
		listen(t, p)
		os.Chown(p, 1001, 1001)
		if _, err := Dial(p, Hello{Role: RoleStatus}); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("got %v, want ErrNotOwner", err)
		}
	})
}

func TestDialRefusesListenerOfAnotherUser(t *testing.T) {
	// Another user listens; the socket file is then made to look like ours (chown), so that only
	// the SO_PEERCRED check can tell.
	base := testenv.ListenAsOtherUser(t, "s.sock", "listen-helper")
	path := filepath.Join(base, "s.sock")
	os.Chown(path, 0, 0)
	os.Chmod(base, 0o700)
	done := make(chan error, 1)
	go func() { _, err := Dial(path, Hello{Role: RoleStatus}); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Dial = %v, want ErrNotOwner", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Dial hung")
	}
}

// TestAttachInterruptedWhileDialing: a client whose shim accepts but never answers its hello
// still ends on SIGTERM, by that signal, as it did before it subscribed to the signals it
// forwards (it subscribes while it dials). The signal is sent 300 ms after the shim accepted,
// by when the client has subscribed: without the dial's own handling it would wait forever.
func TestAttachInterruptedWhileDialing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shim.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	cmd := exec.Command(os.Args[0], "attach-helper", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case c := <-accepted:
		defer c.Close()
	case err := <-done:
		t.Fatalf("the client ended before its shim accepted: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the client never connected")
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("client ended with %v, want killed by SIGTERM", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("client ended with %v, want killed by SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the client did not end on SIGTERM while its shim did not answer")
	}
}

// TestAttachFlushesTerminalInput: what the client's terminal received but was not read when the
// program ended (here a cursor position report, a line not yet ended in cooked mode, that a
// terminal typed in answer to the program's output) is discarded, so it never reaches the
// host's shell. The stand-in shim answers with a plain console (the terminal stays in cooked
// mode, where a partial line is not readable and the client cannot have copied it) and ends
// the program once the terminal has echoed the report (it is in the line discipline's buffer); the test then makes the terminal
// raw, which makes any pending input readable, and counts it (TIOCINQ).
func TestAttachFlushesTerminalInput(t *testing.T) {
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptm.Close()
	defer pts.Close()
	const reply = "\x1b[12;1R"
	path := filepath.Join(t.TempDir(), "shim.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ReadLine(bufio.NewReader(c))
		WriteJSONLine(c, Reply{OK: true, Console: "pipe"})
		ptm.WriteString(reply)
		// The line discipline takes the master's input asynchronously; its echo (on in cooked
		// mode, the report's ESC shown as ^[) says that it holds the report.
		var echo []byte
		buf := make([]byte, 64)
		for !bytes.Contains(echo, []byte("R")) {
			n, err := ptm.Read(buf)
			if err != nil {
				return
			}
			echo = append(echo, buf[:n]...)
		}
		x, _ := json.Marshal(Exit{Code: 3})
		NewFrameWriter(c).WriteFrame(FrameExit, x)
	}()
	code, err := Attach(path, pts, pts, pts, AttachOptions{NoSignals: true})
	if err != nil || code != 3 {
		t.Fatalf("Attach = %d, %v; want 3, nil", code, err)
	}
	if _, err := term.MakeRaw(int(pts.Fd())); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(pts.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		buf := make([]byte, n)
		unix.Read(int(pts.Fd()), buf)
		t.Fatalf("%d bytes of terminal input survived the client: %q", n, buf)
	}
}

// TestAttachResizeBeforeKeys: keys typed after the terminal was resized reach the shim after the
// new size, even when the client has not handled the SIGWINCH yet (here it never comes: the
// terminal is not the test's controlling one). The client sent the size only from its signal
// case, on another goroutine than the input copy, and under load the keys went first
// (TestTerminal/Resize: the program read Enter, then `stty size` showed the old size).
func TestAttachResizeBeforeKeys(t *testing.T) {
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptm.Close()
	defer pts.Close()
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shim.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	frames := make(chan []string, 1)
	go func() {
		var seen []string
		defer func() { frames <- seen }()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		ReadLine(br)
		WriteJSONLine(c, Reply{OK: true, Console: "tty"})
		// The client is attached once the terminal is raw.
		for {
			tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
			if err != nil {
				return
			}
			if tio.Lflag&unix.ICANON == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := pty.Setsize(ptm, &pty.Winsize{Rows: 30, Cols: 100}); err != nil {
			return
		}
		ptm.WriteString("x")
		for {
			f, err := ReadFrame(br)
			if err != nil {
				return
			}
			switch f.Type {
			case FrameResize:
				ws, _ := ParseWindowSize(f.Payload)
				seen = append(seen, fmt.Sprintf("resize %d %d", ws.Rows, ws.Cols))
			case FrameStdin:
				seen = append(seen, fmt.Sprintf("stdin %q", f.Payload))
				x, _ := json.Marshal(Exit{Code: 0})
				NewFrameWriter(c).WriteFrame(FrameExit, x)
				return
			}
		}
	}()
	code, err := Attach(path, pts, pts, pts, AttachOptions{NoSignals: true})
	if err != nil || code != 0 {
		t.Fatalf("Attach = %d, %v; want 0, nil", code, err)
	}
	got := strings.Join(<-frames, ", ")
	if want := `resize 30 100, stdin "x"`; got != want {
		t.Fatalf("frames from the client: %s; want %s", got, want)
	}
}
