package heavy

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/safesocket"
	"github.com/agentbox/agentbox/internal/selftest"
)

func newSelftestCmd() *cobra.Command {
	var (
		asJSON, verbose bool
		run             string
		parallel        int
	)
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: cli.HeavyShort("selftest"),
		Long: `Run the escape battery (the same attempts as agentbox's own attack tests) in real boxes
through your daemon: writes outside the workspace, secret reads, every way of replacing
protected configuration, /proc tricks, devices and setuid, host network and sockets, IPC,
terminals, kernel interfaces, credentials and pairings, and processes left behind.
Each attempt runs in a box of its own and must be refused, and leave nothing on the host.
Exit status 0 only when every attempt failed as it should; 1 when any got through.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := cli.EnsureDaemon(ctx)
			if err != nil {
				return err
			}
			o := selftest.Options{Parallel: parallel, Sessions: sessionMaker{ctx: ctx, c: c}, Netns: true}
			if dir, err := safesocket.RuntimeDir(); err == nil {
				o.RuntimeDir = dir
			}
			if run != "" {
				if o.Run, err = regexp.Compile(run); err != nil {
					return fmt.Errorf("--run: %w", err)
				}
			}
			if term.IsTerminal(int(os.Stdin.Fd())) {
				o.CallerTTY, _ = os.Readlink("/proc/self/fd/0")
			}
			if !asJSON {
				o.Progress = func(r selftest.Result) {
					fmt.Fprintf(cmd.ErrOrStderr(), "  %-4s %s\n", r.Status, r.Attempt)
				}
			}
			rep, err := selftest.Run(ctx, o)
			if err != nil {
				return err
			}
			if asJSON {
				if err := cli.PrintJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printSelftest(cmd.OutOrStdout(), rep, verbose)
			}
			if !rep.OK() {
				return cli.ExitError{Code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "print each attempt's evidence")
	f.StringVar(&run, "run", "", "run only the attempts whose name matches this regular expression")
	f.IntVar(&parallel, "parallel", 4, "boxes to run at once")
	return cmd
}

// printSelftest prints the report as a table, then a summary line.
func printSelftest(w io.Writer, rep *selftest.Report, verbose bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tCATEGORY\tEXPECTED\tOBSERVED\tRESULT")
	for _, r := range rep.Results {
		exp := r.Expected
		if len(exp) > 60 && !verbose {
			exp = exp[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Attempt, r.Category, exp, selftestCell(r.Observed), strings.ToUpper(string(r.Status)))
	}
	tw.Flush()
	if verbose {
		for _, r := range rep.Results {
			fmt.Fprintf(w, "\n%s (%s): %s\n", r.Attempt, r.Status, r.Expected)
			for _, ev := range r.Evidence {
				fmt.Fprintf(w, "    %s\n", ev)
			}
		}
	}
	fmt.Fprintf(w, "\n%d attempts: %d refused, %d got through or could not be judged, %d skipped\n",
		len(rep.Results), rep.Passed, rep.Failed, rep.Skipped)
}

func selftestCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

// sessionMaker makes the pairing attempts' sessions through the daemon.
type sessionMaker struct {
	ctx context.Context
	c   *client.Client
}

func (s sessionMaker) Create() (string, string, error) {
	sc, err := s.c.CreateSession(s.ctx, "agentbox-selftest")
	if err != nil {
		return "", "", err
	}
	return sc.ID, sc.Pairing, nil
}

func (s sessionMaker) Revoke(id string) error { return s.c.RevokeSession(s.ctx, id) }
