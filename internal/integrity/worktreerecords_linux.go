package integrity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// verifyWorktreeRecords reports, at exit, each linked worktree of the snapshot (Worktrees:
// beneath the workspace, its .git there then) whose folder is gone while git's record of it
// (COMMON/worktrees/<id>) stays: the record's commondir and gitdir are pinned while a box
// runs (docs/integrity.md, "Git's execution surface"), so the box's `git worktree remove`
// deleted the work tree and then failed with "Device or resource busy", and its `git worktree
// prune` fails the same way; the host's git lists the worktree as prunable. The alert says
// what happened and the command that finishes it on the host. A worktree whose folder is still
// there is not reported (its .git alone gone, `git worktree prune` would drop its index, HEAD
// and reflog with it: review 30), nor a locked one (git keeps its record). tops are the
// repositories the check at exit's scan found.
func (s *State) verifyWorktreeRecords(tops []string) []Transition {
	if len(s.Worktrees) == 0 {
		return nil
	}
	var out []Transition
	seen := map[string]bool{}
	for _, top := range tops {
		common := commonGitDir(top)
		if common == "" || seen[common] || !within(common, s.Workspace) {
			continue
		}
		seen[common] = true
		dir := filepath.Join(common, "worktrees")
		names, _ := readDirNames(dir)
		for _, n := range names {
			admin := filepath.Join(dir, n)
			b, err := readBeneath(s.Workspace, filepath.Join(admin, "gitdir"), maxGitFile)
			if err != nil {
				continue
			}
			wt := worktreeTop(admin, b)
			rel, err := filepath.Rel(s.Workspace, wt)
			if wt == "" || err != nil || !slices.Contains(s.Worktrees, rel) {
				continue
			}
			if _, err := os.Lstat(wt); !errors.Is(err, os.ErrNotExist) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(admin, "locked")); err == nil {
				continue
			}
			out = append(out, Transition{Kind: Modified, Path: admin, Alert: true, Detail: fmt.Sprintf(
				"the linked worktree %s was removed while the box ran, but not git's record of it here, which is protected while a box runs "+
					"(in a box, git worktree remove and git worktree prune of a worktree that existed at the launch fail with 'Device or resource busy'); "+
					"git worktree list shows it as prunable: git worktree prune, on the host, removes the record, and that of every other worktree whose folder is gone "+
					"(git worktree prune -n lists them first; a worktree moved elsewhere is reconnected with git worktree repair NEW-PATH instead)", rel)})
		}
	}
	return out
}
