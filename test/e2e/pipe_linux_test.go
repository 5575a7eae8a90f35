package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPipe covers a box whose stdio are pipes (no terminal). Parallel: its own Env, and nothing
// it checks is shared with other tests (the descriptors it counts are its box's own).
func TestPipe(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	t.Run("StdinToStdout", func(t *testing.T) {
		r := e.Run("hi\n", "run", "cat")
		if r.Code != 0 || r.Stdout != "hi\n" {
			t.Errorf("echo hi | agentbox run cat: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("ExitCodes", func(t *testing.T) {
		for _, code := range []int{0, 1, 7, 125, 126, 127, 255} {
			r := e.Box("exit " + itoa(code))
			if r.Code != code {
				t.Errorf("exit %d: agentbox exited %d (stderr %q)", code, r.Code, r.Stderr)
			}
			if strings.Contains(r.Stderr, "agentbox:") {
				t.Errorf("exit %d: agentbox printed its own error: %q", code, r.Stderr)
			}
		}
	})
	t.Run("SignalExit", func(t *testing.T) {
		r := e.Box("kill -TERM $$")
		if r.Code != 143 {
			t.Errorf("program killed by SIGTERM: exit %d, want 143", r.Code)
		}
	})
	t.Run("SeparateStreams", func(t *testing.T) {
		r := e.Box("echo out1; echo err1 >&2; echo out2; echo err2 >&2")
		if r.Stdout != "out1\nout2\n" || r.Stderr != "err1\nerr2\n" {
			t.Errorf("stdout %q, stderr %q", r.Stdout, r.Stderr)
		}
	})
	t.Run("Binary", func(t *testing.T) {
		// Every byte value, then a few MB of random bytes.
		data := make([]byte, 3<<20)
		for i := 0; i < 256*4; i++ {
			data[i] = byte(i)
		}
		rand.Read(data[1024:])
		in := filepath.Join(e.Work, "in.bin")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// Host → box → host.
		if r := e.Run(string(data), "run", "cat"); r.Code != 0 || !bytes.Equal([]byte(r.Stdout), data) {
			t.Errorf("cat round trip: exit %d, %d bytes back of %d, equal %v", r.Code, len(r.Stdout), len(data), bytes.Equal([]byte(r.Stdout), data))
		}
		// Host → box (stdin written to a workspace file).
		if r := e.Run(string(data), "run", "sh", "--", "-c", "cat > out.bin"); r.Code != 0 {
			t.Fatalf("write stdin: exit %d: %s", r.Code, r.Stderr)
		}
		if got, _ := os.ReadFile(filepath.Join(e.Work, "out.bin")); !bytes.Equal(got, data) {
			t.Errorf("stdin written in the box: %d bytes of %d, not equal", len(got), len(data))
		}
		// Box → host (a workspace file to stdout, and to stderr).
		if r := e.Run("", "run", "cat", "--", "in.bin"); !bytes.Equal([]byte(r.Stdout), data) {
			t.Errorf("file to stdout: %d bytes of %d, not equal", len(r.Stdout), len(data))
		}
		if r := e.Run("", "run", "sh", "--", "-c", "cat in.bin >&2"); !bytes.Equal([]byte(r.Stderr), data) || r.Stdout != "" {
			t.Errorf("file to stderr: %d bytes of %d, stdout %d bytes", len(r.Stderr), len(data), len(r.Stdout))
		}
	})
	t.Run("ProgramNotFound", func(t *testing.T) {
		// Not on the caller's PATH.
		r := e.Run("", "run", "agentbox-no-such-program")
		if r.Code != 125 || !strings.Contains(r.Stderr, "not found") {
			t.Errorf("unknown program: exit %d, stderr %q; want 125 and a reason", r.Code, r.Stderr)
		}
		// Found on the host, but it cannot be executed in the box (its interpreter is missing):
		// a typed start-up error, not the program's own 127.
		script := filepath.Join(e.Work, "script")
		os.WriteFile(script, []byte("#!/agentbox-no-such-interpreter\n"), 0o755)
		r = e.Run("", "run", script)
		if r.Code != 125 || !strings.Contains(r.Stderr, "[program_not_found]") {
			t.Errorf("missing interpreter: exit %d, stderr %q; want 125 and [program_not_found]", r.Code, r.Stderr)
		}
		// The program's own 127 (its shell did not find a command) passes through untouched.
		r = e.Box("agentbox-no-such-command")
		if r.Code != 127 || strings.Contains(r.Stderr, "agentbox:") || strings.Contains(r.Stderr, "program_not_found") {
			t.Errorf("program's 127: exit %d, stderr %q", r.Code, r.Stderr)
		}
	})
	t.Run("InheritedDescriptor", func(t *testing.T) {
		f, err := os.Open(filepath.Join(e.Work))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := e.Command(ctx, "run", "sh", "--", "-c", "ls /proc/self/fd")
		c.ExtraFiles = []*os.File{f}
		r := e.RunCmd(c)
		// sh, then ls: 0 1 2 and ls's own directory descriptor.
		if fds := strings.Fields(r.Stdout); r.Code != 0 || len(fds) > 4 || strings.Contains(r.Stdout, "4") {
			t.Errorf("descriptors in the box: %q (exit %d, stderr %q)", r.Stdout, r.Code, r.Stderr)
		}
	})
}

// TestWorkspaceRefused checks that agentbox refuses workspaces that would expose what the box
// hides, with exit 125 and the reason.
func TestWorkspaceRefused(t *testing.T) {
	e := NewEnv(t)
	ssh := filepath.Join(e.Home, ".ssh")
	os.MkdirAll(filepath.Join(ssh, "sub"), 0o700)
	inRuntime := filepath.Join(e.Runtime, "proj")
	os.MkdirAll(inRuntime, 0o700)
	for _, c := range []struct{ name, ws, why string }{
		{"Root", "/", "root directory"},
		{"Home", e.Home, "home directory"},
		{"SSH", ssh, ".ssh"},
		{"InsideSSH", filepath.Join(ssh, "sub"), ".ssh"},
		{"RuntimeDir", inRuntime, "XDG_RUNTIME_DIR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.Run("", "run", "--workspace", c.ws, "true")
			if r.Code != 125 || !strings.Contains(r.Stderr, c.why) || !strings.Contains(r.Stderr, "workspace_refused") {
				t.Errorf("workspace %s: exit %d, stderr %q; want 125, %q and [workspace_refused]", c.ws, r.Code, r.Stderr, c.why)
			}
		})
	}
	// The same refusal when the workspace is the current directory.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Command(ctx, "run", "true")
	c.Dir = e.Home
	if r := e.RunCmd(c); r.Code != 125 || !strings.Contains(r.Stderr, "home directory") {
		t.Errorf("run from $HOME: exit %d, stderr %q", r.Code, r.Stderr)
	}
}

// TestLaunchesShareWorkspace starts boxes in one workspace back to back and side by side: each
// must start. (Regression guard: a launch must not lose the mount points of its protected paths
// to the end of an earlier launch in the same workspace.)
func TestLaunchesShareWorkspace(t *testing.T) {
	e := NewEnv(t)
	for i := 0; i < 10; i++ {
		if r := e.Run("", "run", "true"); r.Code != 0 {
			t.Errorf("back to back, launch %d: exit %d: %s", i, r.Code, r.Stderr)
		}
	}
	errs := make(chan string, 8)
	for i := 0; i < cap(errs); i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := e.Command(ctx, "run", "true").CombinedOutput()
			if err != nil {
				errs <- fmt.Sprintf("%v: %s", err, out)
				return
			}
			errs <- ""
		}()
	}
	for i := 0; i < cap(errs); i++ {
		if msg := <-errs; msg != "" {
			t.Errorf("side by side: %s", msg)
		}
	}
}
