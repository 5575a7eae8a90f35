package integrity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Branch tips: a box may rewrite the user's commits (an amend or a rebase that folds its edit
// into one of them, with the same message, author and date, and its reflog expired): git
// status, git diff and git log then show nothing new, and the user's next push publishes the
// box's edit under their name (review 15, F9). The snapshot records the tips of the branches
// (refs/heads/*) of the workspace's repositories; the check at exit reports each one that
// moved to a commit its old tip is not an ancestor of, or went, naming both ids.

// maxBranches bounds the branches recorded per repository, and maxBranchRepos the repositories.
const (
	maxBranches    = 10000
	maxBranchRepos = 64
)

// branchTips returns the tips of the branches of the repository whose common git directory is
// gd, as git reads them: the loose refs under refs/heads over the records of packed-refs. A
// symbolic ref, a name git refuses (a component beginning with a dot, ending in .lock) and a
// file that holds no object id are left out; nil when gd holds no refs folder.
func branchTips(gd string) map[string]string {
	if fi, err := os.Lstat(filepath.Join(gd, "refs")); err != nil || !fi.IsDir() {
		return nil
	}
	tips := map[string]string{}
	if b, err := readBeneath(gd, filepath.Join(gd, "packed-refs"), maxCheckedFile); err == nil {
		eachPackedRecord(bytes.NewReader(b), func(rec []byte, header bool) error {
			id, name, ok := strings.Cut(strings.SplitN(string(rec), "\n^", 2)[0], " ")
			name = strings.TrimRight(name, "\r\n")
			if !header && ok && strings.HasPrefix(name, "refs/heads/") && isObjectID(id) && len(tips) < maxBranches {
				tips[name] = id
			}
			return nil
		})
	}
	heads := filepath.Join(gd, "refs", "heads")
	filepath.WalkDir(heads, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(tips) >= maxBranches {
			return filepath.SkipDir
		}
		if p != heads && (strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), ".lock")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := readBeneath(gd, p, 256)
		if err != nil {
			return nil
		}
		if id := strings.TrimSpace(string(b)); isObjectID(id) {
			rel, _ := filepath.Rel(gd, p)
			tips[filepath.ToSlash(rel)] = id
		}
		return nil
	})
	return tips
}

func isObjectID(s string) bool {
	return (len(s) == 40 || len(s) == 64) && !strings.ContainsFunc(s, func(r rune) bool { return r > 0x7f || !hexDigit(byte(r)) })
}

// worktreeGitDir returns the git directory of the work tree top (top/.git a folder, or the
// gitdir a .git file names), "" when there is none.
func worktreeGitDir(top string) string {
	gd := filepath.Join(top, ".git")
	fi, err := os.Stat(gd)
	if err != nil {
		return ""
	}
	if !fi.IsDir() {
		// A .git file, read without waiting on a FIFO (a box's), beneath top as git would.
		b, err := readBeneath(top, gd, 4096)
		rest, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if err != nil || !ok {
			return ""
		}
		gd = strings.TrimSpace(rest)
		if !filepath.IsAbs(gd) {
			gd = filepath.Join(top, gd)
		}
	}
	return filepath.Clean(gd)
}

// commonGitDir returns the common git directory of the work tree top (its worktreeGitDir, or
// the one whose commondir file names), "" when there is none.
func commonGitDir(top string) string {
	gd := worktreeGitDir(top)
	if gd == "" {
		return ""
	}
	if b, err := os.ReadFile(filepath.Join(gd, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gd, c)
		}
		gd = c
	}
	return filepath.Clean(gd)
}

// recordBranches records, by common git directory, the branch tips of the repositories whose
// work trees are tops (bounded).
func recordBranches(tops []string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, top := range tops {
		gd := commonGitDir(top)
		if gd == "" || out[gd] != nil || len(out) >= maxBranchRepos {
			continue
		}
		if tips := branchTips(gd); len(tips) > 0 {
			out[gd] = tips
		}
	}
	return out
}

// branchCheckTimeout bounds one git merge-base at the check at exit, and branchCheckBudget all
// of them together: a box that rewrote thousands of recorded branches onto long histories
// delays the end of its launch by at most that, and each branch left is an alert.
const (
	branchCheckTimeout = 10 * time.Second
	branchCheckBudget  = 2 * time.Minute
)

// verifyBranches reports each branch recorded at the snapshot that now points to a commit its
// old tip is not an ancestor of (history rewritten: amended, rebased, reset back) or is gone:
// an alert naming the branch and both ids, and how to see the difference or restore it. A
// branch that moved forward (a commit, a fast-forward merge) is the box's ordinary work.
func (s *State) verifyBranches() []Transition {
	var out []Transition
	ctx, cancel := context.WithTimeout(context.Background(), branchCheckBudget)
	defer cancel()
	for _, gd := range slices.Sorted(maps.Keys(s.Branches)) {
		now := branchTips(gd)
		old := s.Branches[gd]
		for _, ref := range slices.Sorted(maps.Keys(old)) {
			was, is := old[ref], now[ref]
			if was == is {
				continue
			}
			name := strings.TrimPrefix(ref, "refs/heads/")
			var d string
			switch {
			case is == "":
				d = fmt.Sprintf("the branch %s was deleted while the box ran (its tip was %s); to restore it: git branch %s %s", name, was, name, was)
			default:
				anc, err := isAncestor(ctx, gd, was, is)
				switch {
				case err != nil:
					d = fmt.Sprintf("the branch %s moved from %s to %s while the box ran, and whether its old commits are still in its history could not be told (%v): git log %s..%s shows what it lost", name, was, is, err, is, was)
				case anc:
					continue
				default:
					d = fmt.Sprintf("the history of the branch %s was rewritten while the box ran (%s is no longer in it; now %s): commits already made were changed, amended or dropped, which git status and git log do not show; review with git diff %s %s, restore with git branch -f %s %s", name, was, is, was, is, name, was)
				}
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, filepath.FromSlash(ref)), Alert: true, Detail: d})
		}
	}
	return out
}

// isAncestor asks git whether the commit anc is an ancestor of (or is) the commit of, in the
// repository whose common git directory is gd. git reads that repository's objects only,
// through a private git directory (privateGitDir): none of its configuration, which a box
// may have written (a nested repository's: a lazy fetch ran the box's command), and none of
// what would give another history than the objects' own (replace refs, grafts, a
// commit-graph); with no system or global configuration either.
func isAncestor(ctx context.Context, gd, anc, of string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, branchCheckTimeout)
	defer cancel()
	dir, err := privateGitDir(gd, len(anc) == 64)
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.CommandContext(ctx, "git", "merge-base", "--is-ancestor", anc, of)
	cmd.Dir = dir
	cmd.Env = privateGitEnv([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}, dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("git merge-base did not answer in time: %w", ctx.Err())
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, nil
	default:
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return false, errors.New(msg)
	}
}
