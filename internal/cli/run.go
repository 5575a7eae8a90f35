package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/wrap"
)

func newRunCmd() *cobra.Command {
	var (
		wait, detach, asJSON bool
		workspace, egress    string
		programPath          string
		detachKeys           string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] PROGRAM [-- ARGS...]",
		Short: "Run a program in a box, attached to this terminal",
		Long: `Run PROGRAM (any executable on PATH) in a box with the current directory (or --workspace)
as its workspace. By default the program runs in this terminal: same input, Ctrl+C and window
size reach it, and agentbox exits with the program's own exit code (128+N for a signal).
When agentbox itself fails before the program starts, it prints the reason and exits 125.

The detach keys (Ctrl-P Ctrl-Q unless --detach-keys or console.detachKeys say otherwise) leave
the program running and end this command with 0; ` + "`agentbox attach ID`" + ` returns to it. A
terminal that closes while attached hangs the program up (SIGHUP), as it would unboxed.
With --detach the box starts in the background and its launch id is printed; started from a
terminal it keeps a console to attach to later.`,
		Example: `  agentbox run claude -- -p "fix the failing test"
  echo hi | agentbox run cat
  agentbox run -d sleep -- 600
  agentbox run -d bash && agentbox attach ID`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait && detach {
				return fmt.Errorf("--wait and --detach exclude each other")
			}
			if asJSON && !detach {
				return fmt.Errorf("--json needs --detach (an attached run's output is the program's own)")
			}
			if err := checkDetachKeys(cmd, detachKeys); err != nil {
				return err
			}
			req, err := buildLaunchRequest(args, workspace, egress, programPath)
			if err != nil {
				return err
			}
			req.Detach = detach
			req.TTY = term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd()))
			if detach && req.TTY {
				// The PTY's size until a client attaches with its own.
				if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 && h > 0 && w < 1<<16 && h < 1<<16 {
					req.Rows, req.Cols = uint16(h), uint16(w)
				}
			}
			ctx := cmd.Context()
			// Ask the daemon straight away (no ping first: a launch costs one round trip); only
			// when none answers is one started, and the launch asked again. A dial that failed
			// never reached a daemon, so the launch cannot have happened twice.
			c, err := client.New()
			if err != nil {
				return err
			}
			resp, err := c.Launch(ctx, req)
			if isUnreachable(err) {
				if err = startDetachedDaemon(ctx, c, req.Workspace); err != nil {
					return err
				}
				resp, err = c.Launch(ctx, req)
			}
			if err != nil {
				return err
			}
			for _, n := range resp.Notices {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
			}
			warnVersion(cmd.ErrOrStderr(), launchVersions(resp))
			if detach {
				if asJSON {
					return PrintJSON(cmd.OutOrStdout(), resp)
				}
				fmt.Fprintln(cmd.OutOrStdout(), resp.ID)
				return nil
			}
			err = attachConsole(cmd, resp, detachKeys)
			if errors.Is(err, console.ErrShimGone) {
				err = endedAs(ctx, c, resp.ID, err)
			}
			var exit ExitError
			if errors.As(err, &exit) {
				// The program ended (not a detach): say which hosts the network refused, and
				// what the launch left to review.
				exitSummary(ctx, c, resp.ID, cmd.ErrOrStderr())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVar(&wait, "wait", false, "run attached and exit with the program's exit code (the default)")
	f.BoolVarP(&detach, "detach", "d", false, "start the box in the background and print its launch id")
	f.BoolVar(&asJSON, "json", false, "with --detach: print the launch as JSON")
	f.StringVar(&workspace, "workspace", "", "workspace directory, bound read-write (default: the top level of the git repository holding the current directory, else the current directory)")
	f.StringVar(&egress, "egress", "", "network: deny (default, loopback only) or allow (the host network, logged)")
	addDetachKeysFlag(cmd, &detachKeys)
	f.StringVar(&programPath, "program-path", "", "the program's executable (absolute), instead of looking PROGRAM up on PATH (wrap-mode launchers pass the managed install)")
	return cmd
}

// buildLaunchRequest resolves the program (programPath, else PROGRAM on the caller's PATH) and
// the workspace.
func buildLaunchRequest(args []string, workspace, egress, programPath string) (*api.LaunchRequest, error) {
	prog := args[0]
	rest := args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	path, err := resolveProgram(prog, programPath)
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("current directory: %w", err)
	}
	// Without --workspace the daemon widens the workspace to the git repository around cwd.
	repo := workspace == ""
	if repo {
		workspace = cwd
	}
	if workspace, err = filepath.Abs(workspace); err != nil {
		return nil, err
	}
	if workspace, err = filepath.EvalSymlinks(workspace); err != nil {
		return nil, fmt.Errorf("--workspace: %w", err)
	}
	if cwd, err = filepath.EvalSymlinks(cwd); err != nil {
		return nil, err
	}
	return &api.LaunchRequest{
		Program:   prog,
		Path:      path,
		Args:      rest,
		Workspace: workspace,
		Cwd:       cwd,
		Env:       os.Environ(),
		Egress:    egress,

		RepoWorkspace: repo,
	}, nil
}

// resolveProgram returns the absolute path of the executable to box. A name is looked up on
// PATH skipping agentbox's own wrap-mode launchers (wrap.LookPath): a launcher first on PATH
// must never find itself, and boxing a launcher would only run agentbox inside the box. A
// launcher named explicitly is refused for the same reason.
func resolveProgram(prog, programPath string) (string, error) {
	path := programPath
	switch {
	case programPath != "":
		if !filepath.IsAbs(programPath) {
			return "", &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("--program-path %q is not absolute", programPath)}
		}
	case strings.Contains(prog, "/"):
		p, err := exec.LookPath(prog)
		if err != nil {
			return "", &api.Error{Code: api.CodeProgramNotFound, Message: fmt.Sprintf("program %q: not found or not executable", prog),
				Hint: "install it, or give its path"}
		}
		path = p
	default:
		if path = wrap.LookPath(prog, os.Getenv("PATH")); path == "" {
			return "", &api.Error{Code: api.CodeProgramNotFound, Message: fmt.Sprintf("program %q: not found on PATH or not executable", prog),
				Hint: "install it, or give its path"}
		}
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if wrap.IsLauncher(path) {
		return "", &api.Error{Code: api.CodeProgramNotExec, Message: fmt.Sprintf("%s is an agentbox wrap-mode launcher, not the program", path),
			Hint: "run the program by its name, or name the vendor's executable with --program-path"}
	}
	return path, nil
}

// EnsureDaemon returns a client of a running daemon, starting one in the background first when
// none answers.
func EnsureDaemon(ctx context.Context) (*client.Client, error) {
	c, err := client.New()
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx); err == nil {
		return c, nil
	} else if !isUnreachable(err) {
		return nil, err
	}
	return c, startDetachedDaemon(ctx, c)
}

// egressHint is the line printed when an attached launch ends after the egress proxy refused
// hosts: which, and the key that would allow each; "" when none was refused. A refusal the
// launch's profile expects (a request the program makes at every start whatever its settings)
// is not announced: no key the user could set makes it go away; the launch's record lists it.
func egressHint(e *api.EgressStats) string {
	if e == nil {
		return ""
	}
	byKey := map[string][]string{}
	var keys []string
	for _, r := range e.Refusals {
		if r.Expected {
			continue
		}
		if byKey[r.Key] == nil {
			keys = append(keys, r.Key)
		}
		byKey[r.Key] = append(byKey[r.Key], r.Target)
	}
	if len(keys) == 0 {
		return ""
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(byKey[k], ", "), k))
	}
	return "agentbox: the box has no network of its own, and its egress proxy refused " + strings.Join(parts, "; ") +
		"; to let a box reach one, add it to that key in your agentbox config (docs/egress.md)"
}

// inGitDir reports whether the workspace-relative path rel lies in a .git folder (the
// workspace's, a nested repository's, a submodule's gitdir under .git/modules).
func inGitDir(rel string) bool {
	for _, e := range strings.Split(filepath.ToSlash(rel), "/") {
		if e == ".git" {
			return true
		}
	}
	return false
}

// endedAs is how launch id ended by the daemon's record, for a client that found its shim
// gone: a box that failed at once may have ended, and its launch directory been removed,
// before the client reached the shim (seen in CI under load: "box shim is gone" instead of
// the refusal's reason). The record's error, else its exit code; err when it has neither.
func endedAs(ctx context.Context, c *client.Client, id string, err error) error {
	l, gerr := c.WaitEnded(ctx, id)
	switch {
	case gerr != nil || l.State == api.StateRunning || l.State == api.StateStarting:
		return err
	case l.Error != nil:
		return l.Error
	case l.ExitCode != nil:
		return ExitError{Code: *l.ExitCode}
	}
	return err
}

// exitSummary waits until the daemon has recorded launch id as ended (its brokers' cleanup
// done: the last guard pass, the integrity check at exit) and tells w what the launch left to
// review: the hosts the egress proxy refused, the changes it proposed to protected
// configuration, the instruction files it changed, and what the box wrote to protected files
// that could not be kept as a proposed change. All of it comes in the one answer that waits
// for the end (api.WaitEnded), each request costing the end of every launch a round trip.
// Nothing is printed when there is nothing to say, or when the daemon cannot tell.
func exitSummary(ctx context.Context, c *client.Client, id string, w io.Writer) {
	var l *api.Launch
	for i := 0; i < 1000; i++ { // a hang guard: the daemon records the end right after cleanup
		got, err := c.WaitEnded(ctx, id)
		if err != nil {
			break
		}
		l = got
		if got.State != api.StateRunning && got.State != api.StateStarting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l == nil {
		return
	}
	if hint := egressHint(l.Egress); hint != "" {
		fmt.Fprintln(w, hint)
	}
	if l.State == api.StateRunning || l.State == api.StateStarting {
		return
	}
	var instr []string
	seen := map[string]bool{}
	for _, ev := range l.DriftEvents {
		rel, err := filepath.Rel(l.Workspace, ev.Path)
		// Instruction files are the non-alert events outside git's own files: HEAD, and the
		// caches git rebuilds that the check at exit moves aside without an alert (a
		// commit-graph a box's git gc wrote), are no instruction files (dogfood20: before,
		// every git gc in a box ended with "the launch changed instruction files:
		// .git/objects/info/commit-graph").
		if ev.Alert || ev.Source == api.DriftSourceUntracked || err != nil || strings.HasPrefix(rel, "..") || filepath.Base(rel) == "HEAD" || inGitDir(rel) || seen[rel] {
			continue
		}
		seen[rel] = true
		instr = append(instr, visibleLine(rel))
	}
	if len(instr) > 0 {
		fmt.Fprintf(w, "agentbox: the launch changed instruction files: %s\n", strings.Join(instr, ", "))
	}
	printAlerts(w, l)
	n := l.Proposed
	if n == nil {
		// A daemon of a version without Launch.Proposed: the changes themselves.
		if cs, err := c.Changes(ctx, id); err == nil {
			n = &api.ProposedCount{Changes: len(cs.Changes), Dropped: cs.Dropped}
		}
	}
	if n != nil && n.Changes-n.Ignored > 0 {
		fmt.Fprintf(w, "agentbox: the box proposed %s to protected configuration: agentbox changes %s\n", plural(n.Changes-n.Ignored, "change"), id[:12])
	}
	if n != nil && n.Ignored > 0 {
		fmt.Fprintf(w, "agentbox: the launch left %d files in git-ignored places (no git status shows them); they were moved out of the workspace: agentbox changes %s, then agentbox apply %s PATH\n", n.Ignored, id[:12], id[:12])
	}
	if n != nil && n.IgnoredDropped > 0 {
		fmt.Fprintf(w, "agentbox: %d more files the launch left in git-ignored places were removed from the workspace, past the bound of what is kept (agentbox launches shows the alert)\n", n.IgnoredDropped)
	}
	if n != nil && n.Dropped > 0 {
		fmt.Fprintf(w, "agentbox: the box created %d more files at protected paths, moved out of the workspace and not kept (its proposed changes were full): agentbox changes %s\n", n.Dropped, id[:12])
	}
	// The untracked files the launch created or changed that git status does not name stay,
	// as every untracked file does; their names are said, since the user's review is git status.
	for _, ev := range l.DriftEvents {
		if ev.Source == api.DriftSourceUntracked {
			fmt.Fprintf(w, "agentbox: the launch created or changed untracked files that git status does not name: %s; git status --untracked-files=all lists them\n", visibleLine(ev.Detail))
		}
	}
	// What the box wrote to a protected file and was not kept as a proposed change (the
	// collection failed, or the box wrote more than the bound) is said, never dropped silently.
	for _, ev := range l.DriftEvents {
		if ev.Source != api.DriftSourceCollect {
			continue
		}
		path := ev.Path
		if rel, err := filepath.Rel(l.Workspace, ev.Path); err == nil && !strings.HasPrefix(rel, "..") {
			path = rel
		}
		fmt.Fprintf(w, "agentbox: the box's change to protected %s was not collected as a proposed change: %s (agentbox launches shows the alert)\n", visibleLine(path), visibleLine(ev.Detail))
	}
}

// exitAlertLines bounds the drift alerts the end of an attached launch prints; the rest are
// counted and left to agentbox launches.
const exitAlertLines = 10

// printAlerts says, one line each, what the integrity watch alerted on during the launch and at
// its end (a folder moved aside, an index that could not be checked, flags cleared): an alert
// the user is not shown is no alert. The staged copies' collection failures are said above.
func printAlerts(w io.Writer, l *api.Launch) {
	shown, more := 0, 0
	for _, ev := range l.DriftEvents {
		if !ev.Alert || ev.Source == api.DriftSourceCollect {
			continue
		}
		if shown == exitAlertLines {
			more++
			continue
		}
		shown++
		path := ev.Path
		if rel, err := filepath.Rel(l.Workspace, ev.Path); err == nil && !strings.HasPrefix(rel, "..") {
			path = rel
		}
		detail := ""
		if ev.Detail != "" {
			detail = ": " + ev.Detail
		}
		// The path and the detail may hold names the box chose: escaped, as by agentbox launches.
		fmt.Fprintf(w, "agentbox: integrity alert: %s %s%s\n", visibleLine(ev.Kind), visibleLine(path), visibleLine(detail))
	}
	if more > 0 {
		fmt.Fprintf(w, "agentbox: integrity alert: and %d more: agentbox launches\n", more)
	}
}
