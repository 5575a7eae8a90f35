package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/safesocket"
)

func newDaemonCmd() *cobra.Command {
	var detach, system bool
	var systemEvery time.Duration
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the per-user daemon that builds and supervises boxes",
		Long: `Run the per-user daemon in the foreground, logging to stderr. With --detach it starts in the
background with no terminal, logs to the state directory and writes a pid file in the runtime
directory; ` + "`agentbox daemon stop`" + ` stops it. Stopping the daemon never stops running boxes:
the next daemon re-adopts them.

With --system (as root) it does not serve launches: it reads the system policy
(/etc/agentbox/policy.yaml) and renders its managed locks into Claude Code's managed settings
(docs/managed-settings.md), once, or every --every interval as a system service.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if system {
				if detach {
					return fmt.Errorf("--system runs in the foreground (as a system service); drop --detach")
				}
				if Heavy.RunSystem == nil {
					return execDaemon()
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
				defer stop()
				return Heavy.RunSystem(ctx, systemEvery)
			}
			if detach {
				c, err := client.New()
				if err != nil {
					return err
				}
				if c.Ping(cmd.Context()) == nil {
					return nil // already running
				}
				return startDetachedDaemon(cmd.Context(), c)
			}
			if Heavy.RunDaemon == nil {
				return execDaemon() // the same process, so that a service manager's pid stays right
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return Heavy.RunDaemon(ctx)
		},
	}
	cmd.Flags().BoolVar(&detach, "detach", false, "start in the background and return once it answers")
	cmd.Flags().BoolVar(&system, "system", false, "as root: render the system policy's managed locks into Claude Code's managed settings (/etc/claude-code), then exit (see --every)")
	cmd.Flags().DurationVar(&systemEvery, "every", 0, "with --system: render again at this interval until stopped (0: once)")
	var stopTimeout time.Duration
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the background daemon (boxes keep running)",
		Long: `Stop the background daemon: SIGTERM to the daemon its pid file names, once the daemon
answering on the socket confirms that pid, then wait until it has exited (at most --timeout).
Boxes keep running; the next daemon re-adopts them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if stopTimeout <= 0 {
				return fmt.Errorf("--timeout %v: give a duration above zero (30s by default)", stopTimeout)
			}
			dir, err := safesocket.RuntimeDir()
			if err != nil {
				return err
			}
			pidFile := filepath.Join(dir, "daemon.pid")
			b, err := os.ReadFile(pidFile)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no daemon is running (no pid file at %s)", pidFile)
			}
			if err != nil {
				return err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				return fmt.Errorf("%s does not hold a pid (%q): remove it if no daemon runs", pidFile, strings.TrimSpace(string(b)))
			}
			err = stopProcess(pid, func() error { return confirmDaemon(cmd.Context(), pid, pidFile) }, stopTimeout)
			if errors.Is(err, errProcessGone) {
				return fmt.Errorf("no daemon is running (daemon %d, named by %s, has exited)", pid, pidFile)
			}
			if err != nil {
				return fmt.Errorf("stop daemon %d: %w", pid, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped daemon %d\n", pid)
			return nil
		},
	}
	stop.Flags().DurationVar(&stopTimeout, "timeout", 30*time.Second, "how long to wait for the daemon to exit")
	cmd.AddCommand(stop)
	return cmd
}

// confirmDaemon checks that pid (read from pidFile) is the daemon: the daemon answering on the
// socket says so, or, when none answers (a daemon that hangs), the process is an agentbox
// daemon of this user by its command line.
func confirmDaemon(ctx context.Context, pid int, pidFile string) error {
	c, err := client.New()
	if err != nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, ierr := c.Info(ictx)
	if ierr == nil {
		if info.Pid != pid {
			return fmt.Errorf("%s names pid %d, but the daemon answering on %s is pid %d: not signalled", pidFile, pid, c.Socket, info.Pid)
		}
		return nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	if err != nil || len(args) < 2 || !strings.HasPrefix(filepath.Base(args[0]), "agentbox") || args[1] != "daemon" {
		return fmt.Errorf("no daemon answers on %s (%v), and pid %d (from %s) is not an agentbox daemon: not signalled; remove the pid file if no daemon runs", c.Socket, ierr, pid, pidFile)
	}
	return nil
}

// startDetachedDaemon starts `agentbox daemon` in its own session with no terminal, its
// output appended to the daemon log in the state directory, and waits until it answers on c.
// When the new daemon exits first (it found the store corrupt, the socket squatted, …) the
// error carries the log's last lines and says where the log is; when it exits because another
// daemon won the race to start, that daemon's answer is success.
//
// The daemon outlives this command, and finds the host programs it runs (git, go, bwrap)
// through the PATH it starts with: it starts with this one less the entries in the project
// the command is run for (projects: the workspace and the current folder, and the git
// repository holding each) and the relative ones (daemonPath). The daemon refuses every
// workspace that holds a folder of its own PATH (plan.CheckHostPath), so that a launch from
// an npm script (node_modules/.bin on PATH) or a direnv project (PATH_add bin) does not make
// the daemon refuse that project, the first launch included.
func startDetachedDaemon(ctx context.Context, c *client.Client, projects ...string) error {
	exe, closeFn, err := daemonBinary()
	if err != nil {
		return err
	}
	defer closeFn()
	state, err := safesocket.StateDir()
	if err != nil {
		return err
	}
	logPath := filepath.Join(state, "daemon.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	start, _ := logf.Seek(0, io.SeekEnd)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "daemon")
	cmd.Args[0] = "agentbox"
	if wd, err := os.Getwd(); err == nil {
		projects = append(projects, wd)
	}
	path, dropped := daemonPath(os.Getenv("PATH"), projects)
	cmd.Env = append(os.Environ(), "PATH="+path)
	if len(dropped) > 0 {
		fmt.Fprintf(logf, "agentbox: the daemon starts without these entries of PATH, in the project it was started for or relative: %s\n", strings.Join(dropped, ", "))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = detachedAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start daemon: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- c.WaitReady(wctx) }()
	select {
	case err := <-ready:
		return err
	case <-exited:
	}
	// The new daemon is gone: another one may have won the race to start.
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	cancel()
	<-ready
	if err := c.WaitReady(short); err == nil {
		return nil
	}
	return fmt.Errorf("the daemon exited at start: %s (full log: %s)", logTail(logPath, start), logPath)
}

// logTail returns the last lines written to path after offset, joined for an error message.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(b[offset:])), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

func isUnreachable(err error) bool { return errors.Is(err, client.ErrDaemonUnreachable) }

// daemonPath returns path less its relative or empty entries and those at or beneath one of
// projects (each folder given, symlink-resolved, and the top of the git repository holding
// it), and the entries left out. A project that is "/", the home or a folder above it keeps
// its entries: ~/bin is the user's, not the project's.
func daemonPath(path string, projects []string) (kept string, dropped []string) {
	home, _ := os.UserHomeDir()
	var tops []string
	add := func(d string) {
		d = filepath.Clean(d)
		if d == "/" || home != "" && (d == filepath.Clean(home) || strings.HasPrefix(filepath.Clean(home)+"/", d+"/")) {
			return
		}
		tops = append(tops, d)
	}
	for _, p := range projects {
		if !filepath.IsAbs(p) {
			continue
		}
		for _, d := range []string{filepath.Clean(p), plan.ResolveExisting(p)} {
			add(d)
			for g := filepath.Clean(d); g != "/"; g = filepath.Dir(g) {
				if _, err := os.Lstat(filepath.Join(g, ".git")); err == nil {
					add(g)
					break
				}
			}
		}
	}
	var out []string
	for _, e := range filepath.SplitList(path) {
		in := !filepath.IsAbs(e)
		if !in {
			for _, d := range []string{filepath.Clean(e), plan.ResolveExisting(e)} {
				for _, t := range tops {
					in = in || d == t || plan.Within(d, t)
				}
			}
		}
		if in {
			dropped = append(dropped, fmt.Sprintf("%q", e))
			continue
		}
		out = append(out, e)
	}
	return strings.Join(out, string(filepath.ListSeparator)), dropped
}
