package cli

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/console"
)

func newAttachCmd() *cobra.Command {
	var detachKeys string
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Attach this terminal to a running box's console (takes over from an earlier client)",
		Long: `Attach this terminal to the console of a running launch: one started attached, or with
--detach from a terminal. A client already attached is detached (the program is not disturbed).
The detach keys (Ctrl-P Ctrl-Q unless --detach-keys or console.detachKeys say otherwise) leave
the program running and end this command with 0. agentbox exits with the program's exit code
when it ends while attached.`,
		Args: launchArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDetachKeys(cmd, detachKeys); err != nil {
				return err
			}
			c, err := client.New()
			if err != nil {
				return err
			}
			l, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			resp, err := c.Console(cmd.Context(), l.ID)
			if err != nil {
				return err
			}
			return attachConsole(cmd, resp, detachKeys)
		},
	}
	addDetachKeysFlag(cmd, &detachKeys)
	return cmd
}

// addDetachKeysFlag adds --detach-keys, shared by run and attach, to cmd.
func addDetachKeysFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "detach-keys", "", `keys that detach this terminal and leave the program running: comma-separated, each one character or ctrl-<a-z, @, [, \, ], ^, _>; "none" turns them off (default: console.detachKeys, else ctrl-p,ctrl-q)`)
	cmd.RegisterFlagCompletionFunc("detach-keys", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{console.DefaultDetachKeys, "ctrl-]", console.DetachKeysNone}, cobra.ShellCompDirectiveNoFileComp
	})
}

// checkDetachKeys refuses a --detach-keys value that is not a key sequence, before anything
// is started.
func checkDetachKeys(cmd *cobra.Command, keys string) error {
	if !cmd.Flags().Changed("detach-keys") {
		return nil
	}
	if keys == "" {
		return fmt.Errorf("--detach-keys is empty: give keys such as %s, or %q to turn them off", console.DefaultDetachKeys, console.DetachKeysNone)
	}
	if _, err := console.ParseDetachKeys(keys); err != nil {
		return fmt.Errorf("--detach-keys: %w", err)
	}
	return nil
}

// attachConsole attaches this process's terminal to the launch's console until the program
// ends (its exit code becomes agentbox's) or the detach keys are typed (exit 0). flagKeys is
// --detach-keys ("" for the daemon's console.detachKeys).
func attachConsole(cmd *cobra.Command, resp *api.LaunchResponse, flagKeys string) error {
	spec := flagKeys
	if spec == "" {
		spec = resp.DetachKeys
	}
	keys, err := console.ParseDetachKeys(spec)
	if err != nil {
		// The daemon validated its configuration: a value it sends is readable.
		return fmt.Errorf("console.detachKeys from the daemon: %w", err)
	}
	code, err := console.Attach(resp.ShimSocket, os.Stdin, os.Stdout, os.Stderr, console.AttachOptions{DetachKeys: keys})
	// Leaving a full-screen program: a new line at its cursor, and on a terminal what it drew
	// below the cursor erased, so the message and the shell's prompt do not land on top of its
	// status lines.
	leave := "\n"
	if term.IsTerminal(int(os.Stderr.Fd())) {
		leave = "\r\n\x1b[J"
	}
	switch {
	case errors.Is(err, console.ErrDetached):
		fmt.Fprintf(cmd.ErrOrStderr(), "%sagentbox: detached from launch %s; it keeps running (agentbox attach %s to return)\n", leave, resp.ID, shortID(resp.ID))
		return nil
	case errors.Is(err, console.ErrTakenOver):
		fmt.Fprintf(cmd.ErrOrStderr(), "%sagentbox: another terminal attached to launch %s; it keeps running there\n", leave, resp.ID)
		return nil
	case err != nil:
		return err
	}
	return ExitError{Code: code}
}

// shortID is the 12-character prefix of a launch id that `agentbox launches` shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
