//go:build linux

// Command idmap is a prototype, run as root, that measures whether a root-run box could run as
// an unused host uid with its writable folders given through idmapped mounts (issue #21, item
// 3): a child in a user namespace mapping its uid 0 to host uid -uid gets the folders it must
// write as idmapped mounts (open_tree + mount_setattr(MOUNT_ATTR_IDMAP) by host root, moved
// into its mount namespace), drops every capability like a box's program, and reports what it
// can read and write. It times the idmapped clones (-n of each kind).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/safesocket"
)

type result struct {
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	Info  string `json:"info"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		child(os.Args[2:])
		return
	}
	uid := flag.Int("uid", 2147418112, "the unused host uid (and gid) the box's uid 0 maps to")
	n := flag.Int("n", 200, "idmapped clones timed per kind")
	secret := flag.String("secret", "/opt/agentbox-idmap-secret", "a root-owned 0600 file made outside the binds for the check")
	flag.Parse()
	if os.Getuid() != 0 {
		fatal(errors.New("run as root"))
	}
	if err := run(*uid, *n, *secret); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "idmap:", err)
	os.Exit(1)
}

func run(uid, n int, secret string) error {
	root, err := os.MkdirTemp("/tmp", "idmap")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	os.Chmod(root, 0o755)
	// The folders a box writes, one per kind of filesystem: the workspace on the root
	// filesystem, a tmpfs, and an overlay.
	ws := filepath.Join(root, "ws")
	tmpfs := filepath.Join(root, "tmpfs")
	ovl := filepath.Join(root, "ovl")
	for _, d := range []string{ws, tmpfs, ovl, root + "/lower", root + "/upper", root + "/work"} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "own.txt"), []byte("the user's own file\n"), 0o600); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "mode=0700,size=1m"); err != nil {
		return err
	}
	defer unix.Unmount(tmpfs, unix.MNT_DETACH)
	if err := unix.Mount("overlay", ovl, "overlay", 0, "lowerdir="+root+"/lower,upperdir="+root+"/upper,workdir="+root+"/work"); err != nil {
		return err
	}
	defer unix.Unmount(ovl, unix.MNT_DETACH)
	if err := os.WriteFile(secret, []byte("root only\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(secret)

	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	childEnd := os.NewFile(uintptr(sp[1]), "child")
	self, _ := os.Executable()
	reads := []string{secret, "/etc/shadow"}
	if ks, _ := filepath.Glob("/etc/ssh/ssh_host_*_key"); len(ks) > 0 {
		reads = append(reads, ks[0])
	}
	cmd := exec.Command(self, append([]string{"child", ws, tmpfs, ovl}, reads...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		// Host root is not mapped in the namespace: become its uid 0 (host uid -uid).
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	// The daemon's sockets check their peer's uid (SO_PEERCRED): what does a box's process look
	// like to them?
	abstract := fmt.Sprintf("@agentbox-idmap-%d", os.Getpid())
	ln, err := net.Listen("unix", abstract)
	if err != nil {
		return err
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		defer c.Close()
		_, uid, gid, err := safesocket.PeerCred(c.(*net.UnixConn))
		if err != nil {
			peer <- err.Error()
			return
		}
		peer <- fmt.Sprintf("uid %d gid %d", uid, gid)
	}()
	cmd.Env = []string{"IDMAP_SOCKET=" + abstract}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	childEnd.Close()
	startDur := time.Since(t0)
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(userns)

	fmt.Printf("kernel %s; box uid 0 -> host uid %d; child started in %v\n", release(), uid, startDur.Round(time.Microsecond))
	var fds []int
	for _, p := range []string{ws, tmpfs, ovl} {
		fd, err := idmapped(p, userns)
		var st unix.Statfs_t
		unix.Statfs(p, &st)
		if err != nil {
			fmt.Printf("idmapped mount of %s (fs magic %#x): %v\n", p, st.Type, err)
			fd = -1
		} else {
			fmt.Printf("idmapped mount of %s (fs magic %#x): ok\n", p, st.Type)
		}
		fds = append(fds, fd)
		// The cost of one more, as a launch with N binds pays it N times.
		var ds []time.Duration
		for range n {
			t := time.Now()
			f, err := idmapped(p, userns)
			if err != nil {
				break
			}
			ds = append(ds, time.Since(t))
			unix.Close(f)
		}
		if len(ds) > 0 {
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			fmt.Printf("  open_tree+mount_setattr(IDMAP) x%d: median %v, p95 %v\n", len(ds), ds[len(ds)/2], ds[len(ds)*95/100])
		}
	}
	send := fds[:0:0]
	for _, fd := range fds {
		if fd < 0 {
			fd, _ = unix.Open("/dev/null", unix.O_RDONLY, 0) // the child sees that this one failed
		}
		send = append(send, fd)
	}
	if err := unix.Sendmsg(sp[0], []byte("fds"), unix.UnixRights(send...), nil, 0); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("child: %w", err)
	}
	select {
	case p := <-peer:
		fmt.Printf("SO_PEERCRED of the box's process, as host root's listener sees it: %s\n", p)
	default:
		fmt.Println("SO_PEERCRED: the box did not connect")
	}
	for _, f := range []string{filepath.Join(ws, "from-box"), filepath.Join(root, "upper", "from-box")} {
		if fi, err := os.Lstat(f); err == nil {
			s := fi.Sys().(*syscall.Stat_t)
			fmt.Printf("on the host: %s owned by %d:%d\n", f, s.Uid, s.Gid)
		} else {
			fmt.Printf("on the host: %s: %v\n", f, err)
		}
	}
	return nil
}

func idmapped(path string, userns int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("open_tree: %w", err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount_setattr: %w", err)
	}
	return fd, nil
}

func release() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

func child(args []string) {
	binds, reads := args[:3], args[3:]
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(3*4))
	_, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		fatal(fmt.Errorf("recvmsg: %w", err))
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	fds, _ := unix.ParseUnixRights(&msgs[0])
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fatal(fmt.Errorf("make / private: %w", err))
	}
	var res []result
	for i, p := range binds {
		err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH)
		res = append(res, result{"move_mount " + p, err == nil, fmt.Sprint(err)})
	}
	// An overlay made in the box's namespace, as box-init makes the package caches': a host
	// root-owned lower folder, the upper one on the idmapped tmpfs.
	ovlIn := filepath.Join(binds[1], "merged")
	for _, d := range []string{"upper", "work", "merged"} {
		os.Mkdir(filepath.Join(binds[1], d), 0o755)
	}
	err = unix.Mount("overlay", ovlIn, "overlay", 0, "lowerdir=/usr/share/doc,upperdir="+binds[1]+"/upper,workdir="+binds[1]+"/work")
	res = append(res, result{"overlay in the box's namespace over /usr/share/doc, upper on the idmapped tmpfs", err == nil, fmt.Sprint(err)})
	// box-init holds every capability of the box's namespace, and none over host root's
	// files: a bind source under a root-only folder (the home /root) must be opened by host
	// root.
	_, err = os.ReadDir("/root")
	res = append(res, result{"box-init (all capabilities in its namespace) lists /root, 0700 (want refused)", err != nil, fmt.Sprint(err)})
	// As a box's program: no capability at all in the box's user namespace.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		fatal(fmt.Errorf("capset: %w", err))
	}
	for _, f := range reads {
		_, err := os.ReadFile(f)
		res = append(res, result{"read root-only " + f + " (want refused)", err != nil, fmt.Sprint(err)})
	}
	_, err = os.ReadFile(filepath.Join(binds[0], "own.txt"))
	res = append(res, result{"read the workspace's 0600 file", err == nil, fmt.Sprint(err)})
	for _, p := range binds {
		err := os.WriteFile(filepath.Join(p, "from-box"), []byte("x"), 0o644)
		info := fmt.Sprint(err)
		if fi, serr := os.Stat(filepath.Join(p, "from-box")); serr == nil {
			s := fi.Sys().(*syscall.Stat_t)
			info += fmt.Sprintf("; in the box owned by %d:%d", s.Uid, s.Gid)
		}
		res = append(res, result{"write in " + p, err == nil, info})
	}
	if err := os.WriteFile(filepath.Join(ovlIn, "from-box"), []byte("x"), 0o644); err != nil {
		res = append(res, result{"write in the overlay", false, err.Error()})
	} else {
		res = append(res, result{"write in the overlay", true, ""})
	}
	// RLIMIT_NPROC: the kernel exempts host root, not another uid.
	lim := unix.Rlimit{Cur: 20, Max: 20}
	unix.Setrlimit(unix.RLIMIT_NPROC, &lim)
	var started []*exec.Cmd
	for range 40 {
		c := exec.Command("/bin/sleep", "5")
		if c.Start() != nil {
			break
		}
		started = append(started, c)
	}
	res = append(res, result{"processes started of 40 under RLIMIT_NPROC 20 (want fewer than 20)", len(started) < 20, fmt.Sprint(len(started))})
	for _, c := range started {
		c.Process.Kill()
		c.Wait()
	}
	if fi, err := os.Stat("/usr/bin"); err == nil {
		s := fi.Sys().(*syscall.Stat_t)
		res = append(res, result{"/usr/bin's owner as the box sees it", true, fmt.Sprintf("%d:%d", s.Uid, s.Gid)})
	}
	if c, err := net.Dial("unix", os.Getenv("IDMAP_SOCKET")); err == nil {
		c.Close()
	}
	_, err = exec.Command("/bin/sh", "-c", "true").CombinedOutput()
	res = append(res, result{"exec /bin/sh", err == nil, fmt.Sprint(err)})
	for _, r := range res {
		r.Info = strings.TrimPrefix(strings.TrimPrefix(r.Info, "<nil>"), "; ")
		if r.Info == "<nil>" {
			r.Info = ""
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
}
