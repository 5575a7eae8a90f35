// Package sshtest runs real OpenSSH for tests: an ssh-agent, an sshd on a loopback port with
// its own host key and configuration serving bare git repositories, and keys made by
// ssh-keygen. Tests that need a program the machine lacks are skipped.
package sshtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// The rig runs real OpenSSH: an ssh-agent holding two ed25519 keys ("granted" and "other"),
// and an sshd on a loopback port with its own host key and configuration, serving bare git
// repositories to the calling user.

func Need(t testing.TB, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed: %v", p, err)
		}
	}
}

// ShortTempDir returns a directory with a short path (unix socket paths are limited to 107
// bytes, and t.TempDir's can be longer).
func ShortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func Run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	out, err := RunErr(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func RunErr(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitFor polls cond; it bounds the wait only so that a broken test ends.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type Key struct {
	Path string // private key file; Path+".pub" is the public key
	Pub  ssh.PublicKey
	FP   string // SHA-256 fingerprint
}

func Keygen(t testing.TB, path, typ, comment string) Key {
	t.Helper()
	args := []string{"-q", "-t", typ, "-N", "", "-C", comment, "-f", path}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	Run(t, nil, "ssh-keygen", args...)
	b, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Path: path, Pub: pub, FP: ssh.FingerprintSHA256(pub)}
}

// Agent is a real ssh-agent.
type Agent struct {
	Socket string
}

func StartAgent(t testing.TB, dir string, keys ...Key) *Agent {
	t.Helper()
	Need(t, "ssh-agent", "ssh-add")
	sock := filepath.Join(dir, "user-agent.sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	WaitFor(t, "ssh-agent socket", func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	a := &Agent{Socket: sock}
	for _, k := range keys {
		Run(t, a.Env(), "ssh-add", "-q", k.Path)
	}
	return a
}

func (a *Agent) Env() []string { return []string{"SSH_AUTH_SOCK=" + a.Socket} }

// Server is a real sshd serving bare repositories under repos.
type Server struct {
	Port     int
	HostKey  ssh.PublicKey
	AuthKeys string // the AuthorizedKeysFile
	Repos    string
	User     string
	Log      string
}

func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func StartSSHD(t testing.TB, dir string, authorized ...Key) *Server {
	t.Helper()
	Need(t, "ssh", "git", "ssh-keygen")
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Skipf("sshd is not installed: %v", err)
	}
	if os.Getuid() == 0 {
		// sshd run by root insists on its privilege-separation directory (the Debian
		// service creates it at start).
		if _, err := os.Stat("/run/sshd"); err != nil {
			if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
				t.Skipf("sshd needs /run/sshd: %v", err)
			}
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{User: u.Username, Repos: filepath.Join(dir, "repos"), AuthKeys: filepath.Join(dir, "authorized_keys"), Log: filepath.Join(dir, "sshd.log")}
	if err := os.Mkdir(s.Repos, 0o755); err != nil {
		t.Fatal(err)
	}
	hk := Keygen(t, filepath.Join(dir, "host_ed25519"), "ed25519", "host")
	s.HostKey = hk.Pub
	s.Authorize(t, authorized...)
	cfg := filepath.Join(dir, "sshd_config")
	var lastErr string
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = FreePort(t)
		conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile none
AuthorizedKeysFile %s
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
`, s.Port, hk.Path, s.AuthKeys)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sshd, "-D", "-e", "-f", cfg)
		logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(exited) }()
		up := false
		for i := 0; i < 500 && !up; i++ {
			select {
			case <-exited:
				i = 500
				continue
			default:
			}
			if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(s.Port)); err == nil {
				c.Close()
				up = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if up {
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			return s
		}
		cmd.Process.Kill()
		<-exited
		b, _ := os.ReadFile(s.Log)
		lastErr = string(b)
	}
	t.Fatalf("sshd did not start:\n%s", lastErr)
	return nil
}

// Authorize replaces the server's authorized keys.
func (s *Server) Authorize(t testing.TB, keys ...Key) {
	t.Helper()
	var b bytes.Buffer
	for _, k := range keys {
		b.Write(ssh.MarshalAuthorizedKey(k.Pub))
	}
	if err := os.WriteFile(s.AuthKeys, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// HostEntry is the configured git.ssh.hosts entry for the server.
func (s *Server) HostEntry() string { return "localhost:" + strconv.Itoa(s.Port) }

// KnownHostsLine returns a known_hosts line for the server under name, hashed when asked.
func (s *Server) KnownHostsLine(name string, hashed bool) string {
	if hashed {
		name = HashName(name, []byte("0123456789abcdefghij"))
	}
	return name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.HostKey)))
}

// BareRepo creates a bare repository with one commit on main and returns its path.
func (s *Server) BareRepo(t testing.TB, name string, payload int) string {
	t.Helper()
	bare := filepath.Join(s.Repos, name)
	Run(t, nil, "git", "init", "-q", "--bare", "-b", "main", bare)
	work := filepath.Join(t.TempDir(), "seed")
	Run(t, nil, "git", "init", "-q", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if payload > 0 {
		WriteRandom(t, filepath.Join(work, "payload.bin"), payload)
	}
	Run(t, nil, "git", "-C", work, "add", ".")
	Run(t, GitIdentity(), "git", "-C", work, "commit", "-q", "-m", "seed")
	Run(t, nil, "git", "-C", work, "push", "-q", bare, "main")
	return bare
}

func GitIdentity() []string {
	return []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
}

func WriteRandom(t testing.TB, path string, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A cheap deterministic stream that does not compress (xorshift).
	x := uint64(88172645463325252)
	buf := make([]byte, 0, 1<<16)
	for n > 0 {
		buf = buf[:0]
		for len(buf) < cap(buf) && len(buf) < n {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			buf = append(buf, byte(x), byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56))
		}
		if len(buf) > n {
			buf = buf[:n]
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
		n -= len(buf)
	}
}

// HashName returns name hashed as ssh-keygen -H writes it.
func HashName(name string, salt []byte) string {
	m := hmac.New(sha1.New, salt)
	m.Write([]byte(name))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
