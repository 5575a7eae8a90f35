package integrity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// UntrackedResult is what UntrackedUnlisted found: the workspace-relative paths of the
// untracked, not ignored files the launch created or changed that the user's git status does
// not list by name (Files, sorted), and why it does not (Why: "status.showUntrackedFiles=no",
// or that they lie in untracked folders git status shows as one line each).
type UntrackedResult struct {
	Files []string
	Why   string
}

// maxUntrackedListed bounds the untracked files UntrackedUnlisted looks at.
const maxUntrackedListed = IgnoredWalkBound

// UntrackedUnlisted lists the untracked files (regular files and symlinks, not ignored) of the
// workspace's repository whose ctime is in the launch and that the user's git status does not
// name (review 16, F5): git status shows an untracked folder holding no tracked file as one
// line (`?? scratch/`), the same before and after a box adds a file in it, and shows no
// untracked file at all where the repository sets status.showUntrackedFiles=no. The files are
// git's own list, one by one (`git ls-files --others --exclude-standard`); which of them git
// status folds is git's list with --directory (what git status's default mode shows), and its
// mode is the repository's status.showUntrackedFiles (all: every file is named, none is
// returned). git runs as for IgnoredChanged (readGit), in the workspace's repository only (a
// submodule's untracked files are its own git status's; those the superproject's git status
// hides, ignore = untracked, are taken by IgnoredChanged). A workspace in no repository, or a
// host without git, has none; a failure of git is returned.
func (s *State) UntrackedUnlisted(ctx context.Context) (UntrackedResult, error) {
	var res UntrackedResult
	if s.Started.IsZero() {
		return res, nil
	}
	if _, err := hostprog.Find("git"); err != nil || surelyNoRepository(s.Workspace) {
		return res, nil
	}
	// Where git would wait on a file it reads, or failed in the check of the ignored places,
	// it is not run again: that check took every untracked file the launch left instead.
	if _, left, _ := s.unblockGit(true); len(left) > 0 {
		return res, fmt.Errorf("git was not run: %s (the check of the git-ignored places walked the untracked files instead)", strings.Join(left[:min(len(left), 3)], "; "))
	}
	ctx, cancel := context.WithTimeout(ctx, gitCheckTimeout)
	defer cancel()
	env, done, err := workTreeGitEnv(s.Workspace, s.Workspace, s.NoRepository)
	if errors.Is(err, errNoRepository) {
		return res, nil // a workspace in no repository at launch, and none made
	}
	if err != nil {
		return res, err
	}
	defer done()
	mode := "normal"
	setting := func(v string) {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "no", "false", "off", "0":
			mode = "no"
		case "all":
			mode = "all"
		}
	}
	if s.NoRepository {
		// A repository the box made: git runs without its configuration (workTreeGitEnv),
		// whose display setting the host's git status reads all the same. The user's own is
		// read by git below when the repository sets none.
		gd := worktreeGitDir(s.Workspace)
		setting(boxConfigValue(s.Workspace, gd, commonGitDir(s.Workspace), "status", "showuntrackedfiles"))
	}
	// git config exits 1 where the key is not set.
	if mode == "normal" {
		if out, err := readGit(ctx, s.Workspace, env, "config", "--get", "status.showUntrackedFiles"); err == nil {
			setting(string(out))
		} else if errors.Is(err, errNoRepository) {
			return res, nil
		}
	}
	if mode == "all" {
		return res, nil
	}
	var folded []string // folders git status shows as one line, each ending in "/"
	if mode == "normal" {
		dirs, err := readGit(ctx, s.Workspace, env, "ls-files", "-z", "--others", "--exclude-standard", "--directory")
		if errors.Is(err, errNoRepository) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		for e := range bytes.SplitSeq(dirs, []byte{0}) {
			if bytes.HasSuffix(e, []byte("/")) {
				folded = append(folded, string(e))
			}
		}
		if len(folded) == 0 {
			return res, nil // git status names every untracked file: the listing below is not needed
		}
	} else {
		res.Why = "the repository sets status.showUntrackedFiles=no: git status shows no untracked file"
	}
	out, err := readGit(ctx, s.Workspace, env, "ls-files", "-z", "--others", "--exclude-standard")
	if errors.Is(err, errNoRepository) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	inDeps := func(p string) bool {
		for d := range s.Deps {
			if within(p, d) {
				return true
			}
		}
		return s.owns(p)
	}
	var holding []string // the folded folders holding a file found
	since, n := s.Started.Add(-ctimeLag).UnixNano(), 0
	for e := range bytes.SplitSeq(out, []byte{0}) {
		rel := string(e)
		if rel == "" || strings.HasSuffix(rel, "/") { // a nested repository: its own git status's
			continue
		}
		if n++; n > maxUntrackedListed {
			break
		}
		dir := ""
		if mode == "normal" {
			i := slices.IndexFunc(folded, func(d string) bool { return strings.HasPrefix(rel, d) })
			if i < 0 {
				continue // named by git status
			}
			dir = folded[i]
		}
		p := filepath.Join(s.Workspace, filepath.FromSlash(rel))
		if inDeps(p) {
			continue // the rule of the dependency folders covers them
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if _, _, ctime := identity(fi); ctime >= since {
			res.Files = append(res.Files, filepath.FromSlash(rel))
			if dir != "" && !slices.Contains(holding, dir) {
				holding = append(holding, dir)
			}
		}
	}
	slices.Sort(res.Files)
	if mode == "normal" && len(holding) > 0 {
		slices.Sort(holding)
		res.Why = "git status shows the untracked folder holding each as one line: " + strings.Join(holding[:min(len(holding), 5)], ", ")
		if len(holding) > 5 {
			res.Why += ", …"
		}
	}
	if len(res.Files) == 0 {
		res.Why = ""
	}
	return res, nil
}
