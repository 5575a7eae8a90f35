package attack

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/agentbox/agentbox/internal/api"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/plan"
)

// The second half of the registry: protected configuration in every form of replacement,
// /proc tricks, devices and setuid, the rest of the network surface, IPC, the rest of the
// kernel surface, credentials and brokers, and cleanup of a process that ignores SIGTERM.
func init() {
	attempts = append(attempts, moreAttempts...)
}

var moreAttempts = []Attempt{
	// Protected configuration (plan.WorkspaceProtected, plan.GitDirProtected).
	{Name: "protected-write", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "no write to a protected file (.git/config, .mcp.json, .claude/settings*.json, .envrc, …) reaches the host (each is read-only, or a staged copy kept as a proposed change), and no file can be added to .git/hooks or .github/workflows (read-only bind mounts)",
		Run:    protectedWrite, Check: checkProtected},
	{Name: "protected-truncate", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "truncate(2), ftruncate and O_TRUNC of a protected file fail or reach only its staged copy: the host's file keeps its content",
		Run:    protectedTruncate, Check: checkProtected},
	{Name: "protected-rename-over", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "rename and renameat2 (RENAME_EXCHANGE) of a workspace file over a protected path fail (a mount point is busy)",
		Run:    protectedRenameOver, Check: checkProtected},
	{Name: "protected-rename-parent", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "the protected folders and the parents of protected paths (.git, .git/hooks, .claude, .vscode, .github, …) cannot be renamed away (each is a mount point)",
		Run:    protectedRenameParent, Check: checkProtected},
	{Name: "protected-unlink-recreate", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "protected files and hooks cannot be unlinked (so never recreated), and protected directories cannot be removed",
		Run:    protectedUnlinkRecreate, Check: checkProtected},
	{Name: "protected-chmod", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "chmod, chown, utimes and setxattr fail on every protected path (read-only mount) or reach only a protected file's staged copy: the host's file keeps its mode",
		Run:    protectedChmod, Check: checkProtected},
	{Name: "protected-symlink-swap", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "a symlink cannot replace a protected path (by rename, or unlink then symlink) nor be added as a hook",
		Run:    protectedSymlinkSwap, Check: checkProtected},
	{Name: "protected-hardlink-swap", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "a protected file cannot be hard-linked to a writable name (EXDEV across mounts), and a hard link cannot replace it",
		Run:    protectedHardlinkSwap, Check: checkProtected},
	{Name: "proc-fd-reopen", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "re-opening a protected or system file for writing through /proc/self/fd (O_PATH or read-only descriptor) fails, or reaches only a protected file's staged copy",
		Run:    procFDReopen, Check: checkProtected},
	{Name: "proc-pid-root", Category: CategoryFilesystem,
		Expect: "/proc/<pid>/root of every visible process is the box's own root: no host secret is readable through it, and host pids are absent",
		Run:    procPidRoot, Check: checkOutside},
	{Name: "symlink-race", Category: CategoryFilesystem, Prepare: PrepareWorkspace,
		Expect: "flipping a workspace symlink between a workspace file and protected or system files while writing through it never writes anything but the workspace file",
		Run:    symlinkRace, Check: func(h *Host, o Observation) error {
			return errors.Join(checkProtected(h, o), checkOutside(h, o))
		}},
	{Name: "mknod-device", Category: CategoryFilesystem,
		Expect: "mknod of character and block devices fails, and no host device (/dev/mem, disks, /dev/kmsg) exists in the box",
		Run:    mknodDevice},
	{Name: "setuid-exec", Category: CategoryFilesystem,
		Expect: "no_new_privs is set, every mount is nosuid or setuid binaries gain nothing: a setuid-root program runs with the caller's ids and no capability",
		Run:    setuidExec},

	// Network.
	{Name: "raw-socket", Category: CategoryNetwork,
		Expect: "raw IPv4 and IPv6 sockets fail (no CAP_NET_RAW)", Run: rawSocket},
	{Name: "packet-socket", Category: CategoryNetwork,
		Expect: "AF_PACKET sockets fail (seccomp family filter)", Run: packetSocket},
	{Name: "netlink-sockets", Category: CategoryNetwork,
		Expect: "netlink protocols other than NETLINK_ROUTE fail (seccomp), and the box cannot change its interfaces (no CAP_NET_ADMIN)",
		Run:    netlinkSockets},
	{Name: "other-socket-families", Category: CategoryNetwork,
		Expect: "vsock, AF_ALG, AF_KEY, bluetooth, CAN, TIPC, RDS, XDP, X.25 and other families fail (seccomp)", Run: otherFamilies},
	{Name: "ipv6-host-loopback", Category: CategoryNetwork, Needs: "tcp6",
		Expect: "the host's [::1] listener, and its 127.0.0.1 listener by an IPv4-mapped address, are unreachable",
		Run:    ipv6HostLoopback, Check: func(h *Host, o Observation) error {
			return errors.Join(checkAccepted("tcp6")(h, o), checkAccepted("tcp")(h, o))
		}},
	{Name: "udp-host-loopback", Category: CategoryNetwork, Needs: "udp",
		Expect: "no datagram reaches a host UDP socket on 127.0.0.1", Run: udpHostLoopback, Check: checkAccepted("udp")},
	{Name: "dns", Category: CategoryNetwork,
		Expect: "no name server answers: the resolver fails with a network error, never an answer (NXDOMAIN included)", Run: dnsAttempt},
	{Name: "host-service-sockets", Category: CategoryNetwork,
		Expect: "docker, containerd, D-Bus, systemd, journald, X11 (path and abstract) and session-bus sockets of the host are unreachable",
		Run:    hostServiceSockets},

	// IPC and processes.
	{Name: "sysv-ipc", Category: CategoryProcess, Needs: "sysv",
		Expect: "the host's SysV shared memory, message queue and semaphores are invisible (own IPC namespace)", Run: sysvIPC},
	{Name: "posix-shm", Category: CategoryProcess, Needs: "posixShm",
		Expect: "the host's /dev/shm is not the box's: a host segment is absent", Run: posixShm},
	{Name: "caller-tty", Category: CategoryTerminal,
		Expect: "the caller's terminal, host ptys, consoles and virtual terminals cannot be opened from the box",
		Run:    callerTTY, Check: checkInjected},
	{Name: "signal-broadcast", Category: CategoryProcess, Needs: "hostPid",
		Expect: "kill(-1, SIGTERM) reaches only the box's own processes: a host process survives",
		Run:    signalBroadcast, Check: checkHostProcess},

	// Kernel surface.
	{Name: "userfaultfd", Category: CategoryKernel,
		Expect: "userfaultfd(2) fails (seccomp) and /dev/userfaultfd is absent", Run: userfaultfdAttempt},
	{Name: "perf-event-open", Category: CategoryKernel,
		Expect: "perf_event_open fails with EPERM (seccomp)", Run: perfEventOpen},
	{Name: "module-loading", Category: CategoryKernel,
		Expect: "init_module, finit_module, delete_module, kexec_load and kexec_file_load fail with EPERM", Run: moduleLoading},
	{Name: "chroot", Category: CategoryKernel,
		Expect: "chroot fails (no CAP_SYS_CHROOT)", Run: chrootAttempt},
	{Name: "sysfs-cgroup", Category: CategoryKernel,
		Expect: "/sys is absent: no uevent helper, no cgroup.procs of the host, no cgroup release agent can be written", Run: sysfsCgroup},
	{Name: "raise-capabilities", Category: CategoryKernel,
		Expect: "capset, ambient raise and setuid(0) fail; every capability set stays empty", Run: raiseCapabilities},
	{Name: "drop-restrictions", Category: CategoryKernel,
		Expect: "no_new_privs cannot be cleared and the seccomp filter stays in force (Seccomp: 2), whatever the program asks", Run: dropRestrictions},
	{Name: "kernel-log", Category: CategoryKernel,
		Expect: "/dev/kmsg and /proc/kmsg cannot be opened, and the kernel log cannot be cleared", Run: kernelLog},
	{Name: "open-by-handle", Category: CategoryKernel,
		Expect: "open_by_handle_at fails (no CAP_DAC_READ_SEARCH): no host inode can be opened by handle (the \"shocker\" escape)", Run: openByHandle},

	// Credentials and brokers.
	{Name: "run-agentbox-files", Category: CategorySecrets,
		Expect: "the files under /run/agentbox hold no secret of the host and are read-only", Run: runAgentboxFiles},
	{Name: "pairing-revoked", Category: CategorySecrets, Needs: "revokedPairing",
		Expect: "the relay refuses a revoked session's pairing with 403 pairing_invalid (the box's own pairing gets past the check)",
		Run:    pairingRevoked},
	{Name: "pairing-foreign-channel", Category: CategorySecrets, Needs: "foreignPairing",
		Expect: "the relay refuses, on this launch's channel, the live pairing of another session with 403 pairing_invalid",
		Run:    pairingForeign},

	// Cleanup.
	{Name: "sigterm-ignorer", Category: CategoryCleanup,
		Expect: "a double-forked, setsid'd process that ignores SIGTERM, SIGHUP and SIGINT is gone once the box has ended",
		Run:    sigtermIgnorer, Check: checkEscapeTree},
}

// moreChildren are the helper roles of the probe's children used by moreAttempts.
var moreChildren = map[string]func(args []string) int{
	"stubborn":         stubbornChild,
	"stubborn-forever": stubbornForever,
	"broadcast":        broadcastChild,
}

// Protected paths the attempts aim at, relative to the workspace: the lists the integrity
// resolver pins from (plan.WorkspaceProtected, and plan.GitDirProtected beneath .git), split
// into files and folders as plan.ProtectedDirs says, and the core.hooksPath folder the
// fixture's .git/config names. A path added to the plan's lists is attacked without a change
// here (TestProtectedListsShared).
var protectedFiles, protectedDirs = protectedLists()

func protectedLists() (files, dirs []string) {
	add := func(rel string) {
		if slices.Contains(plan.ProtectedDirs, filepath.Base(rel)) {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
	}
	for _, rel := range plan.WorkspaceProtected {
		if rel != ".git" { // a folder of its own kind: its protected paths are GitDirProtected
			add(rel)
		}
	}
	for _, rel := range plan.GitDirProtected {
		add(".git/" + rel)
	}
	return files, append(dirs, fixtureHooksPath)
}

// protectedFolders returns the protected folders and every folder between a protected path and
// the workspace (each a mount point in the box, so that none can be renamed away), sorted.
func protectedFolders() []string {
	seen := map[string]bool{}
	for _, rel := range append(slices.Clone(protectedFiles), protectedDirs...) {
		if slices.Contains(protectedDirs, rel) {
			seen[rel] = true
		}
		for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
			seen[d] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// wsOf returns the attempt's workspace and records it (and whether the host prepared it).
func (r *result) wsOf(c *Context) string {
	ws := c.Targets.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	r.fact("workspace", ws)
	if b, err := os.ReadFile(filepath.Join(ws, ".git/config")); err == nil && bytes.Contains(b, []byte(marker+"fixture")) {
		r.fact("prepared", "1")
	}
	return ws
}

// present returns the protected files that exist in ws.
func present(ws string, rels []string) []string {
	var out []string
	for _, rel := range rels {
		if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
			out = append(out, filepath.Join(ws, rel))
		}
	}
	return out
}

func protectedWrite(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	for _, p := range present(ws, protectedFiles) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		r.denyOrStaged(p, "open "+p+" for appending", err)
		if err == nil {
			f.WriteString(payload)
			f.Close()
		}
		err = os.WriteFile(p, []byte(payload), 0o644)
		r.denyOrStaged(p, "write "+p, err)
	}
	for _, d := range present(ws, protectedDirs) {
		for _, n := range []string{"post-checkout", marker + "new"} {
			p := filepath.Join(d, n)
			r.deny("create "+p, os.WriteFile(p, []byte("#!/bin/sh\n"+payload), 0o755))
		}
		r.deny("mkdir in "+d, os.Mkdir(filepath.Join(d, marker+"dir"), 0o755))
		if ents, _ := os.ReadDir(d); len(ents) > 0 {
			p := filepath.Join(d, ents[0].Name())
			r.deny("write "+p, os.WriteFile(p, []byte(payload), 0o755))
		}
	}
	return r.done()
}

func protectedTruncate(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	for _, p := range present(ws, protectedFiles) {
		r.denyOrStaged(p, "truncate "+p, unix.Truncate(p, 0))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		r.denyOrStaged(p, "open "+p+" O_TRUNC", err)
		if err == nil {
			f.Close()
		}
		if f, err := os.Open(p); err == nil {
			r.deny("ftruncate of a read-only descriptor of "+p, f.Truncate(0))
			f.Close()
		}
	}
	return r.done()
}

func protectedRenameOver(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	src := filepath.Join(ws, marker+"new")
	for _, p := range present(ws, protectedFiles) {
		if err := os.WriteFile(src, []byte(payload), 0o644); err != nil {
			r.note("write %s: %s", src, describe(err))
			break
		}
		r.deny("rename "+src+" over "+p, os.Rename(src, p))
		r.deny("renameat2 RENAME_EXCHANGE "+src+" ⇄ "+p, unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, p, unix.RENAME_EXCHANGE))
	}
	os.Remove(src)
	dir := filepath.Join(ws, marker+"newdir")
	for _, d := range present(ws, protectedDirs) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			break
		}
		os.WriteFile(filepath.Join(dir, "pre-commit"), []byte("#!/bin/sh\n"+payload), 0o755)
		r.deny("rename "+dir+" over "+d, os.Rename(dir, d))
		r.deny("renameat2 RENAME_EXCHANGE "+dir+" ⇄ "+d, unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, d, unix.RENAME_EXCHANGE))
		os.RemoveAll(dir)
	}
	return r.done()
}

func protectedRenameParent(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	for _, rel := range protectedFolders() {
		p := filepath.Join(ws, rel)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		dst := filepath.Join(ws, marker+strings.ReplaceAll(rel, "/", "_"))
		err := os.Rename(p, dst)
		r.deny("rename "+p+" away", err)
		if err == nil {
			// Show what the next launch would find, then put it back.
			os.MkdirAll(p, 0o755)
			os.RemoveAll(p)
			os.Rename(dst, p)
		}
	}
	return r.done()
}

func protectedUnlinkRecreate(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	for _, p := range present(ws, protectedFiles) {
		err := os.Remove(p)
		r.deny("unlink "+p, err)
		if err == nil {
			os.WriteFile(p, []byte(payload), 0o644)
		}
	}
	for _, d := range present(ws, protectedDirs) {
		if ents, _ := os.ReadDir(d); len(ents) > 0 {
			p := filepath.Join(d, ents[0].Name())
			err := os.Remove(p)
			r.deny("unlink "+p, err)
			if err == nil {
				os.Symlink("/tmp/"+marker+"hook", p)
			}
		}
		r.deny("remove "+d+" recursively", os.RemoveAll(d))
	}
	return r.done()
}

func protectedChmod(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	uid, gid := os.Getuid(), os.Getgid()
	for _, p := range append(present(ws, protectedFiles), present(ws, protectedDirs)...) {
		r.denyOrStaged(p, "chmod 0777 "+p, os.Chmod(p, 0o777))
		r.denyOrStaged(p, "chmod 0 "+p, os.Chmod(p, 0))
		r.denyOrStaged(p, "chown "+p+" to itself", os.Lchown(p, uid, gid))
		r.denyOrStaged(p, "utimes "+p, os.Chtimes(p, time.Unix(1, 0), time.Unix(1, 0)))
		r.denyOrStaged(p, "setxattr user.agentbox "+p, unix.Setxattr(p, "user.agentbox", []byte("x"), 0))
	}
	return r.done()
}

func protectedSymlinkSwap(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	link := filepath.Join(ws, marker+"link")
	evil := filepath.Join(ws, marker+"evil")
	os.WriteFile(evil, []byte(payload), 0o755)
	for _, p := range append(present(ws, protectedFiles), present(ws, protectedDirs)...) {
		os.Remove(link)
		if err := os.Symlink(evil, link); err != nil {
			r.note("symlink %s: %s", link, describe(err))
			break
		}
		r.deny("rename a symlink over "+p, os.Rename(link, p))
		err := os.Remove(p)
		if err == nil {
			r.deny("unlink "+p+", then symlink", os.Symlink(evil, p))
			r.fail("unlink %s succeeded", p)
		} else {
			r.deny("unlink "+p+" (to put a symlink there)", err)
		}
	}
	for _, d := range present(ws, protectedDirs) {
		r.deny("symlink a hook in "+d, os.Symlink(evil, filepath.Join(d, "post-merge")))
	}
	os.Remove(link)
	os.Remove(evil)
	return r.done()
}

func protectedHardlinkSwap(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	alias := filepath.Join(ws, marker+"alias")
	src := filepath.Join(ws, marker+"hlsrc")
	os.WriteFile(src, []byte(payload), 0o644)
	for _, p := range present(ws, protectedFiles) {
		// A second name on the writable workspace mount would let a write reach the inode.
		os.Remove(alias)
		err := os.Link(p, alias)
		r.deny("link "+p+" → "+alias, err)
		if err == nil {
			f, werr := os.OpenFile(alias, os.O_WRONLY|os.O_APPEND, 0)
			if werr == nil {
				f.WriteString(payload)
				f.Close()
				r.fail("wrote %s through its hard link %s", p, alias)
			}
		}
		// A hard link of a workspace file beside it (allowed where the parent is writable,
		// as in .git), then renamed over it.
		tmp := p + "." + marker + "hl"
		if err := os.Link(src, tmp); err != nil {
			r.note("link %s beside %s: %s", src, p, describe(err))
			continue
		}
		r.deny("rename the hard link "+tmp+" over "+p, os.Rename(tmp, p))
		os.Remove(tmp)
	}
	os.Remove(alias)
	os.Remove(src)
	return r.done()
}

func procFDReopen(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	targets := append(present(ws, protectedFiles), "/etc/passwd", "/usr/bin/env", "/proc/sys/kernel/core_pattern")
	for _, p := range targets {
		for _, how := range []struct {
			name  string
			flags int
		}{{"O_PATH", unix.O_PATH}, {"O_RDONLY", unix.O_RDONLY}} {
			fd, err := unix.Open(p, how.flags|unix.O_CLOEXEC, 0)
			if err != nil {
				r.note("open %s %s: %s", p, how.name, describe(err))
				continue
			}
			self := "/proc/self/fd/" + strconv.Itoa(fd)
			wfd, err := unix.Open(self, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)
			r.denyOrStaged(p, "re-open "+p+" ("+how.name+") for writing via "+self, err)
			if err == nil {
				unix.Close(wfd)
			}
			tid := "/proc/thread-self/fd/" + strconv.Itoa(fd)
			wfd, err = unix.Open(tid, unix.O_RDWR|unix.O_CLOEXEC, 0)
			r.denyOrStaged(p, "re-open "+p+" ("+how.name+") read-write via "+tid, err)
			if err == nil {
				unix.Close(wfd)
			}
			unix.Close(fd)
		}
	}
	// The box's root through its own magic link, then a relative path out of it.
	if root, err := unix.Open("/proc/self/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		fd, err := unix.Openat(root, "../../../etc/"+marker+"write", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		r.deny("openat(/proc/self/root, ../../../etc/…, O_CREAT)", err)
		if err == nil {
			unix.Close(fd)
		}
		unix.Close(root)
	}
	return r.done()
}

func procPidRoot(c *Context) Observation {
	var r result
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, e.Name())
		}
	}
	r.note("visible pids: %s", strings.Join(pids, " "))
	if c.Targets.HostPid > 0 {
		p := "/proc/" + strconv.Itoa(c.Targets.HostPid)
		if _, err := os.Lstat(p + "/root"); err == nil {
			r.note("%s exists in the box (the box's own pid of that number)", p)
		}
	}
	for _, pid := range append(pids, "self", "thread-self") {
		base := "/proc/" + pid
		for _, f := range c.Targets.SecretFiles {
			for _, via := range []string{"/root", "/cwd", "/root/../..", "/cwd/../../.."} {
				r.readSecret(base+via+f, c.Targets.SecretMarker)
			}
		}
		for _, rel := range []string{"/root/etc/shadow", "/root/../../etc/shadow"} {
			if b, err := os.ReadFile(base + rel); err == nil && len(b) > 0 {
				r.fail("read %s%s: %d bytes", base, rel, len(b))
			}
		}
		for _, d := range c.Targets.OutsideDirs {
			p := base + "/root" + d + "/" + marker + "write"
			err := os.WriteFile(p, []byte("written from a box\n"), 0o644)
			if c.boxPrivate(d) {
				r.note("create %s (box-private tmpfs): %v", p, err)
				continue
			}
			r.deny("create "+p, err)
		}
	}
	return r.done()
}

func symlinkRace(c *Context) Observation {
	var r result
	ws := r.wsOf(c)
	own := filepath.Join(ws, marker+"race-target")
	if err := os.WriteFile(own, nil, 0o644); err != nil {
		r.note("create %s: %s", own, describe(err))
		return r.done()
	}
	var ownSt unix.Stat_t
	unix.Stat(own, &ownSt)
	victims := append(present(ws, []string{".git/config", ".mcp.json", ".envrc"}), "/etc/"+marker+"write", "/usr/"+marker+"write")
	// A write that lands in a staged copy (a protected file agentbox gave the box writable)
	// stays in the copy: the host's file is compared after the box (checkProtected).
	staged := map[[2]uint64]bool{}
	for _, v := range victims {
		var st unix.Stat_t
		if stagedCopy(v) && unix.Stat(v, &st) == nil {
			staged[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	for _, d := range c.Targets.OutsideDirs {
		if !c.boxPrivate(d) {
			victims = append(victims, filepath.Join(d, marker+"write"))
		}
	}
	link := filepath.Join(ws, marker+"race")
	tmp := link + ".tmp"
	// The link exists before the race starts: an open of a missing path would create a
	// regular file of the workspace there, which is no escape.
	if err := os.Symlink(own, link); err != nil {
		r.note("symlink %s: %s", link, describe(err))
		return r.done()
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			target := own
			if i%2 == 1 {
				target = victims[(i/2)%len(victims)]
			}
			os.Remove(tmp)
			if os.Symlink(target, tmp) == nil {
				os.Rename(tmp, link)
			}
		}
	}()
	var opened, leaked int
	for i := 0; i < 20000; i++ {
		fd, err := unix.Open(link, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND|unix.O_CLOEXEC, 0o644)
		if err != nil {
			continue
		}
		opened++
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		if (st.Dev != ownSt.Dev || st.Ino != ownSt.Ino) && !staged[[2]uint64{st.Dev, st.Ino}] {
			if _, werr := unix.Write(fd, []byte(payload)); werr == nil {
				if leaked == 0 {
					name, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
					r.note("first write that missed the workspace file went to %s", name)
				}
				leaked++
			}
		}
		unix.Close(fd)
	}
	stop.Store(true)
	wg.Wait()
	os.Remove(link)
	os.Remove(tmp)
	os.Remove(own)
	r.note("%d opens through the flipping symlink, victims %v", opened, victims)
	if leaked > 0 {
		r.fail("%d writes through the symlink reached a file other than the workspace's", leaked)
	}
	return r.done()
}

func mknodDevice(c *Context) Observation {
	var r result
	ws := c.Targets.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	for _, d := range []struct {
		name string
		mode uint32
		dev  int
	}{
		{"mem (c 1:1)", unix.S_IFCHR | 0o666, int(unix.Mkdev(1, 1))},
		{"kmsg (c 1:11)", unix.S_IFCHR | 0o666, int(unix.Mkdev(1, 11))},
		{"sda (b 8:0)", unix.S_IFBLK | 0o666, int(unix.Mkdev(8, 0))},
		{"vda (b 253:0)", unix.S_IFBLK | 0o666, int(unix.Mkdev(253, 0))},
	} {
		for _, dir := range []string{ws, "/tmp", "/dev"} {
			p := filepath.Join(dir, marker+"dev")
			err := unix.Mknod(p, d.mode, d.dev)
			r.deny("mknod "+p+" "+d.name, err)
			if err == nil {
				if f, err := os.Open(p); err == nil {
					r.fail("opened the device node %s", p)
					f.Close()
				}
				os.Remove(p)
			}
		}
	}
	for _, p := range []string{"/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/kmsg", "/dev/fuse", "/dev/net/tun", "/dev/loop0", "/dev/loop-control", "/dev/dri/card0", "/dev/snd"} {
		f, err := os.OpenFile(p, os.O_RDONLY, 0)
		r.deny("open "+p, err)
		if err == nil {
			f.Close()
		}
	}
	return r.done()
}

func setuidExec(c *Context) Observation {
	var r result
	st := procStatus("self")
	if st["NoNewPrivs"] != "1" {
		r.fail("NoNewPrivs is %q", st["NoNewPrivs"])
	}
	// Find setuid programs the box can see, and the mounts that would honour them.
	var found []string
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib/dbus-1.0", "/usr/libexec"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.Mode()&os.ModeSetuid != 0 && info.Mode().IsRegular() {
				found = append(found, filepath.Join(d, e.Name()))
			}
		}
	}
	r.note("setuid programs visible: %v", found)
	uid := strconv.Itoa(os.Getuid())
	for _, p := range found {
		// A program that waits on its standard input long enough to be inspected: most
		// ask for a password; those that exit at once are judged by their exit.
		cmd := exec.Command(p)
		in, _ := cmd.StdinPipe()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			r.note("exec %s: %s", p, describe(err))
			continue
		}
		pid := strconv.Itoa(cmd.Process.Pid)
		// Sample its credentials once it has exec'd (its exe is the setuid program).
		var ps map[string]string
		for i := 0; i < 200; i++ {
			if exe, _ := os.Readlink("/proc/" + pid + "/exe"); exe == p {
				ps = procStatus(pid)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if ps == nil {
			r.note("%s: exited before it could be inspected (%s)", p, firstLine(out.String()))
			continue
		}
		uids := strings.Fields(ps["Uid"])
		switch {
		case len(uids) > 1 && uids[1] != uid:
			r.fail("%s ran with effective uid %s (caller %s)", p, uids[1], uid)
		case ps["CapEff"] != "" && strings.Trim(ps["CapEff"], "0") != "":
			r.fail("%s ran with capabilities %s", p, ps["CapEff"])
		default:
			r.note("%s: uids %s, CapEff %s", p, ps["Uid"], ps["CapEff"])
		}
	}
	// sudo must refuse outright.
	if p, err := exec.LookPath("sudo"); err == nil {
		out, err := exec.Command(p, "-n", "true").CombinedOutput()
		r.deny("sudo -n true", err)
		r.note("sudo: %s", firstLine(string(out)))
	}
	return r.done()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// procStatus returns the fields of /proc/<pid>/status.
func procStatus(pid string) map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// socketTry makes a socket that must fail.
func (r *result) socketTry(what string, family, typ, proto int) {
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, proto)
	r.deny("socket("+what+")", err)
	if err == nil {
		unix.Close(fd)
	}
}

func rawSocket(c *Context) Observation {
	var r result
	r.socketTry("AF_INET, SOCK_RAW, IPPROTO_RAW", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	r.socketTry("AF_INET, SOCK_RAW, IPPROTO_ICMP", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	r.socketTry("AF_INET, SOCK_RAW, IPPROTO_TCP", unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_TCP)
	r.socketTry("AF_INET6, SOCK_RAW, IPPROTO_ICMPV6", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6)
	r.socketTry("AF_INET6, SOCK_RAW, IPPROTO_RAW", unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
	return r.done()
}

func packetSocket(c *Context) Observation {
	var r result
	all := int(htons(unix.ETH_P_ALL))
	r.socketTry("AF_PACKET, SOCK_RAW", unix.AF_PACKET, unix.SOCK_RAW, all)
	r.socketTry("AF_PACKET, SOCK_DGRAM", unix.AF_PACKET, unix.SOCK_DGRAM, all)
	r.socketTry("AF_INET, SOCK_PACKET", unix.AF_INET, unix.SOCK_PACKET, all)
	return r.done()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func netlinkSockets(c *Context) Observation {
	var r result
	for _, p := range []struct {
		name  string
		proto int
	}{
		{"NETLINK_SOCK_DIAG", unix.NETLINK_SOCK_DIAG}, {"NETLINK_AUDIT", unix.NETLINK_AUDIT},
		{"NETLINK_KOBJECT_UEVENT", unix.NETLINK_KOBJECT_UEVENT}, {"NETLINK_NETFILTER", unix.NETLINK_NETFILTER},
		{"NETLINK_GENERIC", unix.NETLINK_GENERIC}, {"NETLINK_XFRM", unix.NETLINK_XFRM},
		{"NETLINK_CONNECTOR", unix.NETLINK_CONNECTOR}, {"NETLINK_SELINUX", unix.NETLINK_SELINUX},
		{"NETLINK_CRYPTO", unix.NETLINK_CRYPTO}, {"NETLINK_FIB_LOOKUP", unix.NETLINK_FIB_LOOKUP},
	} {
		r.socketTry("AF_NETLINK, "+p.name, unix.AF_NETLINK, unix.SOCK_RAW, p.proto)
	}
	// NETLINK_ROUTE is allowed (Node's os.networkInterfaces()), but changing anything through
	// it or through the ioctls needs CAP_NET_ADMIN in the box's network namespace.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.note("inet socket: %s", describe(err))
		return r.done()
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err == nil {
			flags := ifr.Uint16()
			ifr.SetUint16(flags &^ unix.IFF_UP)
			err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
			r.deny("SIOCSIFFLAGS lo down", err)
			if err == nil {
				ifr.SetUint16(flags)
				unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
			}
		}
	}
	// RTM_NEWLINK of a dummy interface over NETLINK_ROUTE.
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		r.note("NETLINK_ROUTE socket: %s", describe(err))
		return r.done()
	}
	defer unix.Close(nl)
	r.deny("RTM_NEWLINK dummy over NETLINK_ROUTE", netlinkNewDummy(nl))
	return r.done()
}

// netlinkNewDummy asks for a new dummy interface and returns the kernel's answer.
func netlinkNewDummy(fd int) error {
	attr := func(typ uint16, data []byte) []byte {
		l := 4 + len(data)
		b := make([]byte, (l+3)&^3)
		binary.LittleEndian.PutUint16(b[0:], uint16(l))
		binary.LittleEndian.PutUint16(b[2:], typ)
		copy(b[4:], data)
		return b
	}
	kind := attr(unix.IFLA_INFO_KIND, []byte("dummy\x00"))
	body := make([]byte, unix.SizeofIfInfomsg)
	body = append(body, attr(unix.IFLA_IFNAME, []byte("abxdummy0\x00"))...)
	body = append(body, attr(unix.IFLA_LINKINFO, kind)...)
	hdr := make([]byte, unix.SizeofNlMsghdr)
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(hdr)+len(body)))
	binary.LittleEndian.PutUint16(hdr[4:], unix.RTM_NEWLINK)
	binary.LittleEndian.PutUint16(hdr[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.LittleEndian.PutUint32(hdr[8:], 1)
	if err := unix.Sendto(fd, append(hdr, body...), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n >= unix.SizeofNlMsghdr+4 && binary.LittleEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
		if e := int32(binary.LittleEndian.Uint32(buf[unix.SizeofNlMsghdr:])); e != 0 {
			return syscall.Errno(-e)
		}
		return nil
	}
	return fmt.Errorf("unexpected netlink answer (%d bytes)", n)
}

func otherFamilies(c *Context) Observation {
	var r result
	for _, f := range []struct {
		name     string
		fam, typ int
	}{
		{"AF_VSOCK", unix.AF_VSOCK, unix.SOCK_STREAM}, {"AF_ALG", unix.AF_ALG, unix.SOCK_SEQPACKET},
		{"AF_KEY", unix.AF_KEY, unix.SOCK_RAW}, {"AF_BLUETOOTH", unix.AF_BLUETOOTH, unix.SOCK_RAW},
		{"AF_CAN", unix.AF_CAN, unix.SOCK_RAW}, {"AF_TIPC", unix.AF_TIPC, unix.SOCK_RDM},
		{"AF_RDS", unix.AF_RDS, unix.SOCK_SEQPACKET}, {"AF_XDP", unix.AF_XDP, unix.SOCK_RAW},
		{"AF_X25", unix.AF_X25, unix.SOCK_SEQPACKET}, {"AF_APPLETALK", unix.AF_APPLETALK, unix.SOCK_DGRAM},
		{"AF_NFC", unix.AF_NFC, unix.SOCK_DGRAM}, {"AF_LLC", unix.AF_LLC, unix.SOCK_DGRAM},
		{"AF_SMC", unix.AF_SMC, unix.SOCK_STREAM}, {"AF_QIPCRTR", unix.AF_QIPCRTR, unix.SOCK_DGRAM},
	} {
		r.socketTry(f.name, f.fam, f.typ, 0)
	}
	return r.done()
}

func ipv6HostLoopback(c *Context) Observation {
	var r result
	r.dial("tcp6", c.Targets.TCP6)
	if _, port, err := net.SplitHostPort(c.Targets.TCP); err == nil {
		r.dial("tcp6", net.JoinHostPort("::ffff:127.0.0.1", port))
	}
	if _, port, err := net.SplitHostPort(c.Targets.TCP6); err == nil {
		r.dial("tcp6", net.JoinHostPort("fe80::1%lo", port))
	}
	return r.done()
}

func udpHostLoopback(c *Context) Observation {
	var r result
	_, port, _ := net.SplitHostPort(c.Targets.UDP)
	for _, addr := range []string{c.Targets.UDP, net.JoinHostPort("::ffff:127.0.0.1", port), net.JoinHostPort("localhost", port)} {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			r.note("dial udp %s: %s", addr, describe(err))
			continue
		}
		// A datagram is sent into the box's own loopback; the host-side count decides.
		for i := 0; i < 3; i++ {
			conn.Write([]byte("from a box"))
		}
		conn.Close()
		r.note("sent 3 datagrams to %s (the box's own loopback)", addr)
	}
	return r.done()
}

func dnsAttempt(c *Context) Observation {
	var r result
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		r.note("resolv.conf name servers: %v", nameservers(b))
		for _, ns := range nameservers(b) {
			for _, network := range []string{"udp", "tcp"} {
				addr := net.JoinHostPort(ns, "53")
				conn, err := net.DialTimeout(network, addr, 3*time.Second)
				if err != nil {
					r.note("dial %s %s: %s", network, addr, describe(err))
					continue
				}
				conn.SetDeadline(time.Now().Add(3 * time.Second))
				q := dnsQuery("agentbox-selftest.invalid")
				if network == "tcp" {
					q = append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)
				}
				conn.Write(q)
				buf := make([]byte, 512)
				n, err := conn.Read(buf)
				conn.Close()
				if err == nil && n > 0 {
					r.fail("%s %s answered a DNS query (%d bytes)", network, addr, n)
				} else {
					r.note("%s %s: no answer (%v)", network, addr, err)
				}
			}
		}
	}
	_, err := net.LookupHost("agentbox-selftest.invalid")
	var de *net.DNSError
	switch {
	case err == nil:
		r.fail("agentbox-selftest.invalid resolved")
	case errors.As(err, &de) && de.IsNotFound:
		// A name server (or /etc/hosts) said "no such name": something answered.
		r.fail("the resolver got an answer: %v", err)
	default:
		r.note("lookup: %v", err)
	}
	return r.done()
}

func nameservers(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}

// dnsQuery returns a query for name's A record.
func dnsQuery(name string) []byte {
	q := []byte{0xab, 0x01, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split(name, ".") {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	return append(q, 0, 0, 1, 0, 1)
}

func hostServiceSockets(c *Context) Observation {
	var r result
	socks := []string{
		"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock",
		"/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket", "/run/systemd/private",
		"/run/systemd/journal/socket", "/run/systemd/journal/stdout", "/dev/log", "/run/systemd/notify",
		"/tmp/.X11-unix/X0", "@/tmp/.X11-unix/X0", "/run/user/" + strconv.Itoa(os.Getuid()) + "/bus",
		"/run/user/" + strconv.Itoa(os.Getuid()) + "/wayland-0", "/run/user/" + strconv.Itoa(os.Getuid()) + "/podman/podman.sock",
		"/run/snapd.socket", "/var/run/libvirt/libvirt-sock", "@/org/freedesktop/systemd1/notify",
	}
	if rt := c.Targets.PathSocket; rt != "" {
		socks = append(socks, filepath.Join(filepath.Dir(rt), "bus"), filepath.Join(filepath.Dir(rt), "wayland-0"))
	}
	for _, s := range socks {
		r.dial("unix", s)
	}
	return r.done()
}

// IPC_STAT and friends.
const (
	msgctlStat = 2 // IPC_STAT
)

func sysvIPC(c *Context) Observation {
	var r result
	key := c.Targets.SysVKey
	id, err := unix.SysvShmGet(key, 0, 0)
	r.deny(fmt.Sprintf("shmget(0x%x)", key), err)
	if err == nil {
		if mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY); err == nil {
			if bytes.Contains(mem, []byte(c.Targets.SecretMarker)) {
				r.fail("read the host's shared memory segment")
			}
			unix.SysvShmDetach(mem)
		}
	}
	_, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0)
	r.deny(fmt.Sprintf("msgget(0x%x)", key), errno(e))
	_, _, e = unix.Syscall(unix.SYS_SEMGET, uintptr(key), 0, 0)
	r.deny(fmt.Sprintf("semget(0x%x)", key), errno(e))
	// Ids are per namespace too: the first ids of the host's are not the box's.
	for id := 0; id < 4; id++ {
		var ds unix.SysvShmDesc
		_, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds)
		r.deny(fmt.Sprintf("shmctl(%d, IPC_STAT)", id), err)
	}
	if b, err := os.ReadFile("/proc/sysvipc/shm"); err == nil {
		lines := strings.Count(strings.TrimSpace(string(b)), "\n")
		if lines > 0 {
			r.fail("/proc/sysvipc/shm lists %d segments", lines)
		}
	}
	return r.done()
}

func posixShm(c *Context) Observation {
	var r result
	p := c.Targets.PosixShm
	r.readSecret(p, c.Targets.SecretMarker)
	_, err := os.Lstat(p)
	r.deny("stat "+p, err)
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), marker) {
			r.fail("/dev/shm/%s (the host's) is visible", e.Name())
		}
	}
	return r.done()
}

func callerTTY(c *Context) Observation {
	var r result
	var ownPts uint64
	var st unix.Stat_t
	if unix.Stat("/dev/pts/ptmx", &st) == nil {
		ownPts = st.Dev
	}
	try := func(p string) {
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.note("open %s: %s", p, describe(err))
			return
		}
		defer unix.Close(fd)
		var fst unix.Stat_t
		unix.Fstat(fd, &fst)
		if strings.HasPrefix(p, "/dev/pts/") && fst.Dev == ownPts {
			r.note("open %s: a pty of the box's own devpts", p)
			return
		}
		r.fail("opened %s (device %d:%d)", p, unix.Major(fst.Rdev), unix.Minor(fst.Rdev))
		if c.Targets.Inject != "" {
			stiAll(fd, c.Targets.Inject)
		}
	}
	if c.Targets.CallerTTY != "" {
		try(c.Targets.CallerTTY)
	}
	for i := 0; i < 8; i++ {
		try("/dev/pts/" + strconv.Itoa(i))
	}
	for _, p := range []string{"/dev/console", "/dev/tty0", "/dev/tty1", "/dev/tty7", "/dev/ttyS0", "/dev/vcs", "/dev/vcsa"} {
		try(p)
	}
	// /dev/tty is the program's controlling terminal, if any: the box's own pty or none.
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil {
		var fst unix.Stat_t
		unix.Fstat(fd, &fst)
		name, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if fst.Dev != 0 && ownPts != 0 && unix.Major(fst.Rdev) == 136 && !strings.HasPrefix(name, "/dev/pts/") {
			r.fail("/dev/tty is %s, not a pty of the box", name)
		} else {
			r.note("/dev/tty: %s", name)
		}
		unix.Close(fd)
	} else {
		r.note("open /dev/tty: %s", describe(err))
	}
	return r.done()
}

func signalBroadcast(c *Context) Observation {
	var r result
	// The child broadcasts; this process ignores what it sends so that the probe survives.
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Reset(syscall.SIGTERM, syscall.SIGHUP)
	out, err := c.child("broadcast").CombinedOutput()
	r.note("kill(-1, SIGTERM) and kill(-1, SIGHUP) from a child: %s (%v)", strings.TrimSpace(string(out)), err)
	// A process group of the host: the host process's own.
	r.deny(fmt.Sprintf("kill(-%d, SIGTERM)", c.Targets.HostPid), unix.Kill(-c.Targets.HostPid, unix.SIGTERM))
	return r.done()
}

func broadcastChild(args []string) int {
	e1 := unix.Kill(-1, unix.SIGTERM)
	e2 := unix.Kill(-1, unix.SIGHUP)
	fmt.Printf("SIGTERM: %v, SIGHUP: %v\n", e1, e2)
	return 0
}

func userfaultfdAttempt(c *Context) Observation {
	var r result
	for _, flags := range []uintptr{0, unix.O_CLOEXEC, 1 /* UFFD_USER_MODE_ONLY */} {
		fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
		r.deny(fmt.Sprintf("userfaultfd(%#x)", flags), errno(e))
		if e == 0 {
			unix.Close(int(fd))
		}
	}
	f, err := os.OpenFile("/dev/userfaultfd", os.O_RDWR, 0)
	r.deny("open /dev/userfaultfd", err)
	if err == nil {
		f.Close()
	}
	return r.done()
}

func perfEventOpen(c *Context) Observation {
	var r result
	for _, a := range []struct {
		name      string
		typ       uint32
		config    uint64
		pid, cpu  int
		exclKernl bool
	}{
		{"software cpu-clock, self", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, 0, -1, true},
		{"hardware cycles, all processes on cpu 0", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES, -1, 0, false},
		{"tracepoint, self", unix.PERF_TYPE_TRACEPOINT, 1, 0, -1, false},
	} {
		attr := unix.PerfEventAttr{Type: a.typ, Config: a.config, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		if a.exclKernl {
			attr.Bits = unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv
		}
		fd, err := unix.PerfEventOpen(&attr, a.pid, a.cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		r.deny("perf_event_open("+a.name+")", err)
		if err == nil {
			unix.Close(fd)
		}
	}
	return r.done()
}

// kernelRefused judges a call that must never reach the kernel's own checks beyond EPERM.
func (r *result) kernelRefused(what string, e syscall.Errno) {
	switch e {
	case unix.EPERM, unix.ENOSYS:
		r.note("%s: %s", what, describe(e))
	case 0:
		r.fail("%s succeeded", what)
	default:
		r.fail("%s reached the kernel's own checks (%s): the filter let it through", what, describe(e))
	}
}

func moduleLoading(c *Context) Observation {
	var r result
	empty := []byte{0}
	_, _, e := unix.Syscall(unix.SYS_INIT_MODULE, uintptr(unsafe.Pointer(&empty[0])), 0, uintptr(unsafe.Pointer(bytePtr(""))))
	r.kernelRefused("init_module", e)
	if f, err := os.Open("/dev/null"); err == nil {
		_, _, e = unix.Syscall(unix.SYS_FINIT_MODULE, f.Fd(), uintptr(unsafe.Pointer(bytePtr(""))), 0)
		r.kernelRefused("finit_module(/dev/null)", e)
		_, _, e = unix.Syscall6(unix.SYS_KEXEC_FILE_LOAD, f.Fd(), f.Fd(), 1, uintptr(unsafe.Pointer(&empty[0])), 0, 0)
		r.kernelRefused("kexec_file_load(/dev/null)", e)
		f.Close()
	}
	_, _, e = unix.Syscall(unix.SYS_DELETE_MODULE, uintptr(unsafe.Pointer(bytePtr("agentbox_none"))), unix.O_NONBLOCK, 0)
	r.kernelRefused("delete_module(agentbox_none)", e)
	_, _, e = unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)
	r.kernelRefused("kexec_load", e)
	return r.done()
}

func chrootAttempt(c *Context) Observation {
	var r result
	r.deny("chroot /tmp", unix.Chroot("/tmp"))
	r.deny("chroot /", unix.Chroot("/"))
	return r.done()
}

func sysfsCgroup(c *Context) Observation {
	var r result
	for _, p := range []string{
		"/sys/kernel/uevent_helper", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/release_agent",
		"/sys/fs/cgroup/cgroup.subtree_control", "/sys/kernel/mm/transparent_hugepage/enabled",
		"/sys/power/state", "/sys/class/net/lo/mtu", "/proc/sys/kernel/hotplug",
	} {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		r.deny("open "+p+" for writing", err)
		if err == nil {
			f.Close()
		}
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		r.note("/proc/self/cgroup: %s", strings.TrimSpace(string(b)))
	}
	return r.done()
}

// capHeader and capData are the capset(2) structures, version 3.
type capHeader struct {
	version uint32
	pid     int32
}
type capData struct{ effective, permitted, inheritable uint32 }

func raiseCapabilities(c *Context) Observation {
	var r result
	onLockedThread(func() {
		hdr := capHeader{version: unix.LINUX_CAPABILITY_VERSION_3}
		data := [2]capData{{^uint32(0), ^uint32(0), ^uint32(0)}, {^uint32(0), ^uint32(0), ^uint32(0)}}
		_, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
		r.deny("capset(all)", errno(e))
		r.deny("prctl(PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN)", unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_SYS_ADMIN, 0, 0))
		if os.Getuid() != 0 {
			_, _, e = unix.RawSyscall(unix.SYS_SETUID, 0, 0, 0)
			r.deny("setuid(0)", errno(e))
			_, _, e = unix.RawSyscall(unix.SYS_SETRESUID, 0, 0, 0)
			r.deny("setresuid(0, 0, 0)", errno(e))
		}
		_, _, e = unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0)
		r.deny("setgroups(0)", errno(e))
	})
	st := procStatus("self")
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if v := st[k]; strings.Trim(v, "0") != "" {
			r.fail("%s is %s", k, v)
		} else {
			r.note("%s: %s", k, v)
		}
	}
	return r.done()
}

func dropRestrictions(c *Context) Observation {
	var r result
	err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0)
	r.deny("prctl(PR_SET_NO_NEW_PRIVS, 0)", err)
	// Mode 1 (strict) would kill the probe if accepted; SECCOMP_SET_MODE_FILTER with an
	// allow-all filter only adds a filter, never removes the first.
	allow := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: 1, Filter: &allow[0]}
	onLockedThread(func() {
		_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
		r.note("seccomp(SET_MODE_FILTER, allow all): %v (adds a filter; the box's stays)", errno(e))
		st := procStatus("thread-self")
		if st["Seccomp"] != "2" {
			r.fail("Seccomp is %q after the attempt", st["Seccomp"])
		}
		if st["NoNewPrivs"] != "1" {
			r.fail("NoNewPrivs is %q after the attempt", st["NoNewPrivs"])
		}
		r.note("Seccomp %s, filters %s, NoNewPrivs %s", st["Seccomp"], st["Seccomp_filters"], st["NoNewPrivs"])
	})
	// The filter still refuses what it refused.
	_, _, e := unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUTS, 0, 0)
	r.deny("unshare(CLONE_NEWUTS) after the attempt", errno(e))
	return r.done()
}

func kernelLog(c *Context) Observation {
	var r result
	for _, p := range []string{"/dev/kmsg", "/proc/kmsg"} {
		f, err := os.Open(p)
		r.deny("open "+p, err)
		if err == nil {
			f.Close()
		}
	}
	// SYSLOG_ACTION_CLEAR (5) needs CAP_SYSLOG.
	_, _, e := unix.Syscall(unix.SYS_SYSLOG, 5, 0, 0)
	r.deny("syslog(SYSLOG_ACTION_CLEAR)", errno(e))
	return r.done()
}

func openByHandle(c *Context) Observation {
	var r result
	ws := c.Targets.Workspace
	if ws == "" {
		ws = "/"
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, ws, 0)
	if err != nil {
		r.note("name_to_handle_at %s: %s", ws, describe(err))
	}
	mfd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.note("open %s: %s", ws, describe(err))
		return r.done()
	}
	defer unix.Close(mfd)
	if h.Size() > 0 {
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
		r.deny("open_by_handle_at(own workspace handle)", err)
		if err == nil {
			unix.Close(fd)
		}
	}
	// The shocker handle: inode 2 (the root of an ext4 file system), generation 0.
	raw := make([]byte, 8)
	binary.LittleEndian.PutUint32(raw, 2)
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(1 /* FILEID_INO32_GEN */, raw), unix.O_RDONLY)
	r.deny("open_by_handle_at(inode 2 of the workspace's file system)", err)
	if err == nil {
		unix.Close(fd)
	}
	return r.done()
}

func runAgentboxFiles(c *Context) Observation {
	var r result
	secrets := []string{"-----BEGIN", "PRIVATE KEY"}
	if c.Targets.SecretMarker != "" {
		secrets = append(secrets, c.Targets.SecretMarker)
	}
	filepath.WalkDir("/run/agentbox", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			r.note("read %s: %s", p, describe(err))
			return nil
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				r.fail("%s holds %q", p, s)
			}
		}
		r.note("%s: %d bytes, no secret", p, len(b))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		r.deny("open "+p+" for writing", err)
		if err == nil {
			f.Close()
		}
		return nil
	})
	r.deny("create /run/agentbox/"+marker+"new", os.WriteFile("/run/agentbox/"+marker+"new", []byte("x"), 0o600))
	r.deny("replace /run/agentbox/gitconfig", os.Rename("/run/agentbox/gitconfig", "/run/agentbox/"+marker+"gitconfig"))
	return r.done()
}

// relayStatus sends one request to the launch's relay with pairing, and returns the status
// and the error code of the answer.
func relayStatus(pairing string) (int, string, error) {
	base := os.Getenv("AGENTBOX_RELAY_URL")
	if base == "" {
		base = "http://127.0.0.1:7080"
	}
	req, err := http.NewRequest("POST", base+"/sandbox/anthropic/v1/messages", strings.NewReader("{}"))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Agentbox-Pairing", pairing)
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	code := ""
	if i := bytes.Index(b, []byte(`"code":"`)); i >= 0 {
		rest := b[i+8:]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			code = string(rest[:j])
		}
	}
	return resp.StatusCode, code, nil
}

// pairingRefused tries pairing on the launch's relay: only 403 pairing_invalid holds. The
// box's own pairing is the control: it must get past the pairing check.
func pairingRefused(what, pairing string) Observation {
	var r result
	own := os.Getenv("AGENTBOX_PAIRING")
	if own == "" {
		r.fail("the box has no pairing of its own (AGENTBOX_PAIRING): the control cannot run")
		return r.done()
	}
	st, code, err := relayStatus(own)
	if err != nil {
		r.fail("the launch's relay is unreachable with the box's own pairing: %v", err)
		return r.done()
	}
	r.note("own pairing: %d %s", st, code)
	if st == http.StatusForbidden && code == api.CodePairingInvalid {
		r.fail("the relay refuses the box's own pairing too: the control failed, the attempt proves nothing")
	}
	st, code, err = relayStatus(pairing)
	switch {
	case err != nil:
		r.fail("%s: %v (expected 403 pairing_invalid)", what, err)
	case st == http.StatusForbidden && code == api.CodePairingInvalid:
		r.note("%s: %d %s", what, st, code)
	default:
		r.fail("%s: the relay answered %d %s, not 403 pairing_invalid", what, st, code)
	}
	// As an API key and a bearer token too (the relay reads those headers as pairings).
	for _, h := range []string{"x-api-key", "Authorization"} {
		base := os.Getenv("AGENTBOX_RELAY_URL")
		if base == "" {
			base = "http://127.0.0.1:7080"
		}
		req, _ := http.NewRequest("POST", base+"/sandbox/anthropic/v1/messages", strings.NewReader("{}"))
		v := pairing
		if h == "Authorization" {
			v = "Bearer " + pairing
		}
		req.Header.Set(h, v)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			r.fail("%s as %s: %v", what, h, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			r.fail("%s as %s: the relay answered %d", what, h, resp.StatusCode)
		} else {
			r.note("%s as %s: 403", what, h)
		}
	}
	return r.done()
}

func pairingRevoked(c *Context) Observation {
	return pairingRefused("a revoked session's pairing", c.Targets.RevokedPairing)
}

func pairingForeign(c *Context) Observation {
	return pairingRefused("another session's live pairing", c.Targets.ForeignPairing)
}

func sigtermIgnorer(c *Context) Observation {
	var r result
	if l, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		r.fact("pidns", l)
	} else {
		r.fail("readlink /proc/self/ns/pid: %s", describe(err))
	}
	out, err := c.child("stubborn").Output()
	if err != nil {
		r.fail("start the stubborn process: %v", err)
		return r.done()
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		r.fail("stubborn child said %q", out)
		return r.done()
	}
	r.fact("escapee", strconv.Itoa(pid))
	escapeeIdentity(&r, pid)
	// Once it ignores SIGTERM (bit 15 of SigIgn), a polite stop does not end it.
	for i := 0; i < 400; i++ {
		if ign, err := strconv.ParseUint(procStatus(strconv.Itoa(pid))["SigIgn"], 16, 64); err == nil && ign&(1<<(unix.SIGTERM-1)) != 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	unix.Kill(pid, unix.SIGTERM)
	st := procStatus(strconv.Itoa(pid))
	r.note("stubborn %d after SIGTERM: state %q, SigIgn %s", pid, st["State"], st["SigIgn"])
	if st["State"] == "" {
		r.fail("the stubborn process %d is not running", pid)
	}
	return r.done()
}

// stubbornChild starts a grandchild in its own session that ignores SIGTERM, SIGHUP and
// SIGINT, prints its pid and exits.
func stubbornChild(args []string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	cmd := exec.Command("/proc/self/exe", append(append([]string(nil), os.Args[1:len(os.Args)-len(args)-1]...), "stubborn-forever")...)
	cmd.Args[0] = os.Args[0]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

func stubbornForever(args []string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	unix.Close(0)
	unix.Close(1)
	unix.Close(2)
	for {
		unix.Pause()
	}
}
