package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

// Versions are the CLI's version and the running daemon's, as `agentbox version --json` prints
// them.
type Versions struct {
	CLI string `json:"cli"`
	// Daemon is the running daemon's version; "" when no daemon runs.
	Daemon    string `json:"daemon,omitempty"`
	DaemonPid int    `json:"daemonPid,omitempty"`
	// Mismatch is true when a daemon runs and its version is not the CLI's.
	Mismatch bool `json:"mismatch"`
}

// restartHint says how to put a daemon of this CLI's version in place of the running one.
const restartHint = "restart it to use this version: `agentbox daemon stop` (running boxes keep running and the next daemon re-adopts them; the next `agentbox run` starts it), or `systemctl --user restart agentbox.service` where systemd runs it"

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of this agentbox and of the running daemon, and warn when they differ",
		Long: `Show the version of this agentbox (the CLI) and of the per-user daemon running now. A daemon
started by an earlier agentbox keeps running after an upgrade: when its version differs from
the CLI's, version says so (on stderr) and how to restart it. Without a running daemon only the
CLI's version is shown; version never starts one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := versions(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if err := PrintJSON(cmd.OutOrStdout(), v); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "agentbox %s\n", v.CLI)
				if v.Daemon == "" {
					fmt.Fprintln(cmd.OutOrStdout(), "daemon   not running (agentbox run starts it)")
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "daemon   %s (pid %d)\n", v.Daemon, v.DaemonPid)
				}
			}
			warnVersion(cmd.ErrOrStderr(), v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// versions asks the running daemon for its version; no daemon is not an error.
func versions(ctx context.Context) (*Versions, error) {
	v := &Versions{CLI: Version}
	c, err := client.New()
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx)
	if errors.Is(err, client.ErrDaemonUnreachable) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	daemonVersions(v, info)
	return v, nil
}

// daemonVersions fills v's daemon fields from the daemon's info.
func daemonVersions(v *Versions, info *api.Info) {
	v.Daemon, v.DaemonPid = info.Version, info.Pid
	v.Mismatch = v.Daemon != v.CLI
}

// launchVersions compares the version of the daemon that started a launch with this CLI's; a
// daemon that does not say predates the field, so it is of an earlier version.
func launchVersions(resp *api.LaunchResponse) *Versions {
	v := &Versions{CLI: Version, Daemon: resp.DaemonVersion, DaemonPid: resp.DaemonPid}
	if v.Daemon == "" {
		v.Daemon = "an earlier one"
	}
	v.Mismatch = v.Daemon != v.CLI
	return v
}

// warnVersion warns, when v says the versions differ, and says how to restart the daemon.
func warnVersion(w io.Writer, v *Versions) {
	if !v.Mismatch {
		return
	}
	pid := ""
	if v.DaemonPid != 0 {
		pid = fmt.Sprintf(" (pid %d)", v.DaemonPid)
	}
	fmt.Fprintf(w, "agentbox: warning: the running daemon%s is version %s, this agentbox is %s\n  hint: %s\n",
		pid, v.Daemon, v.CLI, restartHint)
}
