package heavy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/profile"
)

func newProfilesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "profiles",
		Short: cli.HeavyShort("profiles"),
		Long: `List the program profiles in force: the built-in ones (Claude Code, OpenCode, Copilot CLI,
Codex CLI, Gemini CLI, generic) and those of your configuration's programs: key, with where
each program was found on your PATH, its real path, and the install tree its boxes bind
read-only. It reads your configuration and PATH; the daemon is not needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			eff, err := config.Load(config.LoadOptions{})
			if err != nil {
				return err
			}
			list, err := listProfiles(eff.Config, os.Getenv("PATH"))
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PROFILE\tNAME\tORIGIN\tRELAY\tFOUND\tINSTALL TREE")
			for _, p := range list {
				found, tree, relay := p.Found, p.Tree, p.Provider
				if found == "" {
					found = "-"
					if len(p.Executables) > 0 {
						found = "not on PATH"
					}
				} else if p.Resolved != "" && p.Resolved != p.Found {
					found += " -> " + p.Resolved
				}
				if tree == "" {
					tree = "-"
				}
				if relay == "" {
					relay = "-"
				}
				if p.Model != "" {
					relay += " (" + p.Model + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Name, p.Origin, relay, found, tree)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// listProfiles describes every profile in force, resolving its executables on path.
func listProfiles(cfg config.Config, path string) ([]api.Profile, error) {
	set, err := profile.NewSet(cfg.Programs)
	if err != nil {
		return nil, err
	}
	out := []api.Profile{}
	for _, id := range set.IDs() {
		p := set.Get(id)
		ap := api.Profile{ID: id, Name: p.DisplayName(), Origin: set.Origin(id), Executables: p.Executables, Provider: p.Relay.Provider, Model: cfg.Models[id]}
		if p.Relay.ProviderFromModel {
			ap.Provider = p.Provider(profile.Facts{Models: cfg.Models})
		}
		for _, e := range p.Executables {
			found, err := lookPathIn(e, path)
			if err != nil {
				continue
			}
			ap.Found = found
			if r, err := filepath.EvalSymlinks(found); err == nil {
				ap.Resolved = r
			}
			if t, err := p.FindInstall(found, path); err == nil && t != nil {
				ap.Tree = t.Tree
			}
			break
		}
		out = append(out, ap)
	}
	return out, nil
}

func lookPathIn(name, path string) (string, error) {
	old := os.Getenv("PATH")
	if old == path {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", err
		}
		return filepath.Abs(p)
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		c := filepath.Join(dir, name)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return c, nil
		}
	}
	return "", exec.ErrNotFound
}
