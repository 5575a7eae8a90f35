package cli

import (
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/console"
)

func newAttachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attach ID",
		Short: "Attach this terminal to a running box's console (takes over from an earlier client)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			l, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			sock, err := c.ShimSocket(cmd.Context(), l.ID)
			if err != nil {
				return err
			}
			code, err := console.Attach(sock, os.Stdin, os.Stdout, os.Stderr, console.AttachOptions{})
			if err != nil {
				return err
			}
			return ExitError{Code: code}
		},
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
