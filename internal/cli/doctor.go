package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

// doctorProbeTimeout bounds a probe run by `agentbox doctor` itself.
const doctorProbeTimeout = time.Minute

func newDoctorCmd() *cobra.Command {
	var asJSON, probe bool
	var engineName string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show whether this host can build the box, with every fact the readiness probe checked",
		Long: `Show the readiness state: whether boxes can be built here and why not, with each fact the probe
box attested (✓/✗), the typed reason and what to do, the kernel facts and the engine.

By default doctor asks the running daemon for its last probe. With --probe, or when no daemon
runs, it runs a probe itself (serialized with the daemon's). It exits 0 when ready, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var r *api.Readiness
			var cfgErr string // the daemon's reason for refusing the configuration files
			source := "daemon"
			if !probe && engineName == "" {
				c, err := client.New()
				if err != nil {
					return err
				}
				r, err = c.Readiness(ctx)
				if errors.Is(err, client.ErrDaemonUnreachable) {
					r = nil // no daemon runs: probe here (below)
				} else if err != nil {
					return err
				}
				if r != nil {
					// Without a daemon, the probe below loads the configuration itself and
					// fails on an invalid file with its file and line.
					info, err := c.Info(ctx)
					if err != nil {
						return err
					}
					cfgErr = info.ConfigError
				}
			}
			if r == nil {
				var err error
				if r, err = doctorProbe(ctx, engineName); err != nil {
					return err
				}
				source = "probe by agentbox doctor"
			}
			if asJSON {
				if err := PrintJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else {
				printReadiness(cmd.OutOrStdout(), r, source)
			}
			if cfgErr != "" {
				printConfigError(cmd.ErrOrStderr(), cfgErr)
			}
			if r.State != api.ReadinessReady || cfgErr != "" {
				return ExitError{Code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&probe, "probe", false, "run a probe here instead of asking the daemon")
	f.StringVar(&engineName, "engine", "", "probe this engine (native or bwrap) instead of the configured one (implies --probe)")
	return cmd
}

// printConfigError prints why the daemon refuses the configuration files (file:line: field:
// reason) and what follows from it.
func printConfigError(w io.Writer, reason string) {
	fmt.Fprintf(w, "agentbox: configuration invalid: %s\n  no launch runs until it is fixed (agentbox config validate FILE checks a file); running boxes keep the last good configuration\n", reason)
}

// doctorProbe runs one probe in this process (the daemon binary), under the same lock as the
// daemon's probes; the CLI runs the daemon binary's doctor instead.
func doctorProbe(ctx context.Context, engineName string) (*api.Readiness, error) {
	if Heavy.Probe == nil {
		return nil, execDaemon()
	}
	pctx, cancel := context.WithTimeout(ctx, doctorProbeTimeout)
	defer cancel()
	return Heavy.Probe(pctx, engineName)
}

// readinessLine is the one-line summary `agentbox info` prints.
func readinessLine(r *api.Readiness) string {
	switch r.State {
	case api.ReadinessReady:
		s := "ready (engine " + r.Engine
		if r.Cached {
			s += ", cached proof"
		}
		return s + ")"
	case api.ReadinessUnavailable:
		s := fmt.Sprintf("unavailable: %s: %s", r.Reason, r.Detail)
		if !r.NextRetry.IsZero() {
			s += fmt.Sprintf(" (retry %s)", r.NextRetry.Local().Format(time.TimeOnly))
		}
		return s
	}
	return r.State
}

func printReadiness(w io.Writer, r *api.Readiness, source string) {
	fmt.Fprintf(w, "readiness: %s (engine %s, from the %s)\n", r.State, r.Engine, source)
	if r.State == api.ReadinessUnavailable {
		fmt.Fprintf(w, "  reason: %s\n  detail: %s\n  hint:   %s\n", r.Reason, r.Detail, r.Hint)
		if !r.NextRetry.IsZero() {
			fmt.Fprintf(w, "  next retry: %s\n", r.NextRetry.Local().Format(time.DateTime))
		}
	}
	if !r.Since.IsZero() {
		fmt.Fprintf(w, "  since: %s\n", r.Since.Local().Format(time.DateTime))
	}
	if !r.ProbedAt.IsZero() {
		how := ""
		if r.Cached {
			how = " (cached proof for this configuration, kernel and binary)"
		}
		fmt.Fprintf(w, "  probed: %s in %v%s\n", r.ProbedAt.Local().Format(time.DateTime), r.Duration.Round(time.Millisecond), how)
	}
	if len(r.Facts) > 0 {
		fmt.Fprintln(w, "facts:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range r.Facts {
			mark := "✓"
			if !f.OK {
				mark = "✗"
			}
			fmt.Fprintf(tw, "  %s %s\t%s\n", mark, f.Name, oneLine(f.Detail))
		}
		tw.Flush()
	}
	if len(r.Kernel) > 0 {
		fmt.Fprintln(w, "kernel:")
		keys := make([]string, 0, len(r.Kernel))
		for k := range r.Kernel {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, k := range keys {
			v := r.Kernel[k]
			if v == "" {
				v = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\n", k, v)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "engine: %s\n", r.Engine)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
