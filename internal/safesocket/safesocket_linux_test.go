package safesocket

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// otherUID is an ordinary user of the test machine (`abuser`), used as a foreign owner.
const otherUID = 1001

const helperEnv = "SAFESOCKET_TEST_HELPER"

// TestMain doubles as a helper process: with SAFESOCKET_TEST_HELPER=<action> <path> it runs
// that action instead of the tests (a second process for locks and peer checks).
func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	os.Exit(m.Run())
}

func helper(spec string) int {
	action, path, _ := strings.Cut(spec, " ")
	switch action {
	case "dial":
		// Connect, then report whether the server closed the connection on us.
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Println("dial error:", err)
			return 1
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		switch {
		case errors.Is(err, io.EOF):
			fmt.Println("closed")
		case err != nil:
			fmt.Println("read error:", err)
		default:
			fmt.Printf("got %q\n", buf[:n])
		}
		return 0
	case "runtimedir":
		dir, err := RuntimeDir()
		if err != nil {
			fmt.Println("error:", err, "notowned:", errors.Is(err, ErrNotOwned))
			return 0
		}
		fmt.Println(dir)
		return 0
	case "trylock":
		l, err := TryLock(path)
		switch {
		case errors.Is(err, ErrLocked):
			fmt.Println("busy")
			return 0
		case err != nil:
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("locked")
		// Hold the lock until the parent closes our stdin.
		io.Copy(io.Discard, os.Stdin)
		l.Unlock()
		return 0
	}
	fmt.Println("unknown helper action", action)
	return 2
}

// helperCmd returns a command that runs this test binary as helper.
func helperCmd(t *testing.T, exe, action, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+action+" "+path)
	cmd.Stderr = os.Stderr
	return cmd
}

func selfExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to " + why)
	}
}

// privateDir returns a fresh 0700 directory owned by the caller.
func privateDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRuntimeDirCreates(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	dir, err := RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(base, "agentbox") {
		t.Errorf("RuntimeDir = %s", dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("runtime dir %v, %v; want a 0700 directory", fi, err)
	}
	// A second call accepts what the first made.
	if _, err := RuntimeDir(); err != nil {
		t.Fatal(err)
	}
}

func TestRuntimeDirUmask(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	old := syscall.Umask(0o777)
	dir, err := RuntimeDir()
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("with umask 0777: %v %v, want mode 0700", fi.Mode(), err)
	}
}

func TestRuntimeDirFallback(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	dir, err := RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("/tmp/agentbox-%d", os.Getuid())
	if runUser := fmt.Sprintf("/run/user/%d", os.Getuid()); CheckOwner(runUser, true) == nil {
		want = filepath.Join(runUser, "agentbox")
	}
	if dir != want {
		t.Errorf("RuntimeDir = %s, want %s", dir, want)
	}
}

// TestRuntimeDirRootIgnoresForeignXDG guards `sudo -E agentbox`: root must not create its
// directory inside the user's XDG_RUNTIME_DIR (which would lock the user out of it).
func TestRuntimeDirRootIgnoresForeignXDG(t *testing.T) {
	needRoot(t, "chown a directory to another uid")
	x := t.TempDir()
	if err := os.Chown(x, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", x)
	dir, err := RuntimeDir()
	if err != nil {
		t.Fatal(err)
	}
	want := "/tmp/agentbox-0"
	if CheckOwner("/run/user/0", true) == nil {
		want = "/run/user/0/agentbox"
	}
	if dir != want {
		t.Errorf("RuntimeDir = %s, want %s", dir, want)
	}
	if _, err := os.Lstat(filepath.Join(x, "agentbox")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root created a directory in another user's XDG_RUNTIME_DIR: %v", err)
	}
}

func TestDirRefusals(t *testing.T) {
	tests := []struct {
		name  string
		root  bool
		setup func(t *testing.T, dir string)
		want  error
		msg   string
	}{
		{"owned by another uid", true, func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			if err := os.Chown(dir, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
		}, ErrNotOwned, "belongs to uid 1001"},
		{"group readable", false, func(t *testing.T, dir string) { mkdir(t, dir, 0o750) }, ErrBadMode, "has mode 0750, want 0700 (fix: chmod 700"},
		{"world writable", false, func(t *testing.T, dir string) { mkdir(t, dir, 0o777) }, ErrBadMode, "has mode 0777"},
		{"symlink to own dir", false, func(t *testing.T, dir string) {
			target := privateDir(t)
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}, ErrBadMode, "is a symbolic link"},
		{"regular file", false, func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrBadMode, "is a regular file, want a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t, "chown a directory to another uid")
			}
			base := t.TempDir()
			t.Setenv("XDG_RUNTIME_DIR", base)
			dir := filepath.Join(base, "agentbox")
			tt.setup(t, dir)
			_, err := RuntimeDir()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("RuntimeDir: %v; want %v naming %s with %q", err, tt.want, dir, tt.msg)
			}
		})
	}
}

// TestSudoLeftover checks what an ordinary user sees when `sudo agentbox` left a root-owned
// runtime directory in their XDG_RUNTIME_DIR: a refusal naming the owner and the fix.
func TestSudoLeftover(t *testing.T) {
	needRoot(t, "run RuntimeDir as uid 1001 (SysProcAttr.Credential)")
	base, err := os.MkdirTemp("", "safesocket-xdg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chown(base, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(base, "agentbox"), 0o700) // root's, as sudo would leave it
	cmd := helperCmd(t, exeForOthers(t), "runtimedir", "")
	cmd.Env = append(cmd.Env, "XDG_RUNTIME_DIR="+base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v (%s)", err, out)
	}
	got := string(out)
	for _, want := range []string{"not owned by the current user", filepath.Join(base, "agentbox"), "belongs to uid 0", "sudo agentbox", "remove it as root"} {
		if !strings.Contains(got, want) {
			t.Errorf("uid 1001 got %q, want it to contain %q", got, want)
		}
	}
}

func TestStateAndConfigDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "relative/ignored")
	s, err := StateDir()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	if s != filepath.Join(home, ".local/state/agentbox") || c != filepath.Join(home, ".config/agentbox") {
		t.Errorf("StateDir %s, ConfigDir %s", s, c)
	}
	for _, d := range []string{s, c} {
		if err := CheckOwner(d, true); err != nil {
			t.Error(err)
		}
	}
	// A config dir the user made with mkdir (0755) is fine; a group-writable one is not.
	chmod(t, c, 0o755)
	if _, err := ConfigDir(); err != nil {
		t.Errorf("ConfigDir with a 0755 directory: %v", err)
	}
	chmod(t, c, 0o775)
	if _, err := ConfigDir(); !errors.Is(err, ErrBadMode) {
		t.Errorf("ConfigDir with a 0775 directory: %v, want ErrBadMode", err)
	}
	chmod(t, s, 0o755)
	if _, err := StateDir(); !errors.Is(err, ErrBadMode) {
		t.Errorf("StateDir with a 0755 directory: %v, want ErrBadMode", err)
	}
	x := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(x, "state"))
	if s, err := StateDir(); err != nil || s != filepath.Join(x, "state", "agentbox") {
		t.Errorf("StateDir with XDG_STATE_HOME = %s, %v", s, err)
	}
}

// TestCreateRefusesForeignParent guards squatting one level up: agentbox does not create its
// directory in a world-writable, non-sticky directory.
func TestCreateRefusesForeignParent(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	mkdir(t, open, 0o777)
	t.Setenv("XDG_RUNTIME_DIR", open)
	_, err := RuntimeDir()
	if !errors.Is(err, ErrBadMode) || !strings.Contains(err.Error(), "not sticky") {
		t.Fatalf("RuntimeDir in a world-writable dir: %v", err)
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestCheckOwnerFiles(t *testing.T) {
	dir := privateDir(t)
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwner(f, false); err != nil {
		t.Errorf("0600 file: %v", err)
	}
	if err := CheckOwner(f, true); !errors.Is(err, ErrBadMode) {
		t.Errorf("file as dir: %v", err)
	}
	if err := os.Chmod(f, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwner(f, false); !errors.Is(err, ErrBadMode) {
		t.Errorf("0644 file: %v", err)
	}
	if err := CheckOwner(dir, false); !errors.Is(err, ErrBadMode) {
		t.Errorf("dir as file: %v", err)
	}
	if err := CheckOwner(filepath.Join(dir, "missing"), false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

func TestListenAccept(t *testing.T) {
	path := filepath.Join(privateDir(t), "api.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("socket %v %v, want a 0600 socket", fi.Mode(), err)
	}
	if err := CheckOwner(path, false); err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid, uid, gid, err := PeerCred(c.(*net.UnixConn))
	if err != nil || pid != os.Getpid() || uid != os.Getuid() || gid != os.Getgid() {
		t.Errorf("PeerCred = %d %d %d %v, want our own", pid, uid, gid, err)
	}
	if same, err := ConnInSameUserNS(c.(*net.UnixConn)); err != nil || !same {
		t.Errorf("ConnInSameUserNS = %v, %v", same, err)
	}
	if same, err := PeerInSameUserNS(os.Getpid()); err != nil || !same {
		t.Errorf("PeerInSameUserNS(self) = %v, %v", same, err)
	}
	l.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
}

func TestListenStale(t *testing.T) {
	dir := privateDir(t)
	path := filepath.Join(dir, "api.sock")

	t.Run("stale socket of ours is replaced", func(t *testing.T) {
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ul.SetUnlinkOnClose(false)
		ul.Close() // a crashed daemon leaves its socket behind
		l, err := Listen(path)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		l.Close()
	})
	t.Run("live socket is in use", func(t *testing.T) {
		l, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := Listen(path); !errors.Is(err, ErrInUse) {
			t.Fatalf("second Listen = %v, want ErrInUse", err)
		}
	})
	t.Run("regular file is not removed", func(t *testing.T) {
		if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		if _, err := Listen(path); !errors.Is(err, ErrBadMode) {
			t.Fatalf("Listen over a file = %v, want ErrBadMode", err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
			t.Fatalf("file changed: %q %v", b, err)
		}
	})
	t.Run("symlink is not followed or removed", func(t *testing.T) {
		target := filepath.Join(privateDir(t), "victim")
		if err := os.WriteFile(target, []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		if _, err := Listen(path); !errors.Is(err, ErrBadMode) {
			t.Fatalf("Listen over a symlink = %v, want ErrBadMode", err)
		}
		if _, err := os.Stat(target); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("foreign socket is not removed", func(t *testing.T) {
		needRoot(t, "chown a socket to another uid")
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ul.SetUnlinkOnClose(false)
		ul.Close()
		defer os.Remove(path)
		if err := os.Lchown(path, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(path); !errors.Is(err, ErrNotOwned) {
			t.Fatalf("Listen over a foreign socket = %v, want ErrNotOwned", err)
		}
		if _, err := os.Lstat(path); err != nil {
			t.Fatalf("foreign socket removed: %v", err)
		}
	})
	t.Run("unsafe directory", func(t *testing.T) {
		open := filepath.Join(t.TempDir(), "open")
		mkdir(t, open, 0o755)
		if _, err := Listen(filepath.Join(open, "s.sock")); !errors.Is(err, ErrBadMode) {
			t.Fatalf("Listen in a 0755 dir = %v, want ErrBadMode", err)
		}
	})
}

// exposedListener listens in a directory that others can traverse and makes the socket
// connectable by everyone, as a socket reachable through a bind mount would be. Listen's own
// directory check would refuse this, so the permissions are opened after Listen.
func exposedListener(t *testing.T) (*Listener, string, chan error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "safesocket-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	refused := make(chan error, 4)
	l.Refused = func(err error) { refused <- err }
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	return l, path, refused
}

// exeForOthers copies the test binary where another uid can run it.
func exeForOthers(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "safesocket-exe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(selfExe(t))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "safesocket.test")
	if err := os.WriteFile(exe, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// acceptAfterRefusal runs the helper, which connects and waits for the server to close on it,
// then connects from this process: Accept must skip the helper and return our connection.
func acceptAfterRefusal(t *testing.T, l *Listener, path string, refused chan error, cmd *exec.Cmd) error {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
			close(accepted)
			return
		}
		accepted <- c
	}()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v (%s)", err, line)
	}
	if strings.TrimSpace(line) != "closed" {
		t.Fatalf("helper saw %q, want the connection closed", line)
	}
	var why error
	select {
	case why = <-refused:
	default:
		t.Fatal("refusal not reported to the Refused hook")
	}
	own, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	c, ok := <-accepted
	if !ok {
		t.FailNow()
	}
	defer c.Close()
	if pid, _, _, _ := PeerCred(c.(*net.UnixConn)); pid != os.Getpid() {
		t.Errorf("Accept returned pid %d's connection, want ours", pid)
	}
	return why
}

func TestAcceptRefusesOtherUID(t *testing.T) {
	needRoot(t, "run a client as uid 1001 (SysProcAttr.Credential)")
	l, path, refused := exposedListener(t)
	cmd := helperCmd(t, exeForOthers(t), "dial", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	why := acceptAfterRefusal(t, l, path, refused, cmd)
	if !errors.Is(why, ErrPeerRefused) || !strings.Contains(why.Error(), "runs as uid 1001") {
		t.Errorf("refusal reason %v", why)
	}
}

// TestAcceptRefusesOtherUserNS guards the box boundary: a process of the same uid inside a
// box (its own user namespace) must not reach the API even when it can see the socket.
func TestAcceptRefusesOtherUserNS(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	l, path, refused := exposedListener(t)
	cmd := helperCmd(t, exeForOthers(t), "dial", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}
	if err := exec.Command("unshare", "--user", "true").Run(); err != nil {
		testenv.NoBoxes(t, "cannot create a user namespace here: %v", err)
	}
	why := acceptAfterRefusal(t, l, path, refused, cmd)
	if !errors.Is(why, ErrPeerRefused) || !strings.Contains(why.Error(), "another user namespace") {
		t.Errorf("refusal reason %v", why)
	}
}

func TestPeerInSameUserNSGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The pid is reaped and (almost surely) unused: the check must fail, not say yes.
	if same, err := PeerInSameUserNS(cmd.Process.Pid); err == nil && same {
		t.Skip("pid was reused by another process of ours")
	} else if err == nil {
		t.Errorf("PeerInSameUserNS(dead pid) = %v, nil; want an error", same)
	}
	if _, err := PeerInSameUserNS(0); err == nil {
		t.Error("PeerInSameUserNS(0) succeeded")
	}
}

func TestLockAcrossProcesses(t *testing.T) {
	path := filepath.Join(privateDir(t), "probe.lock")
	exe := selfExe(t)
	run := func() string {
		out, err := helperCmd(t, exe, "trylock", path).Output()
		if err != nil {
			t.Fatalf("helper: %v (%s)", err, out)
		}
		return strings.TrimSpace(string(out))
	}

	l, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "busy" {
		t.Fatalf("other process while we hold the lock: %q, want busy", got)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock in this process = %v, want ErrLocked", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "locked" {
		t.Fatalf("other process after Unlock: %q, want locked", got)
	}

	// Now the helper holds the lock until its stdin closes; Lock waits for it.
	cmd := helperCmd(t, exe, "trylock", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper: %q", line)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock while the helper holds it = %v, want ErrLocked", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := Lock(path)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after the helper let go: %v", err)
	}
	if err := CheckOwner(path, false); err != nil {
		t.Errorf("lock file: %v", err)
	}
}

func TestLockRefusals(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		dir := privateDir(t)
		target := filepath.Join(dir, "target")
		if err := os.WriteFile(target, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "x.lock")
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		if _, err := Lock(path); !errors.Is(err, ErrBadMode) {
			t.Fatalf("Lock through a symlink = %v, want ErrBadMode", err)
		}
	})
	t.Run("foreign lock file", func(t *testing.T) {
		needRoot(t, "chown a lock file to another uid")
		path := filepath.Join(privateDir(t), "x.lock")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		_, err := TryLock(path)
		if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "uid 1001") {
			t.Fatalf("TryLock on a foreign lock file = %v, want ErrNotOwned", err)
		}
	})
	t.Run("unsafe directory", func(t *testing.T) {
		open := filepath.Join(t.TempDir(), "open")
		mkdir(t, open, 0o777)
		if _, err := TryLock(filepath.Join(open, "x.lock")); !errors.Is(err, ErrBadMode) {
			t.Fatalf("TryLock in a 0777 dir = %v, want ErrBadMode", err)
		}
	})
}

// TestRuntimeDirFallbackOrder: with XDG_RUNTIME_DIR unset, the login manager's runtime directory is
// used when it is the caller's own (0700); else the name in /tmp. When another user took that
// name first (review 10, F9; as root, the test makes one of another uid's), the error says how to
// choose a directory of one's own.
func TestRuntimeDirFallbackOrder(t *testing.T) {
	base := t.TempDir()
	runUser := filepath.Join(base, "run-user")
	tmp := filepath.Join(base, "tmp-agentbox")
	if err := os.Mkdir(runUser, 0o755); err != nil {
		t.Fatal(err)
	}
	// Not 0700: not taken for the login manager's.
	if dir, err := fallbackRuntimeDir(os.Getuid(), runUser, tmp); err != nil || dir != tmp {
		t.Errorf("with a 0755 run-user dir: %s, %v; want %s", dir, err, tmp)
	}
	if err := os.Chmod(runUser, 0o700); err != nil {
		t.Fatal(err)
	}
	if dir, err := fallbackRuntimeDir(os.Getuid(), runUser, tmp); err != nil || dir != filepath.Join(runUser, "agentbox") {
		t.Errorf("with the caller's run-user dir: %s, %v; want %s/agentbox", dir, err, runUser)
	}
	needRoot(t, "chown a directory to another uid")
	taken := filepath.Join(base, "taken")
	if err := os.Mkdir(taken, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(taken, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	_, err := fallbackRuntimeDir(0, filepath.Join(base, "absent"), taken)
	if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "export XDG_RUNTIME_DIR=") {
		t.Errorf("a /tmp name another user took: %v; want ErrNotOwned and how to set XDG_RUNTIME_DIR", err)
	}
}

// TestUnlockWithCopiedDescriptor: a copy of the lock's descriptor elsewhere (what a child of
// this process holds between its fork and its exec, close-on-exec or not; here a dup) does not
// keep the lock after Unlock. Before, Unlock only closed its descriptor, and the copy held the
// lock: the likely cause of a daemon started right after another one of the same process
// stopped finding it "running" (TestFailedRecordKeepsLaunchDir, once, as the ordinary user in a
// .ci/run).
func TestUnlockWithCopiedDescriptor(t *testing.T) {
	path := filepath.Join(privateDir(t), "daemon.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := syscall.Dup(int(l.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(copied)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after Unlock, a copy of the descriptor open: %v; want the lock free", err)
	}
	l2.Unlock()
}
