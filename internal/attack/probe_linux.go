package attack

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine/spec"
)

// Context is what an attempt gets inside the box.
type Context struct {
	Targets Targets
	// InitialFDs are the descriptors open when the probe started, before it opened any.
	InitialFDs []int
	// self is the argv prefix that re-runs the probe entry (for helper children).
	self []string
}

// ProbeMain is the in-box entry point (`agentbox attack-probe -targets T NAME…`): it runs
// the named attempts (all of them when none is named), one after the other, and prints one
// report line per attempt (see ParseReport). It exits 0 when every attempt ran, whatever it
// found; the verdict is the host's.
func ProbeMain(args []string) int {
	fds := openFDs() // first: before this process opens anything of its own
	prefix := append([]string(nil), os.Args[:len(os.Args)-len(args)]...)
	if len(args) > 0 && args[0] == childFlag {
		return childMain(args[1:])
	}
	fs := flag.NewFlagSet(ProbeCommand, flag.ContinueOnError)
	targets := fs.String("targets", "", "host targets (from ProbeArgs)")
	out := fs.String("out", "", "also append the report to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var t Targets
	if *targets != "" {
		var err error
		if t, err = DecodeTargets(*targets); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	run := attempts
	if fs.NArg() > 0 {
		run = nil
		for _, n := range fs.Args() {
			a, ok := Lookup(n)
			if !ok {
				fmt.Fprintf(os.Stderr, "%s: no attempt %q\n", ProbeCommand, n)
				return 2
			}
			run = append(run, a)
		}
	}
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	c := &Context{Targets: t, InitialFDs: fds, self: prefix}
	for _, a := range run {
		if why := t.Missing(a); why != "" {
			io.WriteString(w, FormatObservation(Observation{Attempt: a.Name, Skipped: why}))
			continue
		}
		o := a.Run(c)
		o.Attempt = a.Name
		io.WriteString(w, FormatObservation(o))
	}
	return 0
}

// openFDs lists the open descriptors with raw system calls (nothing of the Go runtime's own
// file handling), without the one used to list them.
func openFDs() []int {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(dir)
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil || n == 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd != dir {
				fds = append(fds, fd)
			}
		}
	}
	return fds
}

// childFlag starts a helper child of the probe (see childMain).
const childFlag = "-child"

// childMain runs one helper role in a child of the probe.
func childMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	switch args[0] {
	case "exit":
		return 0
	case "pause":
		// Wait until killed (the parent holds the other end of stdin).
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "escapee":
		// Start a grandchild in its own session and leave it behind.
		cmd := exec.Command("/proc/self/exe", append(append([]string(nil), os.Args[1:len(os.Args)-len(args)]...), "pause-forever")...)
		cmd.Args[0] = os.Args[0]
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println(cmd.Process.Pid)
		return 0
	case "pause-forever":
		unix.Close(0)
		unix.Close(1)
		unix.Close(2)
		for {
			unix.Pause()
		}
	case "int80":
		return int80Child()
	case "tiocsti":
		return tiocstiChild(args[1:])
	}
	if f := moreChildren[args[0]]; f != nil {
		return f(args[1:])
	}
	return 2
}

// child returns a command that runs the probe's helper role in a child process.
func (c *Context) child(role ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), c.self...), childFlag), role...)
	cmd := exec.Command("/proc/self/exe", argv[1:]...)
	cmd.Args[0] = argv[0]
	return cmd
}

// pauser is a child of the probe that waits until it is stopped.
type pauser struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

func (c *Context) startPauser() (*pauser, error) {
	cmd := c.child("pause")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pauser{cmd: cmd, in: in}, nil
}

func (p *pauser) stop() {
	p.cmd.Process.Kill()
	p.in.Close()
	p.cmd.Wait()
}

// result collects the tries of one attempt.
type result struct {
	o      Observation
	breach bool
}

// deny records a try that must fail: err == nil is a breach.
func (r *result) deny(what string, err error) {
	if err == nil {
		r.breach = true
		r.o.Evidence = append(r.o.Evidence, what+": SUCCEEDED")
		return
	}
	r.o.Evidence = append(r.o.Evidence, what+": "+describe(err))
}

// denyOrStaged records an attempt on the protected file p like deny, except that one that
// succeeded in a staged copy is no breach by itself: agentbox gives the box a writable copy of
// an existing protected file, on a tmpfs of its own, bound over the path (for a file of a git
// directory, a symlink to the copy under spec.StagedDir is bound there instead); what the box
// writes there is kept as a proposed change, never in the host's file — which the host-side
// check (checkProtected) compares after the box.
func (r *result) denyOrStaged(p, what string, err error) {
	if err == nil && stagedCopy(p) {
		r.o.Evidence = append(r.o.Evidence, what+": done in the box's staged copy (a writable mount over the path, or a symlink mounted there to one; the host's file is checked after the box)")
		return
	}
	r.deny(what, err)
}

// stagedCopy reports whether p is a staged copy: a regular file that is a writable mount of its
// own over the path, or a symlink that is a mount of its own over the path leading to such a
// file in spec.StagedDir.
func stagedCopy(p string) bool {
	var l, d, f unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID|unix.STATX_TYPE, &l) != nil ||
		unix.Statx(unix.AT_FDCWD, filepath.Dir(p), 0, unix.STATX_MNT_ID, &d) != nil ||
		unix.Statx(unix.AT_FDCWD, p, 0, unix.STATX_MNT_ID|unix.STATX_TYPE, &f) != nil {
		return false
	}
	if l.Mode&unix.S_IFMT == unix.S_IFLNK {
		to, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(to, spec.StagedDir+"/") {
			return false
		}
	} else if l.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	var fs unix.Statfs_t
	return l.Mnt_id != d.Mnt_id && f.Mode&unix.S_IFMT == unix.S_IFREG && f.Mnt_id != d.Mnt_id &&
		unix.Statfs(p, &fs) == nil && fs.Flags&unix.ST_RDONLY == 0
}

// fail records a breach found another way.
func (r *result) fail(format string, a ...any) {
	r.breach = true
	r.o.Evidence = append(r.o.Evidence, "BREACH: "+fmt.Sprintf(format, a...))
}

// note records evidence that decides nothing by itself.
func (r *result) note(format string, a ...any) {
	r.o.Evidence = append(r.o.Evidence, fmt.Sprintf(format, a...))
}

func (r *result) fact(k, v string) {
	if r.o.Facts == nil {
		r.o.Facts = map[string]string{}
	}
	r.o.Facts[k] = v
}

func (r *result) done() Observation {
	r.o.Blocked = !r.breach
	return r.o
}

// describe renders an error with its errno name, so evidence says which layer refused.
func describe(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		name := unix.ErrnoName(en)
		if name == "" {
			name = "errno " + strconv.Itoa(int(en))
		}
		msg := err.Error()
		if !strings.Contains(msg, en.Error()) {
			msg += ": " + en.Error()
		}
		return name + " (" + msg + ")"
	}
	return err.Error()
}

// errno returns err as an Errno, or nil for a zero Errno.
func errno(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
