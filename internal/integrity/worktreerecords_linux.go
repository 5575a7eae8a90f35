package integrity

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// verifyWorktreeRecords reports, at exit, each linked worktree of the snapshot (Worktrees:
// beneath the workspace) whose work tree the launch removed while git's record of it
// (COMMON/worktrees/<id>) stays: the record's commondir and gitdir are pinned while a box
// runs (docs/integrity.md, "Git's execution surface"), so the box's `git worktree remove`
// deleted the work tree and then failed with "Device or resource busy", and its `git worktree
// prune` fails the same way; the host's git lists the worktree as prunable. The alert says
// what happened and the command that finishes it on the host. A worktree whose work tree
// (or the folder that held it) did not change during the launch was removed before it, and is
// not the launch's to report; a locked one is git's to keep. tops are the repositories the
// check at exit's scan found.
func (s *State) verifyWorktreeRecords(tops []string) []Transition {
	if len(s.Worktrees) == 0 {
		return nil
	}
	// (From ctimeLag before the snapshot, as the files left in ignored places: a removal in
	// the second before a launch is no more the launch's than one an hour before it.)
	since := s.Started.Add(-ctimeLag).UnixNano()
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
			if wt == "" || err != nil || !slices.Contains(s.Worktrees, rel) || !removedDuring(wt, since) {
				continue
			}
			if _, err := os.Lstat(filepath.Join(admin, "locked")); err == nil {
				continue
			}
			out = append(out, Transition{Kind: Modified, Path: admin, Alert: true, Detail: fmt.Sprintf(
				"the linked worktree %s was removed while the box ran, but not git's record of it here, which is protected while a box runs "+
					"(in a box, git worktree remove and git worktree prune of a worktree that existed at the launch fail with 'Device or resource busy'); "+
					"git worktree list shows it as prunable: git worktree prune, on the host, removes the record (git worktree prune -n lists what it would remove)", rel)})
		}
	}
	return out
}

// removedDuring reports whether the work tree wt has no .git any more and lost it at or after
// since: wt's own ctime, or, wt gone, its parent's (the removal of an entry changes its
// folder's), is that recent.
func removedDuring(wt string, since int64) bool {
	if _, err := os.Lstat(filepath.Join(wt, ".git")); err == nil {
		return false
	}
	var st unix.Stat_t
	if unix.Lstat(wt, &st) != nil && unix.Lstat(filepath.Dir(wt), &st) != nil {
		return false
	}
	return st.Ctim.Nano() >= since
}
