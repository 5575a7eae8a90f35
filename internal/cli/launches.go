package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

func newLaunchesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "launches",
		Short: "List launches: id, program, workspace, state, pid, started, exit code",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			ls, err := c.Launches(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if ls == nil {
					ls = []api.Launch{}
				}
				return printJSON(cmd.OutOrStdout(), ls)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tPROGRAM\tWORKSPACE\tSTATE\tPID\tSTARTED\tEXIT")
			for _, l := range ls {
				exit := "-"
				if l.ExitCode != nil {
					exit = fmt.Sprint(*l.ExitCode)
				} else if l.Error != nil {
					exit = l.Error.Code
				}
				pid := "-"
				if l.ShimPid != 0 && (l.State == api.StateRunning || l.State == api.StateStarting) {
					pid = fmt.Sprint(l.BoxPid)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID[:12], strings.Join(append([]string{l.Program}, l.Args...), " "),
					l.Workspace, l.State, pid, l.Started.Local().Format(time.DateTime), exit)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newStopCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a box and every process in it; waits until none remains",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			l, err := c.Stop(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), l)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped %s (settled: %v)\n", l.ID, l.Settled)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stopped launch as JSON")
	return cmd
}

func newInfoCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the daemon: version, engine, kernel features, socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			info, err := c.Info(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), info)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "version\t%s\n", info.Version)
			fmt.Fprintf(w, "engine\t%s\n", info.Engine)
			fmt.Fprintf(w, "socket\t%s\n", info.Socket)
			fmt.Fprintf(w, "daemon pid\t%d\n", info.Pid)
			fmt.Fprintf(w, "launches\t%d running\n", info.Launches)
			for _, k := range sortedKeys(info.Kernel) {
				fmt.Fprintf(w, "kernel.%s\t%s\n", k, info.Kernel[k])
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
