// Package cli implements the agentbox command line; it reaches the daemon only through
// internal/client.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

// Version is the agentbox version, set at build time with -ldflags "-X …/cli.Version=…".
var Version = "0.1.0-dev"

// ExitError carries an exit code through cobra without printing anything more.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Execute runs the command line and returns the process exit code.
func Execute() int {
	if Heavy.Commands == nil && runsHeavy(os.Args[1:]) {
		printError(os.Stderr, execDaemon())
		return 125
	}
	root := newRoot()
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	printError(os.Stderr, err)
	return 125
}

// launchArgs checks a command's arguments with n, then that the first is a launch id
// (api.CheckLaunchID): the Args of every command that takes one, so that a bad id is refused
// by name before it goes into a path of the local API.
func launchArgs(n cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := n(cmd, args); err != nil {
			return err
		}
		return api.CheckLaunchID(args[0])
	}
}

// printError prints err for a person: the message, then the hint when the daemon gave one.
func printError(w io.Writer, err error) {
	var ae *api.Error
	if errors.As(err, &ae) {
		fmt.Fprintf(w, "agentbox: %s [%s]\n", ae.Message, ae.Code)
		if ae.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", ae.Hint)
		}
		return
	}
	if errors.Is(err, client.ErrDaemonUnreachable) {
		fmt.Fprintf(w, "agentbox: %v\n  hint: start it with `agentbox daemon --detach` (agentbox run starts it by itself)\n", err)
		return
	}
	fmt.Fprintf(w, "agentbox: %v\n", err)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run AI coding agents in a box on your own machine",
		Long: `agentbox runs a program (an AI coding agent, or any command) in a box: its own namespaces,
Landlock and seccomp, the current directory as its workspace, no credential and no network.
A per-user daemon builds the boxes; ` + "`agentbox run`" + ` starts it when it is not running.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.AddCommand(newRunCmd(), newDaemonCmd(), newLaunchesCmd(), newStopCmd(), newInfoCmd(), newDoctorCmd(),
		newAttachCmd(), newSessionCmd(), newRevokeCmd(), newVersionCmd(), newChangesCmd(), newApplyCmd())
	if Heavy.Commands != nil {
		root.AddCommand(Heavy.Commands()...)
	} else {
		root.AddCommand(heavyStubs()...)
	}
	return root
}

// Command returns agentbox's command tree, for generating man pages and shell completions.
func Command() *cobra.Command { return newRoot() }

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
