package attack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
)

// attempts is the registry: every attempt, in the order the probe runs them.
var attempts = []Attempt{
	// Filesystem.
	{Name: "write-outside-workspace", Category: CategoryFilesystem,
		Expect: "no file appears on the host outside the workspace (read-only system dirs, empty root, no host /var or /tmp)",
		Run:    writeOutside, Check: checkOutside},
	{Name: "read-home-ssh", Category: CategoryFilesystem,
		Expect: "the host's ~/.ssh is absent (the box's home is an empty tmpfs)", Run: readHomeSSH},
	{Name: "read-root", Category: CategoryFilesystem,
		Expect: "/root is absent or empty, and a file the host put there is unreadable", Run: readRoot},
	{Name: "write-core-pattern", Category: CategoryKernel,
		Expect: "/proc/sys and /proc/sysrq-trigger cannot be opened for writing, even by a box of root", Run: writeCorePattern},
	{Name: "setid-file", Category: CategoryFilesystem,
		Expect: "every way of setting a setuid or setgid bit fails with EPERM (seccomp)", Run: setidFile, Check: checkSetid},

	// Secrets.
	{Name: "env-secret", Category: CategorySecrets,
		Expect: "no variable of the client's environment but the allowlist reaches the box", Run: envSecret},
	{Name: "inherited-fd", Category: CategorySecrets,
		Expect: "the program starts with descriptors 0, 1 and 2 only", Run: inheritedFD},

	// Network.
	{Name: "tcp-host-loopback", Category: CategoryNetwork, Needs: "tcp",
		Expect: "a listener on the host's 127.0.0.1 is unreachable (own network namespace)",
		Run:    tcpHostLoopback, Check: checkAccepted("tcp")},
	{Name: "netns-veth", Category: CategoryNetwork, Needs: "netns",
		Expect: "a listener beyond a veth pair (routed from the host) is unreachable",
		Run:    netnsVeth, Check: checkAccepted("netns")},
	{Name: "interfaces-routes", Category: CategoryNetwork,
		Expect: "only lo is visible, and no route (/proc/net/route, if_inet6, dev, ipv6_route, netlink)", Run: interfacesRoutes},
	{Name: "abstract-socket", Category: CategoryNetwork, Needs: "abstract",
		Expect: "a host abstract unix socket is unreachable (per network namespace, and Landlock scope)",
		Run:    abstractSocket, Check: checkAccepted("abstract")},
	{Name: "runtime-dir-socket", Category: CategoryNetwork, Needs: "pathSocket",
		Expect: "a host socket under $XDG_RUNTIME_DIR does not exist in the box",
		Run:    runtimeDirSocket, Check: checkAccepted("pathSocket")},
	{Name: "api-socket", Category: CategoryNetwork,
		Expect: "the agentbox API socket and the launch's shim socket do not exist in the box", Run: apiSocket},

	// Processes.
	{Name: "ptrace", Category: CategoryProcess,
		Expect: "ptrace attach and seize fail with EPERM (seccomp), on a sibling and on box-init", Run: ptraceAttempt},
	{Name: "process-vm-readv", Category: CategoryProcess,
		Expect: "process_vm_readv and process_vm_writev fail with EPERM (seccomp)", Run: processVM},
	{Name: "proc-init", Category: CategoryProcess,
		Expect: "/proc/1/mem, environ, fd, maps, exe, root and cwd of box-init, and the fd directories of its threads, are unreadable (not dumpable; the box's /proc hides what the program may not ptrace)", Run: procInit},
	{Name: "pidfd-getfd", Category: CategoryProcess,
		Expect: "pidfd_getfd fails with EPERM (seccomp)", Run: pidfdGetfd},
	{Name: "kill-box-init", Category: CategoryProcess,
		Expect: "signals to box-init fail (Landlock signal scope) and it survives", Run: killBoxInit},
	{Name: "kill-host-process", Category: CategoryProcess, Needs: "hostPid",
		Expect: "a host process is invisible (own pid namespace) and survives",
		Run:    killHostProcess, Check: checkHostProcess},

	// Terminal.
	{Name: "tiocsti", Category: CategoryTerminal,
		Expect: "TIOCSTI and TIOCLINUX fail with EPERM on the controlling terminal, whatever the high bits of the command",
		Run:    tiocsti, Check: checkInjected},

	// Kernel surface.
	{Name: "mount", Category: CategoryKernel,
		Expect: "mount, umount, pivot_root and the new mount API fail (seccomp)", Run: mountAttempt},
	{Name: "unshare", Category: CategoryKernel,
		Expect: "unshare of every namespace fails with EPERM (seccomp)", Run: unshareAttempt},
	{Name: "setns", Category: CategoryKernel,
		Expect: "setns fails with EPERM (seccomp)", Run: setnsAttempt},
	{Name: "clone-namespace", Category: CategoryKernel,
		Expect: "clone with a namespace flag fails with EPERM (seccomp)", Run: cloneNamespace},
	{Name: "clone3", Category: CategoryKernel,
		Expect: "clone3 fails with ENOSYS before the kernel reads its arguments (seccomp)", Run: clone3Attempt},
	{Name: "io-uring", Category: CategoryKernel,
		Expect: "io_uring_setup fails with ENOSYS (seccomp)", Run: ioUring},
	{Name: "bpf", Category: CategoryKernel,
		Expect: "bpf fails with EPERM (seccomp)", Run: bpfAttempt},
	{Name: "keyctl", Category: CategoryKernel,
		Expect: "keyctl, add_key and request_key fail with EPERM (seccomp)", Run: keyctlAttempt},
	{Name: "x32-abi", Category: CategoryKernel,
		Expect: "a system call with the x32 bit set fails with EPERM (seccomp)", Run: x32ABI},
	{Name: "i386-abi", Category: CategoryKernel,
		Expect: "a system call through int 0x80 (AUDIT_ARCH_I386) fails with EPERM (seccomp arch check)", Run: i386ABI},

	// Cleanup.
	{Name: "escape-tree", Category: CategoryCleanup,
		Expect: "a double-forked, setsid'd process started in the box is gone once the box has ended",
		Run:    escapeTree, Check: checkEscapeTree},
}

// Marker is the name prefix of every file an attempt creates.
const marker = "agentbox-attack-"

// boxPrivate reports whether dir lies in a folder the box has a tmpfs of its own at (/tmp,
// /dev/shm, the box's home): a write there may succeed in the box, and only the host's check
// tells whether it reached the host. (A workspace in /dev/shm, as the test suites' folders lie
// in the ordinary user's pass of scripts/test.sh, has its parent folders in the box's
// /dev/shm, made for the workspace's bind.)
func (c *Context) boxPrivate(dir string) bool {
	for _, p := range []string{"/tmp", "/dev/shm", c.Targets.Home} {
		if p != "" && (dir == p || strings.HasPrefix(dir, p+"/")) {
			return true
		}
	}
	return false
}

func writeOutside(c *Context) Observation {
	var r result
	try := func(dir string) {
		p := filepath.Join(dir, marker+"write")
		err := os.WriteFile(p, []byte("written from a box\n"), 0o644)
		r.deny("create "+p, err)
		if err == nil {
			os.Remove(p)
		}
	}
	// Directories that exist in the box read-only, or not at all.
	for _, d := range []string{"/", "/etc", "/usr", "/usr/bin", "/var/tmp", "/run", "/proc", "/dev"} {
		try(d)
	}
	for _, d := range c.Targets.OutsideDirs {
		if c.boxPrivate(d) {
			// The box's home, /tmp and /dev/shm are its own tmpfs: a write there may succeed
			// in the box; the host check decides.
			p := filepath.Join(d, marker+"write")
			if err := os.MkdirAll(d, 0o755); err == nil {
				err = os.WriteFile(p, []byte("written from a box\n"), 0o644)
				r.note("create %s (box-private tmpfs): %v", p, err)
			} else {
				r.note("mkdir %s: %s", d, describe(err))
			}
			continue
		}
		try(d)
	}
	// A rename or link out of the workspace.
	if c.Targets.Workspace != "" {
		src := filepath.Join(c.Targets.Workspace, marker+"rename")
		if err := os.WriteFile(src, []byte("x"), 0o644); err == nil {
			for _, d := range append([]string{"/etc", "/usr"}, c.Targets.OutsideDirs...) {
				dst := filepath.Join(d, marker+"renamed")
				if c.boxPrivate(d) {
					continue
				}
				r.deny("link "+src+" → "+dst, os.Link(src, dst))
				r.deny("rename "+src+" → "+dst, os.Rename(src, dst))
			}
			os.Remove(src)
		}
	}
	return r.done()
}

func checkOutside(h *Host, o Observation) error {
	var found []string
	for _, d := range append([]string{"/", "/etc", "/usr", "/usr/bin", "/var/tmp", "/run", "/dev"}, h.Targets.OutsideDirs...) {
		for _, n := range []string{marker + "write", marker + "renamed"} {
			p := filepath.Join(d, n)
			if _, err := os.Lstat(p); err == nil {
				found = append(found, p)
				os.Remove(p)
			}
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("files written from the box appeared on the host: %v", found)
	}
	return nil
}

// readSecret tries to read p and reports a breach when it yields the marker.
func (r *result) readSecret(p, secretMarker string) {
	b, err := os.ReadFile(p)
	switch {
	case err != nil:
		r.note("read %s: %s", p, describe(err))
	case secretMarker != "" && bytes.Contains(b, []byte(secretMarker)):
		r.fail("read %s: got the host's secret", p)
	default:
		r.note("read %s: %d bytes, not the host's secret", p, len(b))
	}
}

func readHomeSSH(c *Context) Observation {
	var r result
	home := c.Targets.Home
	if home == "" {
		home = os.Getenv("HOME")
	}
	ssh := filepath.Join(home, ".ssh")
	ents, err := os.ReadDir(ssh)
	if err == nil && len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		r.fail("list %s: %v", ssh, names)
	} else if err != nil {
		r.note("list %s: %s", ssh, describe(err))
	} else {
		r.note("list %s: empty", ssh)
	}
	for _, f := range c.Targets.SecretFiles {
		for _, p := range []string{f, "/proc/self/root" + f, "/proc/1/root" + f, "/proc/1/cwd" + f} {
			r.readSecret(p, c.Targets.SecretMarker)
		}
	}
	for _, n := range []string{"id_rsa", "id_ed25519", "id_ecdsa", "config", "known_hosts", "authorized_keys"} {
		p := filepath.Join(ssh, n)
		if _, err := os.ReadFile(p); err == nil {
			r.fail("read %s", p)
		}
	}
	return r.done()
}

func readRoot(c *Context) Observation {
	var r result
	ents, err := os.ReadDir("/root")
	switch {
	case err != nil:
		r.note("list /root: %s", describe(err))
	case len(ents) == 0:
		r.note("list /root: empty")
	default:
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		// The box's own home may be /root (agentbox run by root with HOME=/root): an empty
		// tmpfs the program may have written to. The host's files must not be there.
		if c.Targets.Home == "/root" || os.Getenv("HOME") == "/root" {
			r.note("list /root (the box's own home): %v", names)
		} else {
			r.fail("list /root: %v", names)
		}
	}
	for _, f := range c.Targets.SecretFiles {
		if strings.HasPrefix(f, "/root/") {
			r.readSecret(f, c.Targets.SecretMarker)
		}
	}
	for _, n := range []string{".bashrc", ".profile", ".ssh/authorized_keys", ".bash_history"} {
		p := "/root/" + n
		b, err := os.ReadFile(p)
		if err == nil && len(b) > 0 {
			r.fail("read %s: %d bytes", p, len(b))
		}
	}
	return r.done()
}

func writeCorePattern(c *Context) Observation {
	var r result
	const cp = "/proc/sys/kernel/core_pattern"
	old, err := os.ReadFile(cp)
	if err != nil {
		r.note("read %s: %s", cp, describe(err))
	}
	f, err := os.OpenFile(cp, os.O_WRONLY, 0)
	r.deny("open "+cp+" for writing", err)
	if err == nil {
		// Write back what is there: the breach is shown, the host's setting is unchanged.
		if old != nil {
			_, werr := f.Write(old)
			r.note("rewrite %s with its own value: %v", cp, werr)
		}
		f.Close()
	}
	// Never written to: opening is the breach.
	for _, p := range []string{"/proc/sysrq-trigger", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches", "/proc/sys/fs/suid_dumpable"} {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		r.deny("open "+p+" for writing", err)
		if err == nil {
			f.Close()
		}
	}
	return r.done()
}

func setidFile(c *Context) Observation {
	var r result
	ws := c.Targets.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	r.fact("workspace", ws)
	base := filepath.Join(ws, marker+"setid")
	plain := base + "-chmod"
	if err := os.WriteFile(plain, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
		r.note("create %s: %s", plain, describe(err))
	}
	for _, mode := range []uint32{0o4755, 0o2755, 0o6755} {
		m := strconv.FormatUint(uint64(mode), 8)
		r.deny("fchmodat "+m, unix.Fchmodat(unix.AT_FDCWD, plain, mode, 0))
		_, _, e := unix.Syscall(unix.SYS_CHMOD, uintptr(unsafe.Pointer(bytePtr(plain))), uintptr(mode), 0)
		r.deny("chmod "+m, errno(e))
		if fd, err := unix.Open(plain, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			r.deny("fchmod "+m, unix.Fchmod(fd, mode))
			unix.Close(fd)
		}
		atFDCWD := unix.AT_FDCWD
		_, _, e = unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(atFDCWD), uintptr(unsafe.Pointer(bytePtr(plain))), uintptr(mode), 0, 0, 0)
		if e == unix.ENOSYS {
			r.note("fchmodat2 %s: ENOSYS (kernel)", m)
		} else {
			r.deny("fchmodat2 "+m, errno(e))
		}
	}
	createWith := func(what string, mk func(p string) error) {
		p := base + "-" + what
		err := mk(p)
		r.deny(what+" with mode 04755", err)
	}
	createWith("open", func(p string) error {
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	createWith("openat", func(p string) error {
		fd, err := unix.Openat(unix.AT_FDCWD, p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o2755)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	createWith("creat", func(p string) error {
		fd, err := unix.Creat(p, 0o6755)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	createWith("mknod", func(p string) error { return unix.Mknod(p, unix.S_IFREG|0o4755, 0) })
	createWith("mknodat", func(p string) error { return unix.Mknodat(unix.AT_FDCWD, p, unix.S_IFREG|0o2755, 0) })
	createWith("o_tmpfile", func(p string) error {
		fd, err := unix.Open(ws, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	// What the box sees, in case a call reported failure but changed the mode anyway.
	matches, _ := filepath.Glob(base + "-*")
	for _, p := range matches {
		if st, err := os.Lstat(p); err == nil && st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			r.fail("%s has mode %v", p, st.Mode())
		}
	}
	return r.done()
}

func checkSetid(h *Host, o Observation) error {
	ws := o.Facts["workspace"]
	if ws == "" {
		ws = h.Targets.Workspace
	}
	matches, _ := filepath.Glob(filepath.Join(ws, marker+"setid-*"))
	var bad []string
	for _, p := range matches {
		if st, err := os.Lstat(p); err == nil && st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			bad = append(bad, fmt.Sprintf("%s (%v)", p, st.Mode()))
		}
		os.Remove(p)
	}
	if len(bad) > 0 {
		return fmt.Errorf("setuid/setgid files made in the box are on the host: %v", bad)
	}
	return nil
}

func bytePtr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		return nil
	}
	return p
}

func envSecret(c *Context) Observation {
	var r result
	names := map[string]bool{}
	for _, n := range c.Targets.SecretEnv {
		names[n] = true
	}
	var keys []string
	check := func(where string, env []string) {
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case names[k]:
				r.fail("%s: %s is set", where, k)
			case c.Targets.SecretMarker != "" && strings.Contains(v, c.Targets.SecretMarker):
				r.fail("%s: %s holds a fake secret", where, k)
			}
		}
	}
	env := os.Environ()
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	r.note("environment keys: %s", strings.Join(keys, " "))
	check("environment", env)
	if b, err := os.ReadFile("/proc/self/environ"); err == nil {
		check("/proc/self/environ", strings.Split(string(b), "\x00"))
	}
	return r.done()
}

func inheritedFD(c *Context) Observation {
	var r result
	for _, fd := range c.InitialFDs {
		target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if fd > 2 {
			r.fail("descriptor %d is open: %s", fd, target)
			continue
		}
		r.note("descriptor %d: %s", fd, target)
		// stdio is a pipe, socket, terminal or /dev/null, never a host file.
		if strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "/dev/") {
			r.fail("descriptor %d is a file: %s", fd, target)
		}
	}
	if c.InitialFDs == nil {
		r.fail("could not list descriptors")
	}
	return r.done()
}

// dial tries a connection that must fail.
func (r *result) dial(network, addr string) {
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	r.deny("connect "+network+" "+addr, err)
	if err == nil {
		conn.Close()
	}
}

func tcpHostLoopback(c *Context) Observation {
	var r result
	r.dial("tcp", c.Targets.TCP)
	_, port, _ := net.SplitHostPort(c.Targets.TCP)
	r.dial("tcp", net.JoinHostPort("localhost", port))
	return r.done()
}

func netnsVeth(c *Context) Observation {
	var r result
	r.dial("tcp", c.Targets.Netns)
	return r.done()
}

func interfacesRoutes(c *Context) Observation {
	var r result
	ifs, err := net.Interfaces()
	if err != nil {
		r.note("interfaces (netlink): %s", describe(err))
	}
	for _, i := range ifs {
		if i.Name != "lo" {
			r.fail("interface %s (%s)", i.Name, i.Flags)
		}
	}
	r.note("interfaces: %d", len(ifs))
	lines := func(p string) [][]string {
		b, err := os.ReadFile(p)
		if err != nil {
			r.note("read %s: %s", p, describe(err))
			return nil
		}
		var out [][]string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			out = append(out, strings.Fields(sc.Text()))
		}
		return out
	}
	if rt := lines("/proc/net/route"); len(rt) > 1 {
		for _, l := range rt[1:] {
			r.fail("/proc/net/route: %v", l)
		}
	}
	for _, l := range lines("/proc/net/if_inet6") {
		if len(l) > 0 && l[len(l)-1] != "lo" {
			r.fail("/proc/net/if_inet6: %v", l)
		}
	}
	for _, l := range lines("/proc/net/ipv6_route") {
		if len(l) > 0 && l[len(l)-1] != "lo" {
			r.fail("/proc/net/ipv6_route: %v", l)
		}
	}
	if dev := lines("/proc/net/dev"); len(dev) > 2 {
		for _, l := range dev[2:] {
			if len(l) > 0 && strings.TrimSuffix(l[0], ":") != "lo" {
				r.fail("/proc/net/dev: %s", l[0])
			}
		}
	}
	// A route to anywhere: a datagram socket's connect needs one (it sends nothing).
	for _, addr := range []string{"10.200.0.1:9", "192.0.2.1:9", "[2001:db8::1]:9"} {
		conn, err := net.Dial("udp", addr)
		r.deny("route to "+addr, err)
		if err == nil {
			conn.Close()
		}
	}
	return r.done()
}

func abstractSocket(c *Context) Observation {
	var r result
	r.dial("unix", "@"+c.Targets.Abstract)
	return r.done()
}

func runtimeDirSocket(c *Context) Observation {
	var r result
	if _, err := os.Lstat(c.Targets.PathSocket); err == nil {
		r.fail("%s exists in the box", c.Targets.PathSocket)
	}
	r.dial("unix", c.Targets.PathSocket)
	return r.done()
}

func apiSocket(c *Context) Observation {
	var r result
	var socks []string
	if rd := c.Targets.RuntimeDir; rd != "" {
		socks = append(socks, filepath.Join(rd, "agentbox.sock"))
		if id := os.Getenv("AGENTBOX_LAUNCH_ID"); id != "" {
			socks = append(socks, filepath.Join(launchdir.Dir(rd, id), launchdir.SocketFile))
		}
	}
	// The box's run dir is the launch's run/ directory; its host parent holds the shim socket.
	socks = append(socks, "/run/agentbox/../shim.sock", "/run/agentbox/../../../agentbox.sock", "/run/agentbox.sock")
	for _, s := range socks {
		r.dial("unix", s)
	}
	// Any socket in the box outside /run/agentbox (where only the launch's own brokers live).
	for _, root := range []string{"/run", "/tmp", "/dev", os.Getenv("HOME")} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p == "/run/agentbox" {
				return filepath.SkipDir
			}
			if d.Type()&os.ModeSocket != 0 {
				r.fail("socket %s is visible", p)
			}
			return nil
		})
	}
	return r.done()
}

// onLockedThread runs f on a locked OS thread (ptrace is per thread).
func onLockedThread(f func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f()
		close(done)
	}()
	<-done
}

func ptraceAttempt(c *Context) Observation {
	var r result
	p, err := c.startPauser()
	if err != nil {
		r.note("start a sibling: %s", describe(err))
	}
	targets := []int{1}
	if p != nil {
		defer p.stop()
		targets = append(targets, p.cmd.Process.Pid)
	}
	onLockedThread(func() {
		for _, pid := range targets {
			for _, req := range []struct {
				name string
				n    int
			}{{"PTRACE_ATTACH", unix.PTRACE_ATTACH}, {"PTRACE_SEIZE", unix.PTRACE_SEIZE}} {
				_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req.n), uintptr(pid), 0, 0, 0, 0)
				r.deny(fmt.Sprintf("%s pid %d", req.name, pid), errno(e))
				if e == 0 {
					unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, 0, 0, 0)
				}
			}
		}
	})
	// PTRACE_TRACEME, then exec: a child asking to be traced by the probe.
	cmd := c.child("exit")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	err = cmd.Start()
	r.deny("PTRACE_TRACEME in a child", err)
	if err == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
	return r.done()
}

// canary is read by process_vm_readv in a child running the same (non-PIE) binary.
var canary = [8]byte{'c', 'a', 'n', 'a', 'r', 'y'}

func processVM(c *Context) Observation {
	var r result
	p, err := c.startPauser()
	if err != nil {
		r.note("start a sibling: %s", describe(err))
		return r.done()
	}
	defer p.stop()
	var buf [8]byte
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&canary[0])), Len: len(canary)}}
	for _, pid := range []int{p.cmd.Process.Pid, 1} {
		_, err := unix.ProcessVMReadv(pid, local, remote, 0)
		r.vmResult(fmt.Sprintf("process_vm_readv pid %d", pid), err)
		_, err = unix.ProcessVMWritev(pid, local, remote, 0)
		r.vmResult(fmt.Sprintf("process_vm_writev pid %d", pid), err)
	}
	return r.done()
}

// vmResult judges a process_vm_* call: EFAULT or ESRCH mean the call itself was allowed.
func (r *result) vmResult(what string, err error) {
	if errors.Is(err, unix.EFAULT) || errors.Is(err, unix.ESRCH) {
		r.fail("%s: the call was allowed (%s)", what, describe(err))
		return
	}
	r.deny(what, err)
}

func procInit(c *Context) Observation {
	var r result
	f, err := os.Open("/proc/1/mem")
	r.deny("open /proc/1/mem", err)
	if err == nil {
		f.Close()
	}
	for _, p := range []string{"/proc/1/environ", "/proc/1/maps", "/proc/1/auxv", "/proc/1/syscall", "/proc/1/stack"} {
		b, err := os.ReadFile(p)
		if err == nil && len(b) == 0 {
			r.note("read %s: empty", p)
			continue
		}
		r.deny("read "+p, err)
	}
	for _, d := range []string{"/proc/1/fd", "/proc/1/fdinfo", "/proc/1/map_files"} {
		_, err = os.ReadDir(d)
		r.deny("list "+d, err)
	}
	for _, fd := range []string{"0", "3"} {
		_, err := os.ReadFile("/proc/1/fdinfo/" + fd)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		r.deny("read /proc/1/fdinfo/"+fd, err)
	}
	for _, fd := range []string{"0", "3", "4"} {
		_, err := os.Readlink("/proc/1/fd/" + fd)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		r.deny("readlink /proc/1/fd/"+fd, err)
	}
	for _, l := range []string{"exe", "root", "cwd"} {
		_, err := os.Readlink("/proc/1/" + l)
		r.deny("readlink /proc/1/"+l, err)
	}
	// box-init's threads have fd directories of their own: /proc/1/task/<tid>/fd, and
	// /proc/<tid>/fd (not listed in /proc, but found by name).
	threads := map[string]bool{}
	if ents, err := os.ReadDir("/proc/1/task"); err == nil {
		for _, e := range ents {
			threads[e.Name()] = true
		}
	}
	for n := 2; n < os.Getpid(); n++ {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n)); err == nil && bytes.Contains(st, []byte("\nTgid:\t1\n")) {
			threads[strconv.Itoa(n)] = true
		}
	}
	for tid := range threads {
		for _, d := range []string{"/proc/1/task/" + tid + "/fd", "/proc/" + tid + "/fd"} {
			if _, err := os.ReadDir(d); !errors.Is(err, os.ErrNotExist) {
				r.deny("list "+d, err)
			}
		}
	}
	return r.done()
}

func pidfdGetfd(c *Context) Observation {
	var r result
	p, err := c.startPauser()
	if err != nil {
		r.note("start a sibling: %s", describe(err))
	}
	targets := []int{1}
	if p != nil {
		defer p.stop()
		targets = append(targets, p.cmd.Process.Pid)
	}
	for _, pid := range targets {
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			r.note("pidfd_open %d: %s", pid, describe(err))
			continue
		}
		for _, fd := range []int{0, 1, 3} {
			got, err := unix.PidfdGetfd(pfd, fd, 0)
			if errors.Is(err, unix.EBADF) {
				r.fail("pidfd_getfd pid %d fd %d: the call was allowed (%s)", pid, fd, describe(err))
				continue
			}
			r.deny(fmt.Sprintf("pidfd_getfd pid %d fd %d", pid, fd), err)
			if err == nil {
				unix.Close(got)
			}
		}
		unix.Close(pfd)
	}
	return r.done()
}

// initState returns box-init's state letter from /proc/1/stat; "hidden" when the box's /proc
// refuses box-init's entries (hidepid=ptraceable: EPERM) but a pidfd says it has not exited.
func initState() string {
	st, err := proc.State(1)
	if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) {
		if alive, perr := pidAlive(1); perr == nil && alive {
			return "hidden"
		}
	}
	if errors.Is(err, proc.ErrMalformed) {
		return "unknown"
	}
	if err != nil {
		return "gone (" + describe(err) + ")"
	}
	return string(st)
}

// pidAlive reports whether pid has not exited, from a pidfd (which needs no access to /proc):
// the pidfd becomes readable when the process exits.
func pidAlive(pid int) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	if err != nil {
		return false, err
	}
	return n == 0, nil
}

func killBoxInit(c *Context) Observation {
	var r result
	// box-init forwards what it catches to the program's process group, that is to us.
	signal.Ignore(unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Reset()
	// Signals box-init handles (forwarded), the Go runtime crashes on (SEGV, BUS, ABRT when
	// sent by kill), and the two it cannot handle.
	for _, s := range []unix.Signal{unix.SIGTERM, unix.SIGHUP, unix.SIGUSR1, unix.SIGSEGV, unix.SIGBUS, unix.SIGABRT, unix.SIGSTOP, unix.SIGKILL} {
		err := unix.Kill(1, s)
		if err == nil && (s == unix.SIGKILL || s == unix.SIGSTOP) {
			// The kernel drops these for a namespace's init from inside: harmless if so.
			if st := initState(); st == "T" || strings.HasPrefix(st, "gone") || st == "Z" {
				r.fail("kill(1, %s): box-init is now %s", unix.SignalName(s), st)
			} else {
				r.note("kill(1, %s): returned 0, dropped by the kernel (box-init is %s)", unix.SignalName(s), st)
			}
			continue
		}
		r.deny("kill(1, "+unix.SignalName(s)+")", err)
	}
	if st := initState(); st != "S" && st != "R" && st != "hidden" {
		r.fail("box-init is %s after the attempt", st)
	}
	return r.done()
}

func killHostProcess(c *Context) Observation {
	var r result
	pid := c.Targets.HostPid
	if pid <= 1 {
		r.fail("no host pid to aim at (%d)", pid)
		return r.done()
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		r.note("/proc/%d exists in the box: %q", pid, b)
	}
	if pfd, err := unix.PidfdOpen(pid, 0); err == nil {
		r.deny(fmt.Sprintf("pidfd_send_signal host pid %d", pid), unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0))
		unix.Close(pfd)
	} else {
		r.note("pidfd_open host pid %d: %s", pid, describe(err))
	}
	r.deny(fmt.Sprintf("kill(%d, SIGKILL)", pid), unix.Kill(pid, unix.SIGKILL))
	r.deny(fmt.Sprintf("kill(-%d, SIGKILL)", pid), unix.Kill(-pid, unix.SIGKILL))
	return r.done()
}

func checkHostProcess(h *Host, o Observation) error {
	if !h.sleeperAlive() {
		return fmt.Errorf("host process %d is gone", h.Targets.HostPid)
	}
	return nil
}

// tiocstiCommands are TIOCSTI and TIOCLINUX, plain and with high bits set in the 64-bit
// command (the kernel ignores them; a filter comparing all 64 bits would not).
var tiocstiCommands = []struct {
	name string
	cmd  uint64
}{
	{"TIOCSTI", unix.TIOCSTI},
	{"TIOCSTI|0xffffffff00000000", unix.TIOCSTI | 0xffffffff00000000},
	{"TIOCSTI|0x100000000", unix.TIOCSTI | 1<<32},
	{"TIOCLINUX", unix.TIOCLINUX},
	{"TIOCLINUX|0xdead00000000", unix.TIOCLINUX | 0xdead00000000},
}

// stiAll tries every command on fd and returns the evidence lines; a success injects the
// whole payload (a real attack would).
func stiAll(fd int, payload string) (ok bool, ev []string) {
	if payload == "" {
		payload = "\n"
	}
	for _, c := range tiocstiCommands {
		b := payload[0]
		if strings.HasPrefix(c.name, "TIOCLINUX") {
			b = 12 // TIOCL_GETKMSGREDIRECT: harmless if it ever passes
		}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(c.cmd), uintptr(unsafe.Pointer(&b)))
		if e == 0 {
			ok = true
			ev = append(ev, c.name+": SUCCEEDED")
			if strings.HasPrefix(c.name, "TIOCSTI") {
				for i := 1; i < len(payload); i++ {
					ch := payload[i]
					unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(c.cmd), uintptr(unsafe.Pointer(&ch)))
				}
			}
			continue
		}
		ev = append(ev, c.name+": "+describe(e))
	}
	return ok, ev
}

// tiocstiChild runs in a new session with a PTY slave as its controlling terminal.
func tiocstiChild(args []string) int {
	payload := ""
	if len(args) > 0 {
		payload = args[0]
	}
	ok, ev := stiAll(0, payload)
	for _, l := range ev {
		fmt.Fprintln(os.Stderr, l)
	}
	if ok {
		return 1
	}
	return 0
}

func tiocsti(c *Context) Observation {
	var r result
	report := func(where string, ok bool, ev []string) {
		for _, l := range ev {
			if strings.HasSuffix(l, "SUCCEEDED") {
				r.fail("%s: %s", where, l)
			} else {
				r.note("%s: %s", where, l)
			}
		}
	}
	// The program's own terminal (when it runs on one): the caller's, relayed.
	for _, fd := range []int{0, 1, 2} {
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			ok, ev := stiAll(fd, c.Targets.Inject)
			report(fmt.Sprintf("fd %d (terminal)", fd), ok, ev)
		}
	}
	if fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		ok, ev := stiAll(fd, c.Targets.Inject)
		report("/dev/tty", ok, ev)
		unix.Close(fd)
	} else {
		r.note("open /dev/tty: %s", describe(err))
	}
	// A terminal of the box's own that is a controlling terminal (TIOCSTI on any other one
	// fails for lack of CAP_SYS_ADMIN, filter or not): a child in a new session.
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.note("open /dev/ptmx: %s", describe(err))
		return r.done()
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		r.note("unlock pty: %s", describe(err))
		return r.done()
	}
	sfd, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if e != 0 {
		r.note("open pty peer: %s", describe(e))
		return r.done()
	}
	slave := os.NewFile(sfd, "pty")
	defer slave.Close()
	cmd := c.child("tiocsti", "\n")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Run()
	var ev []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if l != "" {
			ev = append(ev, l)
		}
	}
	report("own pty as controlling terminal", err != nil && len(ev) > 0 && cmd.ProcessState.ExitCode() == 1, ev)
	if err != nil && cmd.ProcessState == nil {
		r.note("start child on own pty: %s", describe(err))
	}
	if len(ev) == 0 {
		r.note("child on own pty reported nothing (%v)", err)
	}
	return r.done()
}

func checkInjected(h *Host, o Observation) error {
	if h.InjectMarker == "" {
		return nil
	}
	if _, err := os.Lstat(h.InjectMarker); err == nil {
		return fmt.Errorf("the injected command ran on the host: %s exists", h.InjectMarker)
	}
	return nil
}

func mountAttempt(c *Context) Observation {
	var r result
	r.deny("mount tmpfs on /tmp", unix.Mount("none", "/tmp", "tmpfs", 0, ""))
	r.deny("remount / read-write", unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	r.deny("bind /proc/1/root on /tmp", unix.Mount("/proc/1/root", "/tmp", "", unix.MS_BIND, ""))
	r.deny("umount2 /proc/sys", unix.Unmount("/proc/sys", unix.MNT_DETACH))
	r.deny("pivot_root", unix.PivotRoot("/tmp", "/tmp"))
	fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	r.deny("fsopen tmpfs", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	r.deny("open_tree / clone", err)
	if err == nil {
		unix.Close(fd)
	}
	r.deny("mount_setattr /proc/sys read-write", unix.MountSetattr(unix.AT_FDCWD, "/proc/sys", 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}))
	r.deny("move_mount", unix.MoveMount(unix.AT_FDCWD, "/tmp", unix.AT_FDCWD, "/proc", 0))
	fd, err = unix.Fspick(unix.AT_FDCWD, "/", unix.FSPICK_CLOEXEC)
	r.deny("fspick /", err)
	if err == nil {
		unix.Close(fd)
	}
	return r.done()
}

var namespaceFlags = []struct {
	name string
	flag uintptr
}{
	{"CLONE_NEWUSER", unix.CLONE_NEWUSER}, {"CLONE_NEWNS", unix.CLONE_NEWNS},
	{"CLONE_NEWNET", unix.CLONE_NEWNET}, {"CLONE_NEWPID", unix.CLONE_NEWPID},
	{"CLONE_NEWIPC", unix.CLONE_NEWIPC}, {"CLONE_NEWUTS", unix.CLONE_NEWUTS},
	{"CLONE_NEWCGROUP", unix.CLONE_NEWCGROUP}, {"CLONE_NEWTIME", unix.CLONE_NEWTIME},
}

func unshareAttempt(c *Context) Observation {
	var r result
	// unshare(2) runs in the forked child, which is single-threaded: CLONE_NEWUSER is refused
	// to multi-threaded callers whatever the filter says.
	for _, ns := range namespaceFlags {
		cmd := c.child("exit")
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: ns.flag}
		err := cmd.Run()
		r.deny("unshare("+ns.name+") in a child", err)
	}
	return r.done()
}

func setnsAttempt(c *Context) Observation {
	var r result
	for _, ns := range []string{"user", "mnt", "net", "pid", "uts", "ipc", "cgroup"} {
		fd, err := unix.Open("/proc/self/ns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.note("open /proc/self/ns/%s: %s", ns, describe(err))
			continue
		}
		onLockedThread(func() { r.deny("setns(/proc/self/ns/"+ns+")", unix.Setns(fd, 0)) })
		unix.Close(fd)
		if fd, err := unix.Open("/proc/1/ns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			onLockedThread(func() { r.deny("setns(/proc/1/ns/"+ns+")", unix.Setns(fd, 0)) })
			unix.Close(fd)
		} else {
			r.note("open /proc/1/ns/%s: %s", ns, describe(err))
		}
	}
	if pfd, err := unix.PidfdOpen(1, 0); err == nil {
		onLockedThread(func() {
			r.deny("setns(pidfd of box-init, CLONE_NEWNET|CLONE_NEWNS)", unix.Setns(pfd, unix.CLONE_NEWNET|unix.CLONE_NEWNS))
		})
		unix.Close(pfd)
	}
	return r.done()
}

func cloneNamespace(c *Context) Observation {
	var r result
	for _, ns := range namespaceFlags {
		cmd := c.child("exit")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: ns.flag}
		r.deny("clone("+ns.name+")", cmd.Run())
	}
	return r.done()
}

// cloneArgs is struct clone_args (linux/sched.h), version 0.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls uint64
}

func clone3Attempt(c *Context) Observation {
	var r result
	// An invalid exit signal makes the kernel refuse the call (EINVAL) after reading the
	// arguments, so no process is ever made; the filter must refuse it first (ENOSYS).
	for _, ns := range namespaceFlags {
		args := cloneArgs{flags: uint64(ns.flag), exitSignal: 0xff}
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
		switch e {
		case unix.ENOSYS, unix.EPERM:
			r.note("clone3(%s): %s", ns.name, describe(e))
		case 0:
			r.fail("clone3(%s) made a process", ns.name)
		default:
			r.fail("clone3(%s): reached the kernel (%s)", ns.name, describe(e))
		}
	}
	return r.done()
}

// io_uring_params is 120 bytes.
type ioUringParams [120]byte

func ioUring(c *Context) Observation {
	var r result
	var p ioUringParams
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&p)), 0)
	r.deny("io_uring_setup", errno(e))
	if e == 0 {
		unix.Close(int(fd))
	}
	return r.done()
}

func bpfAttempt(c *Context) Observation {
	var r result
	// BPF_MAP_CREATE of a 1-entry array map.
	attr := [20]uint32{2 /* BPF_MAP_TYPE_ARRAY */, 4, 4, 1}
	fd, _, e := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	r.deny("bpf(BPF_MAP_CREATE)", errno(e))
	if e == 0 {
		unix.Close(int(fd))
	}
	// BPF_PROG_LOAD of a socket filter "return 0".
	insns := [2]uint64{0xb7 /* mov r0, 0 */, 0x95 /* exit */}
	license := []byte("GPL\x00")
	var load [30]uint32
	load[0] = 1 // BPF_PROG_TYPE_SOCKET_FILTER
	load[1] = 2
	*(*uint64)(unsafe.Pointer(&load[2])) = uint64(uintptr(unsafe.Pointer(&insns[0])))
	*(*uint64)(unsafe.Pointer(&load[4])) = uint64(uintptr(unsafe.Pointer(&license[0])))
	fd, _, e = unix.Syscall(unix.SYS_BPF, 5 /* BPF_PROG_LOAD */, uintptr(unsafe.Pointer(&load)), unsafe.Sizeof(load))
	runtime.KeepAlive(insns)
	runtime.KeepAlive(license)
	r.deny("bpf(BPF_PROG_LOAD socket filter)", errno(e))
	if e == 0 {
		unix.Close(int(fd))
	}
	return r.done()
}

func keyctlAttempt(c *Context) Observation {
	var r result
	_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	r.deny("keyctl(KEYCTL_GET_KEYRING_ID, session)", err)
	_, err = unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0)
	r.deny("keyctl(KEYCTL_JOIN_SESSION_KEYRING)", err)
	_, err = unix.AddKey("user", marker+"key", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	r.deny("add_key(user)", err)
	_, err = unix.RequestKey("user", marker+"key", "", unix.KEY_SPEC_PROCESS_KEYRING)
	r.deny("request_key(user)", err)
	return r.done()
}

// x32Bit marks x32 system calls on x86_64.
const x32Bit = 0x40000000

func x32ABI(c *Context) Observation {
	var r result
	if runtime.GOARCH != "amd64" {
		r.note("no x32 ABI on %s", runtime.GOARCH)
		return r.done()
	}
	// getpid (39) and mkdir (83) with the x32 bit.
	pid, _, e := unix.RawSyscall(x32Bit|unix.SYS_GETPID, 0, 0, 0)
	switch e {
	case unix.EPERM:
		r.note("x32 getpid: EPERM (filter)")
	case unix.ENOSYS:
		// The kernel has no x32 support; the filter let the call through to it.
		r.fail("x32 getpid: ENOSYS: the filter passed the call (only the kernel's missing x32 support stopped it)")
	case 0:
		r.fail("x32 getpid returned %d", pid)
	default:
		r.fail("x32 getpid: %s", describe(e))
	}
	dir := filepath.Join(c.Targets.Workspace, marker+"x32")
	_, _, e = unix.RawSyscall(x32Bit|unix.SYS_MKDIR, uintptr(unsafe.Pointer(bytePtr(dir))), 0o755, 0)
	if e == unix.EPERM {
		r.note("x32 mkdir: EPERM (filter)")
	} else {
		r.fail("x32 mkdir: %s", describe(errno(e)))
		os.Remove(dir)
	}
	return r.done()
}

func i386ABI(c *Context) Observation {
	var r result
	if !haveInt80 {
		r.o.Skipped = "no i386 ABI on " + runtime.GOARCH
		return r.done()
	}
	// In a child: without IA32 emulation, int 0x80 faults.
	out, err := c.child("int80").Output()
	line := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		r.fail("int 0x80 child: %v (%s)", err, line)
	case line == "fault":
		// The kernel refuses int 0x80 to every process (IA32 emulation disabled or not
		// offered by the hypervisor): no i386 call can be made, filter or not. The filter's
		// arch check is then covered only by internal/engine/native's BPF tests.
		r.o.Skipped = "int 0x80 faults in this kernel (no usable IA32 emulation): no i386 system call can be made, in a box or not"
	default:
		v, perr := strconv.ParseInt(line, 10, 64)
		switch {
		case perr != nil:
			r.fail("int 0x80 child said %q", line)
		case v == -int64(unix.EPERM):
			r.note("i386 getpid via int 0x80: EPERM (filter arch check)")
		case v < 0:
			r.fail("i386 getpid via int 0x80: errno %d: the filter did not refuse it", -v)
		default:
			r.fail("i386 getpid via int 0x80 returned pid %d: the filter does not check the architecture", v)
		}
	}
	return r.done()
}

// int80Child makes the i386 getpid (20) call and prints its raw result, or "fault".
func int80Child() (code int) {
	debug.SetPanicOnFault(true)
	defer func() {
		if recover() != nil {
			fmt.Println("fault")
			code = 0
		}
	}()
	fmt.Println(int80(20, 0, 0, 0))
	return 0
}

func escapeTree(c *Context) Observation {
	var r result
	if l, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		r.fact("pidns", l)
	} else {
		r.fail("readlink /proc/self/ns/pid: %s", describe(err))
	}
	out, err := c.child("escapee").Output()
	if err != nil {
		r.fail("start escapee: %v", err)
		return r.done()
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		r.fail("escapee said %q", out)
		return r.done()
	}
	r.fact("escapee", strconv.Itoa(pid))
	// It runs, in its own session, reparented to box-init.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		r.fail("the escapee %d is not running: %s", pid, describe(err))
		return r.done()
	}
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+2:]))
	r.note("escapee %d: state %s ppid %s sid %s", pid, fields[0], fields[1], fields[3])
	r.fact("escapee-sid", fields[3])
	escapeeIdentity(&r, pid)
	return r.done()
}

// escapeeIdentity reports the start time (clock ticks since boot, the same on the host) and
// the command line of a process the box leaves behind: checkEscapeTree tells it, and what the
// box started before it, from processes of a later namespace given the same inode.
func escapeeIdentity(r *result, pid int) {
	if start, ok := startTime(pid); ok {
		r.fact("escapee-start", strconv.FormatUint(start, 10))
	} else {
		r.note("start time of %d unknown", pid)
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		r.fact("escapee-cmdline", string(cmd))
	}
}

func checkEscapeTree(h *Host, o Observation) error {
	ns := o.Facts["pidns"]
	if ns == "" {
		return errors.New("the probe did not report its pid namespace")
	}
	start, err := strconv.ParseUint(o.Facts["escapee-start"], 10, 64)
	if err != nil {
		return errors.New("the probe did not report the escapee's start time")
	}
	pids, err := ProcessesIn(ns)
	if err != nil {
		return err
	}
	// A namespace's inode number is freed when it ends and given to the next one created (the
	// daemon's next spare box, a box of another test): the box's are the escapee (its start
	// time and command line) and what started before it.
	var left []int
	for _, pid := range pids {
		s, ok := startTime(pid)
		if !ok || s > start {
			continue
		}
		if s == start {
			if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || string(cmd) != o.Facts["escapee-cmdline"] {
				continue
			}
		}
		left = append(left, pid)
	}
	if len(left) > 0 {
		return fmt.Errorf("processes of the box's %s remain on the host: %v", ns, left)
	}
	return nil
}

// startTime returns a process's start time in clock ticks since boot (/proc/PID/stat field 22).
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}
