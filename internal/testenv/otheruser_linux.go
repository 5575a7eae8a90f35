// Package testenv holds set-up that tests of several packages share.
package testenv

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// OtherUID is the uid tests run a process as when they need another user (root only).
const OtherUID = 1001

// SecondUID is a second ordinary user beside OtherUID, for tests where one ordinary user
// attacks another (root only). Like OtherUID it needs no account: the kernel knows only numbers.
const SecondUID = 1002

// HelperCopy copies the running test binary into a fresh 0777 directory (removed at cleanup)
// that every user can enter, so that the test can start it as another user, and returns the
// directory and the copy. It skips the test when not root.
func HelperCopy(t *testing.T) (dir, helper string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	dir, err := os.MkdirTemp("", "other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	helper = filepath.Join(dir, "helper")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, helper
}

// AsUser returns the process attributes that run a command as uid (group uid, no supplementary
// groups).
func AsUser(uid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
}

// ListenAsOtherUser starts the running test binary as OtherUID with args, the last of which is
// the path of a unix socket in dir (a 0777 directory made here, removed at cleanup), and waits
// for its first line on stdout, which must be "listening" (the test binary's TestMain serves
// args). It returns dir; the process is killed at cleanup. It skips the test when not root.
func ListenAsOtherUser(t *testing.T, name string, args ...string) (dir string) {
	t.Helper()
	dir, helper := HelperCopy(t)
	cmd := exec.Command(helper, append(args, filepath.Join(dir, name))...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: OtherUID, Gid: OtherUID}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("listener as uid %d: %q, %v", OtherUID, line, err)
	}
	return dir
}

// Announce listens on the unix socket path (mode 0666, so that the test's user can connect)
// and says "listening" on stdout: the other user's side of ListenAsOtherUser. It returns nil,
// having said why on stdout, when it cannot listen.
func Announce(path string) net.Listener {
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		return nil
	}
	os.Chmod(path, 0o666)
	os.Stdout.WriteString("listening\n")
	return ln
}
