package attack

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/proc"
)

// HostOptions say where the boxes under attack are launched from. The zero value uses the
// calling process's environment.
type HostOptions struct {
	// Home is the $HOME boxes are launched with ("" means $HOME).
	Home string
	// XDGRuntimeDir is the $XDG_RUNTIME_DIR of the daemon ("" means $XDG_RUNTIME_DIR; when
	// that is unset too, the runtime-dir socket target is unavailable).
	XDGRuntimeDir string
	// RuntimeDir is agentbox's own runtime directory (the API socket's directory).
	RuntimeDir string
	// Workspace is the boxes' workspace.
	Workspace string
	// OutsideDirs are more host directories outside the workspace to watch for writes.
	OutsideDirs []string
	// Netns asks for the veth-pair target; it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN on
	// the host).
	Netns bool
	// CallerTTY is the terminal of the process that launches the boxes ("" when none).
	CallerTTY string
	// Sessions, when set, makes and revokes pairing sessions through the daemon under test,
	// for the pairing attempts; nil leaves those attempts without a target (skipped).
	Sessions Sessions
}

// Sessions makes and revokes pairing sessions of the daemon under test.
type Sessions interface {
	Create() (id, pairing string, err error)
	Revoke(id string) error
}

// SecretEnvNames are the variables Host.Env sets to fake secrets.
var SecretEnvNames = []string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY"}

// Host holds the host-side targets of the attempts: listeners that count what reaches them,
// fake secrets, a process to protect. Close removes all of it.
type Host struct {
	Targets Targets
	// InjectMarker is the host file that the terminal attempt's payload would create.
	InjectMarker string

	mu       sync.Mutex
	accepted map[string]int
	closers  []func() error
	sleeper  chan struct{} // closed when the host process has exited
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// SetUp makes the host-side targets. Targets that cannot be made here are recorded in
// Targets.Unavailable with the reason; SetUp fails only when the basics cannot be made.
func SetUp(o HostOptions) (h *Host, err error) {
	h = &Host{accepted: map[string]int{}, sleeper: make(chan struct{})}
	defer func() {
		if err != nil {
			h.Close()
			h = nil
		}
	}()
	if o.Home == "" {
		o.Home = os.Getenv("HOME")
	}
	if o.XDGRuntimeDir == "" {
		o.XDGRuntimeDir = os.Getenv("XDG_RUNTIME_DIR")
	}
	id := randHex(6)
	t := &h.Targets
	t.Home, t.Workspace, t.RuntimeDir = o.Home, o.Workspace, o.RuntimeDir
	t.SecretMarker = "agentbox-fake-secret-"
	t.SecretEnv = SecretEnvNames
	t.Unavailable = map[string]string{}

	// Fake secrets: a key in ~/.ssh, and a file in /root when run by root.
	ssh := filepath.Join(o.Home, ".ssh")
	if _, err := os.Stat(ssh); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(ssh, 0o700); err != nil {
			return nil, err
		}
		h.onClose(func() error { return os.Remove(ssh) })
	}
	key := filepath.Join(ssh, marker+id)
	if err := h.writeSecret(key, "-----BEGIN OPENSSH PRIVATE KEY-----\n"); err != nil {
		return nil, err
	}
	if os.Getuid() == 0 && o.Home != "/root" {
		if st, err := os.Stat("/root"); err == nil && st.IsDir() {
			if err := h.writeSecret(filepath.Join("/root", "."+marker+id), ""); err != nil {
				return nil, err
			}
		}
	}

	// Directories outside the workspace.
	for _, base := range []string{"/var/tmp", os.TempDir()} {
		d, err := os.MkdirTemp(base, marker)
		if err != nil {
			continue
		}
		os.Chmod(d, 0o755)
		h.onClose(func() error { return os.RemoveAll(d) })
		t.OutsideDirs = append(t.OutsideDirs, d)
	}
	t.OutsideDirs = append(t.OutsideDirs, o.Home)
	t.OutsideDirs = append(t.OutsideDirs, o.OutsideDirs...)
	if len(t.OutsideDirs) > 0 {
		h.InjectMarker = filepath.Join(t.OutsideDirs[0], marker+"injected")
		t.Inject = "touch " + h.InjectMarker + "\n"
	}

	// Listeners.
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcp listener: %w", err)
	}
	if err := h.serve("tcp", tcp); err != nil {
		return nil, err
	}
	t.TCP = tcp.Addr().String()

	t.Abstract = marker + id
	abs, err := net.Listen("unix", "@"+t.Abstract)
	if err != nil {
		return nil, fmt.Errorf("abstract socket: %w", err)
	}
	if err := h.serve("abstract", abs); err != nil {
		return nil, err
	}

	if o.XDGRuntimeDir == "" {
		t.Unavailable["pathSocket"] = "XDG_RUNTIME_DIR is not set"
	} else {
		p := filepath.Join(o.XDGRuntimeDir, marker+id+".sock")
		ps, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("runtime-dir socket: %w", err)
		}
		if err := h.serve("pathSocket", ps); err != nil {
			return nil, err
		}
		t.PathSocket = p
	}

	switch {
	case !o.Netns:
		t.Unavailable["netns"] = "not asked for"
	case os.Getuid() != 0:
		t.Unavailable["netns"] = "needs root: an ordinary user cannot add a veth pair to the host's network namespace, " +
			"and a pair made with unshare in a user namespace is not routed from the host, so the case would pass whatever the box does"
	default:
		addr, err := h.netns(id)
		if err != nil {
			return nil, fmt.Errorf("veth target: %w", err)
		}
		t.Netns = addr
	}

	// A host process.
	cmd := exec.Command("sleep", "1000000")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("host process: %w", err)
	}
	t.HostPid = cmd.Process.Pid
	go func() { cmd.Wait(); close(h.sleeper) }()
	h.onClose(func() error { cmd.Process.Kill(); <-h.sleeper; return nil })
	if err := h.setUpMore(o, id); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Host) writeSecret(p, prefix string) error {
	secret := prefix + h.Targets.SecretMarker + randHex(16) + "\n"
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		return fmt.Errorf("fake secret: %w", err)
	}
	h.onClose(func() error { return os.Remove(p) })
	h.Targets.SecretFiles = append(h.Targets.SecretFiles, p)
	return nil
}

// Env returns the fake secrets as KEY=VALUE entries for the client's environment.
func (h *Host) Env() []string {
	var env []string
	for _, n := range h.Targets.SecretEnv {
		env = append(env, n+"="+h.Targets.SecretMarker+strings.ToLower(n))
	}
	return env
}

func (h *Host) onClose(f func() error) { h.closers = append(h.closers, f) }

// serve accepts on l, counting every connection under name, after a control connection from
// the host has shown that the target is reachable.
func (h *Host) serve(name string, l net.Listener) error {
	h.onClose(l.Close)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.accepted[name]++
			h.mu.Unlock()
			c.Write([]byte("agentbox-attack target\n"))
			c.Close()
		}
	}()
	addr := l.Addr().String()
	if l.Addr().Network() == "unix" && strings.HasPrefix(addr, "@") {
		addr = "@" + addr[1:]
	}
	c, err := net.DialTimeout(l.Addr().Network(), addr, 10*time.Second)
	if err != nil {
		return fmt.Errorf("control connection to %s %s: %w", name, addr, err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		return fmt.Errorf("control connection to %s: %w", name, err)
	}
	h.mu.Lock()
	h.accepted[name] = 0
	h.mu.Unlock()
	return nil
}

// Accepted returns how many connections reached the named target since it was set up.
func (h *Host) Accepted(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted[name]
}

func checkAccepted(name string) func(h *Host, o Observation) error {
	return func(h *Host, o Observation) error {
		if n := h.Accepted(name); n > 0 {
			return fmt.Errorf("%d connection(s) from the box reached the host's %s listener", n, name)
		}
		return nil
	}
}

func (h *Host) sleeperAlive() bool {
	select {
	case <-h.sleeper:
		return false
	default:
		return true
	}
}

// netns makes a network namespace behind a veth pair from the host's, with a listener in it,
// and returns the listener's address. Only private addresses, only between the two ends.
func (h *Host) netns(id string) (string, error) {
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	used, _ := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	var subnet string
	for i := 0; i < 64; i++ {
		b := make([]byte, 1)
		rand.Read(b)
		s := "10.200." + strconv.Itoa(int(b[0])) + "."
		if !bytes.Contains(used, []byte(s)) {
			subnet = s
			break
		}
	}
	if subnet == "" {
		return "", errors.New("no free 10.200.x.0/30 subnet")
	}
	ns := "abx" + id[:6]
	if err := ip("netns", "add", ns); err != nil {
		return "", err
	}
	h.onClose(func() error { return ip("netns", "del", ns) })
	hostEnd, nsEnd := ns+"h", ns+"n"
	for _, args := range [][]string{
		{"link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd, "netns", ns},
		{"addr", "add", subnet + "1/30", "dev", hostEnd},
		{"link", "set", hostEnd, "up"},
		{"-n", ns, "addr", "add", subnet + "2/30", "dev", nsEnd},
		{"-n", ns, "link", "set", nsEnd, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			return "", err
		}
	}
	var l net.Listener
	var lerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			lerr = err
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			lerr = err
			runtime.UnlockOSThread()
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			lerr = fmt.Errorf("setns %s: %w", ns, err)
			runtime.UnlockOSThread()
			return
		}
		// The socket belongs to the namespace it is made in.
		l, lerr = net.Listen("tcp", subnet+"2:0")
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with the goroutine instead of serving others.
			return
		}
		runtime.UnlockOSThread()
	}()
	<-done
	if lerr != nil {
		return "", fmt.Errorf("listen in %s: %w", ns, lerr)
	}
	// The control connection goes from the host's namespace over the veth pair.
	if err := h.serve("netns", l); err != nil {
		return "", err
	}
	return l.Addr().String(), nil
}

// Close removes every target, in reverse order of creation.
func (h *Host) Close() error {
	var errs []error
	for i := len(h.closers) - 1; i >= 0; i-- {
		if err := h.closers[i](); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	h.closers = nil
	return errors.Join(errs...)
}

// threadsRun reports whether process pid, whose leader thread is a zombie, still has another
// thread (a leader that exited alone while its other threads run: the process runs code).
func threadsRun(pid int) bool {
	ts, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	return err != nil || len(ts) > 1
}

// ProcessesIn returns the host pids of processes in the pid namespace named ns (as
// readlink /proc/PID/ns/pid shows it: "pid:[4026531836]") that have not exited. Processes the
// caller may not inspect are skipped, and so are zombies: an exited process keeps its
// /proc/PID/ns/pid until its parent reaps it, and box-init is one from its exit, which the
// daemon's pidfd sees and after which `agentbox run` returns, until the shim's wait (e2e
// TestAttack/escape-tree counted box-init so in a .ci/run). A zombie runs nothing, unless
// only its leader thread exited and other threads run (threadsRun): such a process is kept.
func ProcessesIn(ns string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			if st, err := proc.State(pid); err == nil && (st != 'Z' || threadsRun(pid)) {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}
