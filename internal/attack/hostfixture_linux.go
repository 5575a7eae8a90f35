package attack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// setUpMore makes the targets of the attempts in attempts_surface_linux.go: a UDP socket and an
// IPv6 listener on the host's loopback, SysV and POSIX shared memory of the host, and the
// pairings of a revoked and of a foreign session.
func (h *Host) setUpMore(o HostOptions, id string) error {
	t := &h.Targets
	t.CallerTTY = o.CallerTTY

	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("udp socket: %w", err)
	}
	h.onClose(udp.Close)
	if err := h.serveUDP(udp); err != nil {
		return err
	}
	t.UDP = udp.LocalAddr().String()

	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Unavailable["tcp6"] = "the host has no IPv6 loopback: " + err.Error()
	} else {
		if err := h.serve("tcp6", l); err != nil {
			return err
		}
		t.TCP6 = l.Addr().String()
	}

	// SysV IPC objects of the host's IPC namespace, under one key.
	key := int(0x4162 << 16) // "Ab"
	var b [2]byte
	copy(b[:], id)
	key |= int(b[0])<<8 | int(b[1])
	if shm, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|unix.IPC_EXCL|0o600); err != nil {
		t.Unavailable["sysv"] = "shmget on the host: " + err.Error()
	} else {
		h.onClose(func() error { _, err := unix.SysvShmCtl(shm, unix.IPC_RMID, nil); return err })
		if mem, err := unix.SysvShmAttach(shm, 0, 0); err == nil {
			copy(mem, t.SecretMarker+"sysv")
			unix.SysvShmDetach(mem)
		}
		msq, _, e := unix.Syscall(unix.SYS_MSGGET, uintptr(key), unix.IPC_CREAT|unix.IPC_EXCL|0o600, 0)
		if e == 0 {
			h.onClose(func() error {
				_, _, e := unix.Syscall(unix.SYS_MSGCTL, msq, unix.IPC_RMID, 0)
				return errno(e)
			})
		}
		sem, _, e := unix.Syscall(unix.SYS_SEMGET, uintptr(key), 1, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
		if e == 0 {
			h.onClose(func() error {
				_, _, e := unix.Syscall6(unix.SYS_SEMCTL, sem, 0, unix.IPC_RMID, 0, 0, 0)
				return errno(e)
			})
		}
		t.SysVKey = key
	}

	shm := filepath.Join("/dev/shm", marker+id)
	if err := os.WriteFile(shm, []byte(t.SecretMarker+"posix-shm\n"), 0o600); err != nil {
		t.Unavailable["posixShm"] = "write " + shm + ": " + err.Error()
	} else {
		h.onClose(func() error { return os.Remove(shm) })
		t.PosixShm = shm
	}

	if o.Sessions == nil {
		why := "the runner gave no way to make sessions (attack.HostOptions.Sessions)"
		t.Unavailable["revokedPairing"], t.Unavailable["foreignPairing"] = why, why
		return nil
	}
	rid, rp, err := o.Sessions.Create()
	if err != nil {
		return fmt.Errorf("create a session to revoke: %w", err)
	}
	if err := o.Sessions.Revoke(rid); err != nil {
		return fmt.Errorf("revoke session %s: %w", rid, err)
	}
	t.RevokedPairing = rp
	fid, fp, err := o.Sessions.Create()
	if err != nil {
		return fmt.Errorf("create a foreign session: %w", err)
	}
	h.onClose(func() error { return o.Sessions.Revoke(fid) })
	t.ForeignPairing = fp
	return nil
}

// serveUDP counts datagrams that reach pc under "udp", after a control datagram from the host
// has shown that it is reachable.
func (h *Host) serveUDP(pc net.PacketConn) error {
	got := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			_, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			h.mu.Lock()
			h.accepted["udp"]++
			h.mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		return fmt.Errorf("control datagram: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("control")); err != nil {
		return fmt.Errorf("control datagram: %w", err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		return errors.New("control datagram to the host UDP socket never arrived")
	}
	h.mu.Lock()
	h.accepted["udp"] = 0
	h.mu.Unlock()
	return nil
}

// Payload is what the protected-path attempts try to write; a protected file holding it on
// the host is a breach.
const payload = marker + "payload: written from a box\n"

// fixtureHooksPath is the core.hooksPath folder of the fixture's .git/config (husky's): the
// resolver pins it as it pins .git/hooks.
const fixtureHooksPath = ".husky"

// Fixture is what PrepareWorkspace writes: workspace-relative path → content. Directories
// end in "/".
var fixture = map[string]string{
	".git/config":                    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\thooksPath = " + fixtureHooksPath + "\n# " + marker + "fixture\n",
	fixtureHooksPath + "/pre-commit": "#!/bin/sh\n# " + marker + "fixture\nexit 0\n",
	".git/hooks/pre-commit":          "#!/bin/sh\n# " + marker + "fixture\nexit 0\n",
	".git/info/attributes":           "# " + marker + "fixture\n",
	".gitmodules":                    "# " + marker + "fixture\n",
	".mcp.json":                      "{\"mcpServers\": {}, \"_\": \"" + marker + "fixture\"}\n",
	".claude/settings.json":          "{\"_\": \"" + marker + "fixture\"}\n",
	".claude/settings.local.json":    "{\"_\": \"" + marker + "fixture\"}\n",
	".vscode/settings.json":          "{\"_\": \"" + marker + "fixture\"}\n",
	".vscode/tasks.json":             "{\"_\": \"" + marker + "fixture\"}\n",
	".envrc":                         "# " + marker + "fixture\n",
	".github/workflows/ci.yml":       "# " + marker + "fixture\n",
	// Read by a hook the host already installed (pre-commit, lefthook), and other editors' and
	// tools' files that start programs when the folder is opened or entered.
	".pre-commit-config.yaml":         "# " + marker + "fixture\n",
	"lefthook.yml":                    "# " + marker + "fixture\n",
	".cursor/mcp.json":                "{\"_\": \"" + marker + "fixture\"}\n",
	".zed/tasks.json":                 "[\"" + marker + "fixture\"]\n",
	".nvim.lua":                       "-- " + marker + "fixture\n",
	".mise.toml":                      "# " + marker + "fixture\n",
	".devcontainer/devcontainer.json": "{\"_\": \"" + marker + "fixture\"}\n",
}

// PrepareWorkspace makes ws a git repository with agent settings, hooks and workflows, each
// holding a known text that checkProtected compares afterwards.
func PrepareWorkspace(ws string) error {
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		return fmt.Errorf("git init %s: %v: %s", ws, err, bytes.TrimSpace(out))
	}
	for rel, content := range fixture {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.Contains(rel, "hooks/") || strings.HasPrefix(rel, fixtureHooksPath+"/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// checkProtected looks on the host, after the box, for what a successful attempt on the
// protected paths leaves: a fixture that changed or went missing, a payload in a protected
// file, a symlink where a protected file was, or one of the attempt's own files inside a
// protected directory.
func checkProtected(h *Host, o Observation) error {
	ws := o.Facts["workspace"]
	if ws == "" {
		ws = h.Targets.Workspace
	}
	var bad []string
	if o.Facts["prepared"] == "1" {
		for rel, want := range fixture {
			p := filepath.Join(ws, rel)
			st, err := os.Lstat(p)
			if err != nil {
				bad = append(bad, rel+": "+err.Error())
				continue
			}
			if st.Mode()&os.ModeSymlink != 0 {
				bad = append(bad, rel+" is now a symlink")
				continue
			}
			if b, err := os.ReadFile(p); err != nil || string(b) != want {
				bad = append(bad, fmt.Sprintf("%s changed (%q)", rel, b))
			}
			if st.Mode().Perm() != 0o644 && st.Mode().Perm() != 0o755 {
				bad = append(bad, fmt.Sprintf("%s has mode %v", rel, st.Mode()))
			}
		}
	}
	for _, rel := range protectedFolders() {
		p := filepath.Join(ws, rel)
		if st, err := os.Lstat(p); err == nil && !st.IsDir() {
			bad = append(bad, rel+" is no longer a directory ("+st.Mode().String()+")")
		}
	}
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(ws, p)
		if !underProtected(rel) {
			return nil
		}
		if strings.HasPrefix(d.Name(), marker) {
			bad = append(bad, rel+" was created from the box")
		}
		if d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(payload)) {
				bad = append(bad, rel+" holds the box's payload")
			}
		}
		return nil
	})
	if len(bad) > 0 {
		return fmt.Errorf("protected configuration changed from the box: %s", strings.Join(bad, "; "))
	}
	return nil
}

// underProtected reports whether a workspace-relative path is a protected path or lies in a
// protected directory.
func underProtected(rel string) bool {
	for _, p := range protectedFiles {
		if rel == p {
			return true
		}
	}
	for _, d := range protectedDirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}
