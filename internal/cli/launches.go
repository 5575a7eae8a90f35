package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

// defaultLaunchLimit is how many launches `agentbox launches` lists without --limit or --all.
const defaultLaunchLimit = 20

// Widths beyond which the COMMAND and WORKSPACE columns are shortened (the JSON is whole).
const (
	commandWidth   = 40
	workspaceWidth = 48
)

func newLaunchesCmd() *cobra.Command {
	var (
		asJSON, all, selftest bool
		limit                 int
		states                []string
	)
	cmd := &cobra.Command{
		Use:   "launches",
		Short: "List launches: id, program, workspace, state, pid, started, exit code",
		Long: `List launches, newest first: the last 20 unless --limit or --all say otherwise, without the
launches of agentbox's own escape probe (selftest) unless --selftest. The records of launches
that ended more than launches.retention ago (default 30 days) are deleted by the daemon;
` + "`agentbox launches prune`" + ` deletes them now.`,
		Example: `  agentbox launches
  agentbox launches --state running
  agentbox launches --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && cmd.Flags().Changed("limit") {
				return fmt.Errorf("--all and --limit exclude each other")
			}
			if limit < 1 {
				return fmt.Errorf("--limit %d: give 1 or more (--all lists every launch)", limit)
			}
			q := client.LaunchQuery{Limit: limit, HideProbes: !selftest && !all}
			if all {
				q.Limit = 0
			}
			for _, s := range states {
				if !slices.Contains(api.States, s) {
					return fmt.Errorf("--state %q: allowed values are %s", s, strings.Join(api.States, ", "))
				}
				q.States = append(q.States, s)
			}
			c, err := client.New()
			if err != nil {
				return err
			}
			ls, err := c.ListLaunches(cmd.Context(), q)
			if err != nil {
				return err
			}
			if asJSON {
				if ls == nil {
					ls = []api.Launch{}
				}
				return PrintJSON(cmd.OutOrStdout(), ls)
			}
			home, _ := os.UserHomeDir()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tCOMMAND\tWORKSPACE\tSTATE\tPID\tSTARTED\tEXIT\tRELAY\tEGRESS\tDRIFT")
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
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortID(l.ID), clipEnd(commandLine(l), commandWidth),
					clipStart(tildeHome(l.Workspace, home), workspaceWidth), l.State, pid, l.Started.Local().Format(time.DateTime), exit,
					relayColumn(l.Relay), egressColumn(l.Egress), driftFlag(l))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			printDrift(cmd.OutOrStdout(), ls)
			if q.Limit > 0 && len(ls) == q.Limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "(the %d most recent; --limit N or --all for more)\n", q.Limit)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON (every field, nothing shortened)")
	f.BoolVar(&all, "all", false, "list every launch, the selftest's included")
	f.IntVar(&limit, "limit", defaultLaunchLimit, "list the N most recent launches")
	f.StringSliceVar(&states, "state", nil, "list only launches in these states: "+strings.Join(api.States, ", ")+" (comma-separated or repeated)")
	f.BoolVar(&selftest, "selftest", false, "list the launches of agentbox's escape probe (selftest) too")
	cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return api.States, cobra.ShellCompDirectiveNoFileComp
	})
	cmd.AddCommand(newPruneCmd())
	return cmd
}

func newPruneCmd() *cobra.Command {
	var (
		asJSON    bool
		olderThan time.Duration
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete the records of launches that ended (all, or those older than --older-than)",
		Long: `Delete the records of launches that ended (exited, failed or lost, with no process of their box
left): every one, or those that ended more than --older-than ago. Running launches are never
touched; the audit log keeps its entries. The daemon does this by itself for records older than
launches.retention (default 30 days).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if olderThan < 0 {
				return fmt.Errorf("--older-than %v is negative: give a duration such as 24h, or 0 for every ended launch", olderThan)
			}
			c, err := client.New()
			if err != nil {
				return err
			}
			r, err := c.Prune(cmd.Context(), olderThan)
			if err != nil {
				return err
			}
			if asJSON {
				return PrintJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pruned %d launch record(s) that ended before %s\n", r.Pruned, r.Before.Local().Format(time.DateTime))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "delete only the records of launches that ended more than this long ago (Go duration: 24h, 168h)")
	return cmd
}

// commandLine is the program and its arguments as one line.
func commandLine(l api.Launch) string {
	return strings.Join(append([]string{l.Program}, l.Args...), " ")
}

// clipEnd shortens s to n runes, ending it with "…".
func clipEnd(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// clipStart shortens s to n runes, beginning it with "…" (the end of a path says most).
func clipStart(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// tildeHome writes a path beneath home as ~/….
func tildeHome(p, home string) string {
	if home != "" && home != "/" {
		if rest, ok := strings.CutPrefix(p, home+"/"); ok {
			return "~/" + rest
		}
	}
	return p
}

func newStopCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a box and every process in it; waits until none remains",
		Args:  launchArgs(cobra.ExactArgs(1)),
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
				return PrintJSON(cmd.OutOrStdout(), l)
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
		Short: "Show the daemon: version (and this agentbox's), engine, kernel features, socket",
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
			v := &Versions{CLI: Version}
			daemonVersions(v, info)
			defer warnVersion(cmd.ErrOrStderr(), v)
			if asJSON {
				return PrintJSON(cmd.OutOrStdout(), info)
			}
			if info.ConfigError != "" {
				printConfigError(cmd.ErrOrStderr(), info.ConfigError)
			}
			if info.RelayNotice != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "agentbox: "+info.RelayNotice)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "version\t%s (daemon), %s (this agentbox)\n", info.Version, Version)
			fmt.Fprintf(w, "engine\t%s\n", info.Engine)
			fmt.Fprintf(w, "socket\t%s\n", info.Socket)
			fmt.Fprintf(w, "daemon pid\t%d\n", info.Pid)
			if info.BoxBinary != "" {
				fmt.Fprintf(w, "box binary\t%s\n", info.BoxBinary)
			}
			fmt.Fprintf(w, "launches\t%d running\n", info.Launches)
			fmt.Fprintf(w, "sessions\t%d live\n", info.Sessions)
			for _, id := range sortedKeysOf(info.Relay) {
				st := info.Relay[id]
				fmt.Fprintf(w, "relay %s\t%d requests, last status %d, tokens %d in / %d out\n", id[:12], st.Requests, st.LastStatus, st.InputTokens, st.OutputTokens)
			}
			if p := info.Posture; p != nil {
				fmt.Fprintf(w, "claude code managed source\t%s %s\n", p.Source, strings.Join(p.Files, ", "))
				fmt.Fprintf(w, "claude code locks\tallowManagedHooksOnly=%v allowManagedMcpServersOnly=%v\n", p.AllowManagedHooksOnly, p.AllowManagedMcpServersOnly)
			}
			if info.Readiness != nil {
				fmt.Fprintf(w, "readiness\t%s\n", readinessLine(info.Readiness))
			}
			if v := info.Violations; v != nil && (v.Posture != "" || v.Total > 0) {
				fmt.Fprintf(w, "wrap-mode violations\t%d recorded, %d terminated (posture %s)\n", v.Total, v.Terminated, v.Posture)
				for _, x := range v.Recent {
					fmt.Fprintf(w, "  violation\t%s %s pid %d (parent %d %s): %s\n", x.Time.Local().Format(time.DateTime), x.Program, x.Pid, x.PPid, x.ParentExe, x.Action)
				}
			}
			for _, k := range sortedKeys(info.Kernel) {
				fmt.Fprintf(w, "kernel.%s\t%s\n", k, info.Kernel[k])
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// relayColumn is the RELAY column: requests, the last status and tokens, "-" without any.
func relayColumn(r *api.RelayStats) string {
	if r == nil || r.Requests == 0 {
		return "-"
	}
	return fmt.Sprintf("%d req, last %d, %d/%d tok", r.Requests, r.LastStatus, r.InputTokens, r.OutputTokens)
}

// egressColumn is the EGRESS column: tunnels allowed and refused, and the last refused target
// (what to add to egressAllow; "expected" when the launch's profile expects it refused), "-"
// without any.
func egressColumn(e *api.EgressStats) string {
	if e == nil || e.Allowed+e.Refused+e.Failed == 0 {
		return "-"
	}
	s := fmt.Sprintf("%d ok, %d refused", e.Allowed, e.Refused)
	if e.LastRefused != "" {
		expected := slices.ContainsFunc(e.Refusals, func(r api.EgressRefusal) bool { return r.Expected && r.Target == e.LastRefused })
		if expected {
			s += " (last " + e.LastRefused + ", expected)"
		} else {
			s += " (last " + e.LastRefused + ")"
		}
	}
	return s
}

// driftFlag is the DRIFT column: "DRIFT" once the integrity watch saw protected configuration
// change (it never clears), "-" otherwise.
func driftFlag(l api.Launch) string {
	if l.Drift {
		return "DRIFT"
	}
	return "-"
}

// printDrift lists, below the table, the integrity transitions of the launches with drift.
func printDrift(out io.Writer, ls []api.Launch) {
	for _, l := range ls {
		if !l.Drift {
			continue
		}
		fmt.Fprintf(out, "\nintegrity drift in %s (%s):\n", l.ID[:12], l.Workspace)
		for _, e := range l.DriftEvents {
			if !e.Alert {
				continue
			}
			detail := ""
			if e.Detail != "" {
				detail = " (" + e.Detail + ")"
			}
			// The path and the detail may hold names the box chose: escaped, as by agentbox changes.
			fmt.Fprintf(out, "  %s  %-8s  %s%s [%s]\n", e.Time.Local().Format(time.DateTime), visibleLine(e.Kind), visibleLine(e.Path), visibleLine(detail), visibleLine(e.Source))
		}
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
