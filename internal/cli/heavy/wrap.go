package heavy

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wrap"
)

// wrapFlags are the flags every wrap subcommand shares.
type wrapFlags struct {
	prefix   string
	agentbox string
	policy   string
	programs []string
}

func (f *wrapFlags) add(cmd *cobra.Command, programs bool) {
	cmd.Flags().StringVar(&f.prefix, "prefix", wrap.DefaultPrefix, "directory of the launchers; it must come before the vendors' installs on PATH")
	if !programs {
		return
	}
	cmd.Flags().StringVar(&f.agentbox, "agentbox", "", "agentbox binary the launchers run (default: the agentbox CLI installed with this agentbox)")
	cmd.Flags().StringVar(&f.policy, "policy", "", "system policy to read containment.programs from (default "+config.DefaultPolicyFile+"; root-owned)")
	cmd.Flags().StringArrayVar(&f.programs, "program", nil, "NAME or NAME=VENDOR-PATH: a launcher for this program instead of the policy's list (repeatable)")
}

// managed returns the programs to render: --program, else the policy's containment.programs.
func (f *wrapFlags) managed() ([]wrap.Program, error) {
	if len(f.programs) > 0 {
		var out []wrap.Program
		for _, p := range f.programs {
			name, vendor, _ := strings.Cut(p, "=")
			if vendor != "" && !filepath.IsAbs(vendor) {
				return nil, fmt.Errorf("--program %s: the vendor path must be absolute", p)
			}
			out = append(out, wrap.Program{Name: name, Vendor: vendor})
		}
		return out, nil
	}
	// containment.programs is the policy's alone: no user layer is read (run by root through
	// sudo, it would be the invoking user's).
	eff, err := config.Load(config.LoadOptions{PolicyFile: f.policy, PolicyOnly: true})
	if err != nil {
		return nil, err
	}
	var out []wrap.Program
	for _, p := range eff.Config.Containment.Programs {
		out = append(out, wrap.Program{Name: p.Name, Vendor: p.Path})
	}
	return out, nil
}

// launchers returns what the launchers are for (managed) and the binary they exec
// (agentboxPath).
func (f *wrapFlags) launchers() ([]wrap.Program, string, error) {
	progs, err := f.managed()
	if err != nil {
		return nil, "", err
	}
	ab, err := f.agentboxPath()
	return progs, ab, err
}

// agentboxPath is the binary the launchers exec: --agentbox, else the agentbox CLI installed
// with this binary (wrap runs in the daemon binary: the CLI runs it in its own place).
func (f *wrapFlags) agentboxPath() (string, error) {
	p := f.agentbox
	if p == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		if p, err = boxhelper.FindCLI(exe); err != nil {
			return "", fmt.Errorf("%w\n  hint: name the agentbox binary the launchers run with --agentbox", err)
		}
		if p, err = filepath.EvalSymlinks(p); err != nil {
			return "", err
		}
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("--agentbox %q is not absolute", p)
	}
	// Every user who runs a launcher runs this binary: as root, only a root-owned one.
	if err := boxhelper.CheckTrustedBinary(p); err != nil {
		return "", fmt.Errorf("--agentbox %s: %w\n  hint: install agentbox where only root (or you) can write, e.g. sudo install -o root -m 0755 agentbox /usr/local/lib/agentbox/", p, err)
	}
	return p, nil
}

func newWrapCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wrap",
		Short: cli.HeavyShort("wrap"),
		Long: `Wrap mode makes the plain name of a managed program (claude, codex, …) run it boxed. For each
program of the system policy's containment.programs, ` + "`agentbox wrap install`" + ` writes a launcher into
--prefix (/usr/local/bin, ahead of the vendors' installs on PATH) that runs
` + "`agentbox run --wait PROGRAM -- ARGS`" + `: same terminal, same input, the program's own exit code,
Ctrl+C reaching the program. A launcher never runs the program unboxed: when the box cannot
start it prints the reason and exits 125.

A run by the vendor's full path bypasses the launcher; the daemon's violation scanner reports it
(or kills it under containment.violations: terminate). See docs/deploy.md.`,
	}
	cmd.AddCommand(newWrapInstallCmd(), newWrapUninstallCmd(), newWrapStatusCmd(), newWrapScanCmd())
	return cmd
}

func newWrapInstallCmd() *cobra.Command {
	var f wrapFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Write the launchers of the policy's managed programs (and remove stale ones)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			progs, ab, err := f.launchers()
			if err != nil {
				return err
			}
			changes, err := wrap.Install(f.prefix, ab, progs)
			printChanges(cmd.OutOrStdout(), changes)
			if err != nil {
				return err
			}
			if len(progs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no managed programs (containment.programs is empty); no launcher installed")
			}
			return nil
		},
	}
	f.add(cmd, true)
	return cmd
}

func newWrapUninstallCmd() *cobra.Command {
	var f wrapFlags
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove every agentbox launcher from the prefix (nothing else)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := wrap.Uninstall(f.prefix)
			printChanges(cmd.OutOrStdout(), changes)
			return err
		},
	}
	f.add(cmd, false)
	return cmd
}

func printChanges(w io.Writer, changes []wrap.Change) {
	for _, c := range changes {
		fmt.Fprintf(w, "%-9s %s\n", c.Action, c.Path)
	}
}

// wrapStatus is `agentbox wrap status --json`.
type wrapStatus struct {
	Prefix     string          `json:"prefix"`
	Launchers  []wrap.Status   `json:"launchers"`
	Violations *api.Violations `json:"violations,omitempty"`
	// DaemonError says why the violations are missing ("" when the daemon answered).
	DaemonError string `json:"daemonError,omitempty"`
}

func newWrapStatusCmd() *cobra.Command {
	var f wrapFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the launchers, what each name runs, and the violation scanner",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			progs, ab, err := f.launchers()
			if err != nil {
				return err
			}
			st := wrapStatus{Prefix: f.prefix, Launchers: wrap.Check(f.prefix, ab, progs, os.Getenv("PATH"))}
			if c, err := client.New(); err != nil {
				st.DaemonError = err.Error()
			} else {
				ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
				defer cancel()
				if st.Violations, err = c.Violations(ctx); err != nil {
					st.DaemonError = err.Error()
				}
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), st)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PROGRAM\tLAUNCHER\tSTATE\tFIRST ON PATH\tVENDOR")
			for _, l := range st.Launchers {
				first := "yes"
				if !l.FirstOnPath {
					first = "no"
					if l.Found != "" {
						first = "no: " + l.Found
					}
				}
				vendor := l.Vendor
				if vendor == "" {
					vendor = "(not found)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", l.Name, l.Launcher, l.State, first, vendor)
			}
			if len(st.Launchers) == 0 {
				fmt.Fprintln(w, "(no managed programs)")
			}
			if err := w.Flush(); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if st.Violations == nil {
				fmt.Fprintf(out, "\nviolations: daemon not reachable (%s)\n", st.DaemonError)
				return nil
			}
			printViolations(out, st.Violations, nil)
			return nil
		},
	}
	f.add(cmd, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newWrapScanCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Ask the daemon to look for managed programs running outside every box now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			v, err := c.ScanViolations(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), v)
			}
			printViolations(cmd.OutOrStdout(), v, v.Found)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printViolations prints the scanner's state; found, when not nil, are this scan's findings.
func printViolations(w io.Writer, v *api.Violations, found []api.Violation) {
	if v.Posture == "" {
		fmt.Fprintln(w, "\nviolation scanner: idle (no managed programs in the policy)")
	} else {
		fmt.Fprintf(w, "\nviolation posture: %s; %d recorded, %d terminated\n", v.Posture, v.Total, v.Terminated)
	}
	for _, p := range v.Programs {
		if p.Error != "" {
			fmt.Fprintf(w, "  %s: not scanned: %s\n", p.Name, p.Error)
		} else {
			fmt.Fprintf(w, "  %s: %s\n", p.Name, p.Executable)
		}
	}
	if v.ScanError != "" {
		fmt.Fprintf(w, "  last scan failed: %s\n", v.ScanError)
	}
	list, title := v.Recent, "recent violations"
	if found != nil {
		list, title = found, "found now"
	}
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, x := range list {
		fmt.Fprintf(w, "  %s  %s pid %d (%s), parent %d (%s): %s%s\n", x.Time.Local().Format(time.DateTime), x.Program, x.Pid, x.Exe,
			x.PPid, x.ParentExe, x.Action, errSuffix(x.Error))
	}
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
