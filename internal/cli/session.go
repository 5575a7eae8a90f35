package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

func newSessionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, list and revoke relay pairing sessions",
		Long: `A pairing session lets a client reach the daemon's relay (LLM and git) without any
credential: the daemon attaches the real credential host-side. Every launch gets its own
session automatically; ` + "`session create`" + ` makes one by hand for a tool outside a box, used on the
relay's host loopback listener. Its pairing is printed once and never again.`,
	}
	var asJSON bool
	var clientID string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a session and print its pairing (shown only this once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := EnsureDaemon(cmd.Context())
			if err != nil {
				return err
			}
			s, err := c.CreateSession(cmd.Context(), clientID)
			if err != nil {
				return err
			}
			if asJSON {
				return PrintJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "session  %s\nrelay    %s\npairing  %s\n", s.ID, s.RelayURL, s.Pairing)
			fmt.Fprintln(cmd.ErrOrStderr(), "The pairing is shown only now: send it as X-Agentbox-Pairing (or as the API key) to the relay URL.")
			return nil
		},
	}
	create.Flags().StringVar(&clientID, "client", "", "name of the tool that will use the session (checked against sessions.allowedClients)")
	create.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List live sessions (never their pairings)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			ss, err := c.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return PrintJSON(cmd.OutOrStdout(), ss)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tCLIENT\tLAUNCH\tSTATE\tLAST USED")
			for _, s := range ss {
				launch := s.LaunchID
				if len(launch) > 12 {
					launch = launch[:12]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Kind, s.ClientID, launch, s.State, s.LastUsed.Local().Format(time.DateTime))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	revoke := &cobra.Command{
		Use:   "revoke SESSION",
		Short: "Revoke a session: its next request is refused, requests in flight are cut",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return err
			}
			return api.CheckSessionID(args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			if err := c.RevokeSession(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke LAUNCH",
		Short: "Revoke a launch's relay session; the box keeps running without LLM, git or ssh access",
		Args:  launchArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			s, err := c.RevokeLaunch(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked session %s of launch %s\n", s.ID, s.LaunchID)
			return nil
		},
	}
}
