package readiness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/plan"
)

// releaseTimeout bounds how long the attester waits for the prober's release (stdin EOF): a
// prober that died leaves no attester behind for long.
const releaseTimeout = 2 * time.Minute

// AttestMain is the entry point of `agentbox readiness-attest`, the program of a probe box. It
// takes no arguments and refuses any. It reads the challenge from the run directory, checks
// every fact itself, prints the attestation as one JSON line on stdout, then waits for stdin to
// end (the prober's release) and exits 0.
func AttestMain(args []string) int {
	if len(args) != 0 {
		fmt.Fprintf(os.Stderr, "usage: agentbox %s (it takes no arguments; it runs only in a readiness probe box)\n", AttestCommand)
		return 2
	}
	b, err := os.ReadFile(filepath.Join(plan.RunDir, ChallengeFile))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: read challenge: %v\n", AttestCommand, err)
		return 1
	}
	var ch Challenge
	if err := json.Unmarshal(b, &ch); err != nil || ch.Version != SchemaVersion {
		fmt.Fprintf(os.Stderr, "%s: bad challenge (version %d): %v\n", AttestCommand, ch.Version, err)
		return 1
	}
	a := attest(&ch)
	out, err := json.Marshal(a)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", AttestCommand, err)
		return 1
	}
	if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
		return 1
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(releaseTimeout):
	}
	return 0
}

func attest(ch *Challenge) *Attestation {
	a := &Attestation{Version: SchemaVersion, Nonce: ch.Nonce}
	a.Namespaces = map[string]uint64{}
	for _, k := range []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"} {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/ns/"+k, &st); err == nil {
			a.Namespaces[k] = st.Ino
		}
	}
	if up, err := loopbackUp(); err == nil {
		a.LoopbackUp = &up
	}
	a.Interfaces, _ = interfaces()
	a.RoutesOut, _ = routesOut()
	a.HostTCP = unreachable("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ch.TCPPort)))
	a.HostAbstract = unreachable("unix", "@"+ch.Abstract)
	a.X11 = x11()
	a.SessionSockets = sessionSockets(ch.HostSockets)
	a.GUIEnv = guiEnv()
	if abi, err := landlockABI(); err == nil {
		a.LandlockABI = &abi
	} else {
		zero := 0
		a.LandlockABI = &zero
	}
	a.LandlockEnforced = landlockEnforced()
	a.WorkspaceWritable = workspaceWritable(ch.Workspace, ch.Nonce)
	status, err := procStatus()
	if err == nil {
		if v, err := strconv.Atoi(status["Seccomp"]); err == nil {
			a.SeccompMode = &v
		}
		if v, err := strconv.Atoi(status["NoNewPrivs"]); err == nil {
			a.NoNewPrivs = &v
		}
		a.Caps = map[string]string{}
		for _, set := range CapSets {
			if v, ok := status[set]; ok {
				a.Caps[set] = v
			}
		}
	}
	a.SeccompDenied = seccompDenials()
	a.SecretUnreadable = secretUnreadable(ch.Secret, ch.Nonce)
	a.HostPidsHidden = hostPidsHidden(status["NSpid"], ch.HostPids)
	a.InitUnsignalable = initUnsignalable()
	if pid, err := grandchild(); err == nil {
		a.Grandchild = &pid
	}
	return a
}

func loopbackUp() (bool, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return false, err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return false, err
	}
	return ifr.Uint16()&unix.IFF_UP != 0, nil
}

// interfaces lists the interfaces of the box's /proc/net/dev.
func interfaces() ([]string, error) {
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		return nil, err
	}
	out := []string{}
	for i, line := range strings.Split(string(b), "\n") {
		if i < 2 {
			continue
		}
		if name, _, ok := strings.Cut(line, ":"); ok {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out, nil
}

// routesOut lists the routes of the box's /proc/net/route and /proc/net/ipv6_route through an
// interface other than lo.
func routesOut() ([]string, error) {
	out := []string{}
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue
		}
		if f[0] != "lo" {
			out = append(out, "ipv4 "+f[1]+" via "+f[0])
		}
	}
	// IPv6 may be disabled in the kernel: then there is no table and no IPv6 route.
	b, err = os.ReadFile("/proc/net/ipv6_route")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		if f[9] != "lo" {
			out = append(out, "ipv6 "+f[0]+"/"+f[1]+" via "+f[9])
		}
	}
	return out, nil
}

// unreachable tries to connect to a host endpoint; the property holds when it fails.
func unreachable(network, addr string) *Check {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err == nil {
		c.Close()
		return &Check{OK: false, Detail: "connected to host " + network + " " + addr}
	}
	return &Check{OK: true, Detail: network + " " + addr + ": " + errnoName(err)}
}

func x11() *Check {
	var seen []string
	if ents, err := os.ReadDir("/tmp/.X11-unix"); err == nil && len(ents) > 0 {
		seen = append(seen, fmt.Sprintf("/tmp/.X11-unix holds %d entries", len(ents)))
	}
	for n := 0; n < 64; n++ {
		for _, addr := range []string{fmt.Sprintf("@/tmp/.X11-unix/X%d", n), fmt.Sprintf("/tmp/.X11-unix/X%d", n)} {
			if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
				c.Close()
				seen = append(seen, "connected to "+addr)
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/unix"); err == nil && strings.Contains(string(b), ".X11-unix") {
		seen = append(seen, "an X11 socket is listed in the box's /proc/net/unix")
	}
	if len(seen) > 0 {
		return &Check{OK: false, Detail: strings.Join(seen, "; ")}
	}
	return &Check{OK: true, Detail: "no /tmp/.X11-unix, abstract and pathname X0–X63 refused"}
}

func sessionSockets(paths []string) *Check {
	if len(paths) == 0 {
		return &Check{OK: false, Detail: "the challenge names no host socket"}
	}
	var bad, seen []string
	for _, p := range paths {
		c, err := net.DialTimeout("unix", p, 2*time.Second)
		if err == nil {
			c.Close()
			bad = append(bad, "connected to "+p)
			continue
		}
		seen = append(seen, filepath.Base(p)+": "+errnoName(err))
	}
	if len(bad) > 0 {
		return &Check{OK: false, Detail: strings.Join(bad, "; ")}
	}
	return &Check{OK: true, Detail: strings.Join(seen, ", ")}
}

// guiVariables must not reach the box.
var guiVariables = []string{"DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"}

func guiEnv() *Check {
	var set []string
	for _, k := range guiVariables {
		if _, ok := os.LookupEnv(k); ok {
			set = append(set, k)
		}
	}
	if len(set) > 0 {
		return &Check{OK: false, Detail: "set in the box: " + strings.Join(set, ", ")}
	}
	return &Check{OK: true, Detail: strings.Join(guiVariables, ", ") + " unset"}
}

func landlockABI() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// landlockEnforced creates a character device node in /tmp: the mount and the user's
// permissions let the call reach the kernel's checks, the grants of /tmp do not include
// making devices, so Landlock refuses it with EACCES before the capability check (which would
// give EPERM) runs.
func landlockEnforced() *Check {
	p := fmt.Sprintf("/tmp/.agentbox-landlock-%d", os.Getpid())
	err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
	if err == nil {
		os.Remove(p)
		return &Check{OK: false, Detail: "mknod of a device in /tmp succeeded"}
	}
	if errors.Is(err, unix.EACCES) {
		return &Check{OK: true, Detail: "mknod outside the grants: EACCES (Landlock)"}
	}
	return &Check{OK: false, Detail: "mknod outside the grants: " + errnoName(err) + ", want EACCES from Landlock"}
}

func workspaceWritable(ws, nonce string) *Check {
	if ws == "" {
		return &Check{OK: false, Detail: "the challenge names no workspace"}
	}
	p := filepath.Join(ws, ".agentbox-readiness-write")
	if err := os.WriteFile(p, []byte(nonce), 0o600); err != nil {
		return &Check{OK: false, Detail: "write inside the grants failed: " + errnoName(err)}
	}
	os.Remove(p)
	return &Check{OK: true, Detail: "write inside the workspace works"}
}

func procStatus() (map[string]string, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m, sc.Err()
}

// seccompDenials calls each system call the filter must deny with arguments that make an
// unfiltered kernel fail differently (ESRCH, EFAULT, EINVAL), and reports the errno.
func seccompDenials() map[string]string {
	m := map[string]string{}
	const ptraceSeize = 0x4206
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, ptraceSeize, 0, 0, 0, 0, 0)
	m["ptrace"] = errnoName(e)
	_, _, e = unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, 1 /* a bad pointer: EFAULT unfiltered */, 8)
	m["bpf"] = errnoName(e)
	_, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
	m["io_uring_setup"] = errnoName(e)
	return m
}

func secretUnreadable(path, nonce string) *Check {
	if path == "" {
		return &Check{OK: false, Detail: "the challenge names no canary"}
	}
	b, err := os.ReadFile(path)
	if err == nil {
		if strings.Contains(string(b), nonce) {
			return &Check{OK: false, Detail: "read the host's ~/.ssh canary " + path}
		}
		return &Check{OK: false, Detail: "opened " + path}
	}
	return &Check{OK: true, Detail: path + ": " + errnoName(err)}
}

// hostPidsHidden checks that the box's /proc is its own pid namespace's: NSpid lists one level
// (a host procfs would list the host pid too), and the prober's host pids are absent.
func hostPidsHidden(nspid string, hostPids []int) *Check {
	levels := strings.Fields(nspid)
	if len(levels) != 1 {
		return &Check{OK: false, Detail: fmt.Sprintf("NSpid %q: this /proc shows pids of %d pid namespaces", nspid, len(levels))}
	}
	if len(hostPids) == 0 {
		return &Check{OK: false, Detail: "the challenge names no host pid"}
	}
	for _, pid := range hostPids {
		if pid > 1 {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				return &Check{OK: false, Detail: fmt.Sprintf("host pid %d is visible", pid)}
			}
		}
	}
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return &Check{OK: true, Detail: fmt.Sprintf("NSpid %s, %d processes visible, host pids %v absent", nspid, n, hostPids)}
}

func initUnsignalable() *Check {
	if os.Getpid() == 1 {
		return &Check{OK: false, Detail: "the attester is PID 1"}
	}
	err := unix.Kill(1, 0)
	if errors.Is(err, unix.EPERM) {
		return &Check{OK: true, Detail: "kill(1, 0): EPERM"}
	}
	return &Check{OK: false, Detail: "kill(1, 0): " + errnoName(err) + ", want EPERM"}
}

// grandchild leaves a double-forked grandchild in its own session (sh in a new session starts
// sleep in the background and exits) and returns its pid.
func grandchild() (int, error) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 3600 </dev/null >/dev/null 2>&1 & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, err
	}
	if err := unix.Kill(pid, 0); err != nil {
		return 0, fmt.Errorf("grandchild %d: %w", pid, err)
	}
	return pid, nil
}

// errnoName names the errno in err ("ECONNREFUSED"), or returns the error's text.
func errnoName(err error) string {
	if err == nil {
		return "no error"
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		if en == 0 {
			return "no error"
		}
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		return en.Error()
	}
	return err.Error()
}
