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

// ListenAsOtherUser starts the running test binary as OtherUID with args, the last of which is
// the path of a unix socket in dir (a 0777 directory made here, removed at cleanup), and waits
// for its first line on stdout, which must be "listening" (the test binary's TestMain serves
// args). It returns dir; the process is killed at cleanup. It skips the test when not root.
func ListenAsOtherUser(t *testing.T, name string, args ...string) (dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a listener as another user")
	}
	dir, err := os.MkdirTemp("", "other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	helper := filepath.Join(dir, "helper")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, b, 0o755); err != nil {
		t.Fatal(err)
	}
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
