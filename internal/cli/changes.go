package cli

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
)

func newChangesCmd() *cobra.Command {
	var asJSON bool
	var whole string
	cmd := &cobra.Command{
		Use:   "changes ID",
		Short: "Show what a launch's box proposed at protected paths, as diffs against the host",
		Long: `Show the proposed changes of launch ID: what its box wrote at protected paths of the
workspace (an MCP server file, a VS Code setting, a git hook): paths that were absent, which it
created, and protected files that existed, which it changed in its own copy. They never reached
the workspace. Also listed: the files the launch left in git-ignored places (build output, a
test file in bin/), moved out of the workspace at its exit. Each is shown as a diff against
what the host has at the path now. Apply them with agentbox apply ID [PATH...].`,
		Args: launchArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			cs, err := c.Changes(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if whole != "" {
				return printWhole(cmd.OutOrStdout(), cs, whole)
			}
			if asJSON {
				return PrintJSON(cmd.OutOrStdout(), cs)
			}
			printChanges(cmd.OutOrStdout(), cs)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the changes as JSON")
	cmd.Flags().StringVar(&whole, "whole", "", "print the box's whole file of the change at `PATH` (workspace-relative), its control characters written out, for a change the diff does not show whole")
	return cmd
}

func printChanges(w io.Writer, cs *api.Changes) {
	running := ""
	if cs.Running {
		// Review 32 (B, F4): what was shown while the box ran was not what apply took after
		// it ended (the box wrote the path again).
		running = "\nthe launch is still running: what it proposes can change until it ends, and apply refuses until then; review it again once it has ended\n"
	}
	if len(cs.Changes) == 0 && cs.Dropped == 0 && cs.IgnoredDropped == 0 {
		fmt.Fprintf(w, "launch %s proposed no changes%s\n", cs.LaunchID[:12], strings.TrimSuffix(running, "\n"))
		return
	}
	ignored := 0
	for _, c := range cs.Changes {
		if c.Ignored {
			ignored++
		}
	}
	fmt.Fprintf(w, "launch %s proposed %s to protected configuration in %s", cs.LaunchID[:12], plural(len(cs.Changes)-ignored, "change"), cs.Workspace)
	if ignored > 0 {
		fmt.Fprintf(w, ", and left %d files in git-ignored places, moved out of the workspace", ignored)
	}
	fmt.Fprintln(w, ":")
	for _, c := range cs.Changes {
		note := ""
		switch {
		case c.Hidden && c.Conflict:
			note = " (a tracked file whose change git did not show, put back on the host; the host changed it since: apply refuses it)"
		case c.Hidden:
			note = " (a tracked file whose change git did not show: put back on the host; apply makes it the box's again)"
		case c.Modifies && c.Conflict:
			note = " (changes a protected file, which the host changed since the box started: apply refuses it)"
		case c.Modifies:
			note = " (changes a protected file)"
		case c.Conflict && !c.HostExists && !c.Modifies:
			note = " (a folder on the way is a symlink or a file on the host now: apply refuses it)"
		case c.Conflict || c.HostExists:
			note = " (the host has this path now: apply refuses it)"
		}
		if c.Ignored {
			kept := ""
			if c.SHA256 != "" {
				kept = fmt.Sprintf(": exactly the bytes of sha256 %.64s", visibleLine(c.SHA256))
			}
			note = " (left in a git-ignored place: moved out of the workspace; apply puts it back" + kept + ")" + note
		}
		if c.NotShown {
			note += " (diff not shown: the answer reached its bound)"
		}
		if c.Partial && !c.Ignored {
			note += " (not shown whole: read it with agentbox changes " + cs.LaunchID[:12] + " --whole " + visibleLine(c.Path) + "; apply takes it only by its path)"
		}
		if dir, there := submoduleGitFile(cs.Workspace, c); dir != "" {
			uses := ""
			if there {
				uses = "; it uses the git directory " + visibleLine(dir) + " that is there now, which the box may have made: review it, or remove it first to clone afresh"
			}
			note += " (a submodule's git file, as git submodule update --init makes it: a box cannot make one, so the submodule stayed empty in the box; " +
				"run git submodule update --init on the host instead of applying this and the box's submodule lines of .git/config" + uses + ")"
		}
		path, pesc := visiblePath(c.Path)
		diff, desc := visible(c.Diff)
		if pesc || desc {
			note += " (holds control characters, shown escaped as \\xNN)"
		}
		fmt.Fprintf(w, "\n%s%s\n%s", path, note, diff)
	}
	if cs.Dropped > 0 {
		fmt.Fprintf(w, "\n%d more files the box created at protected paths were moved out of the workspace and not kept: the launch's proposed changes were full (%s)\n",
			cs.Dropped, visibleList(cs.DroppedPaths))
	}
	if cs.IgnoredDropped > 0 {
		fmt.Fprintf(w, "\n%d more files the launch left in git-ignored places were removed from the workspace and not kept: past the bound of what is kept (%s)\n",
			cs.IgnoredDropped, visibleList(cs.IgnoredDroppedPaths))
	}
	if running != "" {
		fmt.Fprint(w, running)
		return
	}
	fmt.Fprintf(w, "\napply with: agentbox apply %s [PATH...]\n", cs.LaunchID[:12])
}

// submoduleGitFile returns the workspace-relative git directory the proposed change c names
// when c is a new git file (DIR/.git reading "gitdir: …") of the submodule the workspace's
// .gitmodules puts at DIR, naming its git directory .git/modules/NAME ("" otherwise), and
// whether that directory is there. That is what git submodule update --init leaves in a box:
// its clone into .git/modules stays, but box-init's guard takes the new git file at once (a git
// file makes a folder a repository whose configuration the host's git reads), so git fails
// ("could not get submodule directory") and the git file and the .git/config lines are
// proposed.
func submoduleGitFile(ws string, c api.ProposedChange) (dir string, exists bool) {
	if c.Modifies || c.Ignored || path.Base(c.Path) != ".git" || ws == "" {
		return "", false
	}
	var target string
	for _, l := range strings.Split(c.Diff, "\n") {
		if t, ok := strings.CutPrefix(l, "+gitdir: "); ok {
			target = strings.TrimSpace(t)
			break
		}
	}
	if target == "" {
		return "", false
	}
	if !path.IsAbs(target) {
		target = path.Join(ws, path.Dir(c.Path), target)
	}
	rel, err := filepath.Rel(ws, path.Clean(target))
	if name := submoduleName(ws, path.Dir(c.Path)); err != nil || name == "" || rel != ".git/modules/"+name {
		return "", false
	}
	st, err := os.Lstat(filepath.Join(ws, rel))
	return rel, err == nil && st.IsDir()
}

// submoduleName returns the name the workspace's .gitmodules gives the submodule at the
// workspace-relative path p ("" for none): a git file a box wrote is taken for a submodule's
// only where the host's .gitmodules (pinned while a box runs) says one lies, and only when it
// names that submodule's git directory (git's own: .git/modules/NAME).
func submoduleName(ws, p string) string {
	b, err := os.ReadFile(filepath.Join(ws, ".gitmodules"))
	if err != nil || len(b) > 1<<20 {
		return ""
	}
	name := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if n, ok := strings.CutPrefix(l, "[submodule \""); ok {
			name, _, _ = strings.Cut(n, "\"]")
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "path" && name != "" && path.Clean(strings.TrimSpace(v)) == p {
			return name
		}
	}
	return ""
}

// maxWhole bounds what printWhole reads of a kept file: a store keeps none larger than 4 MiB
// (changes.MaxFile), so one past it is not the store's.
const maxWhole = 4 << 20

// printWhole prints the box's whole file of the change at rel (where the daemon says it is
// kept, opened without following a symlink), each control character and byte that is not
// UTF-8 written out as \xNN, as the diffs are: the way to read a change that agentbox changes
// shows in part (binary, long) before applying it by name, which cat or less would show with
// its escape sequences acting on the terminal (review 32, D).
func printWhole(w io.Writer, cs *api.Changes, rel string) error {
	rel = filepath.Clean(rel)
	for _, c := range cs.Changes {
		if c.Path != rel {
			continue
		}
		if c.Kind == "symlink" || c.Stored == "" {
			d, _ := visible(c.Diff)
			fmt.Fprint(w, d)
			return nil
		}
		f, err := os.OpenFile(c.Stored, os.O_RDONLY|syscallNoFollow, 0)
		if err != nil {
			return fmt.Errorf("read the box's file of %s at %s: %w", visibleLine(rel), visibleLine(c.Stored), err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxWhole+1))
		if err != nil {
			return fmt.Errorf("read the box's file of %s at %s: %w", visibleLine(rel), visibleLine(c.Stored), err)
		}
		if len(b) > maxWhole {
			return fmt.Errorf("the file at %s is larger than any change the store keeps (%d bytes): not a change's", visibleLine(c.Stored), maxWhole)
		}
		v, _ := visible(string(b))
		fmt.Fprintf(w, "%s: the box's whole file, %d bytes, control characters and bytes that are not UTF-8 written out as \\xNN:\n%s", visibleLine(rel), len(b), v)
		if len(b) > 0 && !strings.HasSuffix(v, "\n") {
			fmt.Fprintln(w)
		}
		return nil
	}
	return fmt.Errorf("launch %s proposes no change at %s: agentbox changes %s lists the paths", cs.LaunchID[:12], visibleLine(rel), cs.LaunchID[:12])
}

// plural writes n with the noun, in the plural unless n is 1 ("1 change", "2 changes").
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// visibleList joins paths a box chose, each on one line with its control characters written
// out (visibleLine).
func visibleList(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = visibleLine(p)
	}
	return strings.Join(names, ", ")
}

func newApplyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "apply ID [PATH...]",
		Short: "Apply a launch's proposed changes on the host, after reviewing them (agentbox changes)",
		Long: `Apply the proposed changes of launch ID (all, or the workspace-relative PATHs) in its
workspace. A path the box created is applied only where the host has nothing at it; a protected
file the box changed is replaced only while the host's file still holds what the box started
from. What the host made or changed meanwhile is never overwritten: apply stops there, showing
both.`,
		Args: launchArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New()
			if err != nil {
				return err
			}
			res, err := c.Apply(cmd.Context(), args[0], args[1:])
			if err != nil {
				if cs, lerr := c.Changes(cmd.Context(), args[0]); lerr == nil {
					for _, ch := range cs.Changes {
						if ch.Conflict || ch.HostExists && !ch.Modifies {
							fmt.Fprintf(cmd.ErrOrStderr(), "%s: the host's file and the box's:\n%s\n", visibleLine(ch.Path), visibleText(ch.Diff))
						}
					}
				}
				return err
			}
			for _, p := range res.Applied {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s\n", visibleLine(p))
			}
			return nil
		},
	}
}
