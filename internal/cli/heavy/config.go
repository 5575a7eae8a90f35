package heavy

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: cli.HeavyShort("config"),
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the effective configuration with each value's source (default, user file, policy)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			eff, err := config.Load(config.LoadOptions{})
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), eff.Entries())
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
			for _, e := range eff.Entries() {
				src := string(e.Source.Kind)
				if e.Source.File != "" {
					src += " " + e.Source.File
					if e.Source.Line > 0 {
						src += fmt.Sprintf(":%d", e.Source.Line)
					}
				}
				if e.Locked {
					src += " (locked)"
				}
				fmt.Fprintf(w, "%s\t%v\t%s\n", e.Key, e.Value, src)
			}
			return w.Flush()
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	validate := &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a config file (default: your user config and the system policy); nothing is applied",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				cfg, err := config.Validate(args[0])
				if err != nil {
					return err
				}
				if err := config.CheckCredentialFiles(cfg, os.Getuid()); err != nil {
					return fmt.Errorf("%s: credential files the relays would refuse:\n%w", args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", args[0])
				return nil
			}
			eff, err := config.Load(config.LoadOptions{})
			if err != nil {
				return err
			}
			if err := config.CheckCredentialFiles(eff.Config, os.Getuid()); err != nil {
				return fmt.Errorf("credential files the relays would refuse:\n%w", err)
			}
			files := eff.Files()
			if len(files) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no config files: defaults apply")
			}
			for _, f := range files {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", f)
			}
			return nil
		},
	}
	schema := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := cmd.OutOrStdout().Write(config.Schema())
			return err
		},
	}
	cmd.AddCommand(show, validate, schema)
	return cmd
}
