package integrity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// Branch tips: a box may rewrite the user's commits (an amend or a rebase that folds its edit
// into one of them, with the same message, author and date, and its reflog expired): git
// status, git diff and git log then show nothing new, and the user's next push publishes the
// box's edit under their name (review 15, F9). The snapshot records the tips of the branches
// (refs/heads/*) of the workspace's repositories; the check at exit reports each one that
// moved to a commit its old tip is not an ancestor of, or went, naming both ids. The same
// holds for tags (refs/tags/*), which never move in ordinary work: one that moved or went is
// reported; and for the stash, whose entries (the reflog of refs/stash) a box may drop or
// rewrite before the user pops them: each entry of the snapshot that is no longer there is
// reported, with the command that stores it again.

// maxBranches bounds the refs recorded per repository and kind (branches, tags, stash
// entries), and maxBranchRepos the repositories.
const (
	maxBranches    = 10000
	maxBranchRepos = 64
)

// recordedRefs are the kinds of refs the snapshot records, by prefix.
var recordedRefs = []string{"refs/heads/", "refs/tags/"}

// branchTips returns the tips of the branches and tags of the repository whose common git
// directory is gd (by full ref name), as git reads them (refReader): the loose refs under
// refs/heads and refs/tags and the records of packed-refs (at most maxBranches of each kind),
// each resolved as git resolves it; and, of those that are symbolic refs, the ref each names.
// A name git refuses and a ref git would not resolve are left out; nil when gd holds no refs
// folder.
//
// unread, when not "", says why some of them may be missing (packed-refs not read whole, more
// than maxBranches of a kind): the check at exit says so, since a rewrite of a ref not recorded
// goes unseen.
func branchTips(gd string) (tips, symrefs map[string]string, unread string) {
	if fi, err := os.Lstat(filepath.Join(gd, "refs")); err != nil || !fi.IsDir() {
		return nil, nil, ""
	}
	r := newRefReader(gd)
	unread = r.unread
	tips, symrefs = map[string]string{}, map[string]string{}
	for _, k := range recordedRefs {
		names := r.looseNames(k, maxBranches)
		for n := range r.packed {
			if strings.HasPrefix(n, k) && checkRefname(n, true) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if len(names) > maxBranches {
			unread = strings.TrimPrefix(unread+"; ", "; ") + fmt.Sprintf("it has more than %d refs under %s, of which only the first %d (by name) were recorded", maxBranches, k, maxBranches)
		}
		for _, n := range names[:min(len(names), maxBranches)] {
			id, sym, err := r.resolve(n)
			if err != nil {
				continue
			}
			tips[n] = id
			if sym != "" {
				symrefs[n] = sym
			}
		}
	}
	return tips, symrefs, unread
}

// stashEntries returns the entries of the stash of the repository whose common git directory
// is gd (object id → the entry's message), as git stash list reads them: the reflog of
// refs/stash (at most maxBranches, the newest first; of a log past maxCheckedFile, those in its
// last maxCheckedFile bytes); nil when there is none.
func stashEntries(gd string) map[string]string {
	// The newest entries are the log's last lines: of one past the bound, its end is read (a
	// box padded it past 1 MiB, and its entry on top went unseen: review 32 F, F3).
	b, err := readTailBeneath(gd, filepath.Join(gd, "logs", "refs", "stash"), maxCheckedFile)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	out := map[string]string{}
	for i := len(lines) - 1; i >= 0 && len(out) < maxBranches; i-- {
		// "OLD NEW NAME <EMAIL> TIME TZ<TAB>MESSAGE"
		head, msg, _ := strings.Cut(lines[i], "\t")
		f := strings.Fields(head)
		if len(f) >= 2 && isObjectID(f[1]) && strings.Trim(f[1], "0") != "" {
			out[f[1]] = msg
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func isObjectID(s string) bool {
	return (len(s) == 40 || len(s) == 64) && allHex([]byte(s))
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
	// Read without waiting on a FIFO (a box's: review 18, F3), following a symlink as git does.
	if b, err := readFollow(filepath.Join(gd, "commondir"), 4096); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gd, c)
		}
		gd = c
	}
	return filepath.Clean(gd)
}

// recordBranches records, by common git directory, the branch and tag tips (and which of them
// are symbolic refs, to what) and the stash entries of the repositories whose work trees are
// tops (bounded). The common git directory of a repository in the reftable format, whose refs
// are no files, is in reftables: nothing is recorded of it. unread holds, by common git
// directory, why some of a repository's branches or tags may not be recorded (branchTips).
func recordBranches(tops []string) (tips, symrefs, stash map[string]map[string]string, reftables []string, unread map[string]string) {
	tips, symrefs, stash, unread = map[string]map[string]string{}, map[string]map[string]string{}, map[string]map[string]string{}, map[string]string{}
	seen := map[string]bool{}
	for _, top := range tops {
		gd := commonGitDir(top)
		if gd == "" || seen[gd] || len(seen) >= maxBranchRepos {
			continue
		}
		seen[gd] = true
		if reftable(gd) {
			reftables = append(reftables, gd)
			continue
		}
		t, sym, why := branchTips(gd)
		if why != "" {
			unread[gd] = why
		}
		if len(t) > 0 {
			tips[gd] = t
		}
		if len(sym) > 0 {
			symrefs[gd] = sym
		}
		if e := stashEntries(gd); len(e) > 0 {
			stash[gd] = e
		}
	}
	if len(unread) == 0 {
		unread = nil
	}
	return tips, symrefs, stash, reftables, unread
}

// reftable reports whether the repository whose common git directory is gd keeps its refs in
// the reftable format (git 2.45 and later: extensions.refStorage = reftable, refs in
// reftable/).
func reftable(gd string) bool {
	if fi, err := os.Lstat(filepath.Join(gd, "reftable")); err == nil && fi.IsDir() {
		return true
	}
	b, _ := readBeneath(gd, filepath.Join(gd, "config"), maxCheckedFile)
	es, _ := ParseConfig(b)
	return slices.ContainsFunc(es, func(e ConfigEntry) bool {
		return e.Section == "extensions" && !e.HasSub && e.Key == "refstorage" && strings.EqualFold(e.Value, "reftable")
	})
}

// branchCheckTimeout bounds one git merge-base at the check at exit, and branchCheckBudget all
// of them together: a box that rewrote thousands of recorded branches onto long histories
// delays the end of its launch by at most that, and each branch left is an alert.
const branchCheckTimeout = 10 * time.Second

var branchCheckBudget = 2 * time.Minute // a variable for the tests

// verifyBranches reports each branch recorded at the snapshot that now points to a commit its
// old tip is not an ancestor of (history rewritten: amended, rebased, reset back) or is gone:
// an alert naming the branch and both ids, and how to see the difference or restore it. A
// branch that moved forward (a commit, a fast-forward merge) is the box's ordinary work. A
// tag that moved or went, and a stash entry that is no longer in the stash, are alerts too.
func (s *State) verifyBranches() []Transition {
	var out []Transition
	ctx, cancel := context.WithTimeout(context.Background(), branchCheckBudget)
	defer cancel()
	for _, gd := range slices.Sorted(maps.Keys(s.Branches)) {
		r := newRefReader(gd)
		if r.unread != "" {
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, "packed-refs"), Alert: true, Detail: "at the check at exit, " + r.unread + ": a branch or tag below that reads as deleted may only be unread; git reads the file whole, so review it with git show-ref"})
		}
		old := s.Branches[gd]
		for _, ref := range slices.Sorted(maps.Keys(old)) {
			was := old[ref]
			is, sym, _ := r.resolve(ref)
			if wasSym := s.Symrefs[gd][ref]; sym != wasSym {
				// A branch made a symbolic ref follows another ref from now on: what the user's
				// next commit, push or checkout of it reaches is that ref's.
				d := fmt.Sprintf("%s was made a symbolic ref to %s while the box ran (git now reads it as %s, which is %s): make it a ref of its own again with git update-ref --no-deref %s %s", ref, sym, sym, orNone(is), ref, was)
				if sym == "" {
					d = fmt.Sprintf("%s was a symbolic ref to %s and is no longer one (git now reads it as %s): make it one again with git symbolic-ref %s %s", ref, wasSym, orNone(is), ref, wasSym)
				}
				out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, filepath.FromSlash(ref)), Alert: true, Detail: d})
			}
			if was == is {
				continue
			}
			if name, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
				d := fmt.Sprintf("the tag %s was moved while the box ran (it named %s, now %s): a tag names a release and never moves in ordinary work; review with git diff %s %s, restore with git update-ref refs/tags/%s %s", name, was, is, was, is, name, was)
				if is == "" {
					d = fmt.Sprintf("the tag %s was deleted while the box ran (it named %s); to restore it: git update-ref refs/tags/%s %s", name, was, name, was)
				}
				out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, filepath.FromSlash(ref)), Alert: true, Detail: d})
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
					// Ordinary work, unless its commits change a protected file: the host's
					// file keeps its content, but the branch holds the box's, which the
					// user's next git checkout, reset --hard or stash writes into the work
					// tree (review 32 C, F6: a box committed its edit of a pinned
					// .envrc.local, and the host's git stash brought it in for direnv).
					changed, err := s.protectedCommitted(ctx, gd, was, is)
					if err != nil {
						// Not told is not clean: a box that makes git fail (a FIFO among the
						// objects) must not pass its commits for ordinary work.
						out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, filepath.FromSlash(ref)), Alert: true, Detail: fmt.Sprintf(
							"the branch %s moved forward while the box ran (%s..%s), and whether its new commits change a protected file could not be told (%v): review with git diff --stat %s %s", name, was, is, err, was, is)})
					}
					for _, p := range changed {
						out = append(out, Transition{Kind: Modified, Path: filepath.Join(s.Workspace, p), Alert: true, Detail: fmt.Sprintf(
							"the branch %s's new commits (%s..%s) change this protected file (the repository's path): the file on the host keeps its content, but the branch holds the box's, which a git checkout, git reset --hard or git stash writes into the work tree; review with git diff %s %s -- %s, and restore it in the branch, in the work tree that has it checked out, with git checkout %s -- %s && git commit",
							name, was, is, was, is, shellQuote(p), was, shellQuote(p))})
					}
					continue
				default:
					d = fmt.Sprintf("the history of the branch %s was rewritten while the box ran (%s is no longer in it; now %s): commits already made were changed, amended or dropped, which git status and git log do not show; review with git diff %s %s, restore with git branch -f %s %s", name, was, is, was, is, name, was)
				}
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, filepath.FromSlash(ref)), Alert: true, Detail: d})
		}
	}
	for _, gd := range slices.Sorted(maps.Keys(s.RefsUnread)) {
		out = append(out, Transition{Kind: Modified, Path: gd, Alert: true, Detail: "not every branch and tag of this repository was recorded when the box started (" + s.RefsUnread[gd] + "): a branch or tag the box rewrote or deleted may not be reported here; review with git reflog"})
	}
	for _, gd := range s.Reftable {
		out = append(out, Transition{Kind: Modified, Path: gd, Alert: true, Detail: "this repository keeps its refs in the reftable format, which the check at exit does not read: a branch or tag the box rewrote or deleted, or a stash entry it dropped, was not looked for; review with git reflog and git stash list"})
	}
	// The box's own stash entries are its work, unless one changes a protected file: the
	// user's git stash pop of it (on top, perhaps with the message of theirs) writes the box's
	// version into the work tree (review 32 E, F6). In every repository recorded, with a stash
	// at the snapshot or not.
	repos := maps.Clone(s.Branches)
	for gd := range s.Stash {
		repos[gd] = nil
	}
	for _, gd := range slices.Sorted(maps.Keys(repos)) {
		now := stashEntries(gd)
		for _, id := range slices.Sorted(maps.Keys(now)) {
			if _, old := s.Stash[gd][id]; old {
				continue
			}
			// What git stash pop writes: the work tree's changes (W against its first parent),
			// with --index the index's (^2), and the untracked files (^3, a commit of their
			// own; review 32 F, F2: a new .mcp.json there went unseen).
			var paths []string
			for i, d := range [][2]string{{id + "^1", id}, {id + "^1", id + "^2"}, {emptyTree(len(id) == 64), id + "^3"}} {
				changed, err := s.protectedCommitted(ctx, gd, d[0], d[1])
				if err != nil && i == 0 {
					// ^2 and ^3 may not be there (an entry without its untracked files); W^1 is.
					out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, "refs", "stash"), Alert: true, Detail: fmt.Sprintf(
						"the stash entry %s (%q) was stored while the box ran, and whether it changes a protected file could not be told (%v): review with git stash show -p %s", id, now[id], err, id)})
				}
				for _, p := range changed {
					if !slices.Contains(paths, p) {
						paths = append(paths, p)
					}
				}
			}
			for _, p := range paths {
				out = append(out, Transition{Kind: Modified, Path: filepath.Join(s.Workspace, p), Alert: true, Detail: fmt.Sprintf(
					"the stash entry %s (%q), stored while the box ran, changes this protected file: git stash pop or apply of it writes the box's version into the work tree; review with git stash show -p %s -- %s, and drop it from git stash list if it is not yours",
					id, now[id], id, shellQuote(p))})
			}
		}
	}
	for _, gd := range slices.Sorted(maps.Keys(s.Stash)) {
		now := stashEntries(gd)
		for _, id := range slices.Sorted(maps.Keys(s.Stash[gd])) {
			if _, ok := now[id]; ok {
				continue
			}
			msg := s.Stash[gd][id]
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(gd, "refs", "stash"), Alert: true, Detail: fmt.Sprintf(
				"the stash entry %s (%q) was dropped or rewritten while the box ran: git stash list no longer has it; to store it again: git stash store -m %s %s",
				id, msg, shellQuote(msg), id)})
		}
	}
	return out
}

// emptyTree is the id of git's empty tree, in SHA-256 or SHA-1.
func emptyTree(sha256 bool) string {
	if sha256 {
		return "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
	}
	return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
}

// protectedCommitted returns the workspace-relative protected paths (the roots of the
// snapshot beneath the workspace, outside .git) that the commits was..is of the workspace's own
// repository (whose common git directory is gd) change, asked of git through a private git
// directory as isAncestor does; none for another repository; an error when git cannot tell.
func (s *State) protectedCommitted(ctx context.Context, gd, was, is string) ([]string, error) {
	if c := commonGitDir(s.Workspace); c == "" || filepath.Clean(c) != filepath.Clean(gd) {
		return nil, nil
	}
	specs := s.protectedRoots()
	if len(specs) == 0 {
		return nil, nil
	}
	out, err := privateGit(ctx, gd, len(strings.Split(is, "^")[0]) == 64, nil, append([]string{"diff", "--no-renames", "--name-only", "-z", was, is, "--"}, specs...)...)
	if err != nil {
		return nil, fmt.Errorf("git diff: %w", err)
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, filepath.FromSlash(p))
		}
	}
	return paths, nil
}

// orNone returns id, or "no commit" when it is empty.
func orNone(id string) string {
	if id == "" {
		return "no commit"
	}
	return id
}

// shellQuote quotes s for a POSIX shell, as a user pastes a command.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// privateGit runs git with args in a private git directory that reads the objects of the
// repository whose common git directory is gd (privateGitDir; sha256 its object format), with
// none of its configuration and no system or global configuration, pathspecs taken literally,
// within branchCheckTimeout, and returns its standard output; combined, when not nil, gets its
// standard output and error instead.
func privateGit(ctx context.Context, gd string, sha256 bool, combined *bytes.Buffer, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, branchCheckTimeout)
	defer cancel()
	dir, err := privateGitDir(gd, sha256)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cmd := hostprog.Command(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = privateGitEnv([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C", "GIT_LITERAL_PATHSPECS=1"}, dir)
	if combined != nil {
		cmd.Stdout, cmd.Stderr = combined, combined
	}
	return runCheckGit(cmd) // a FIFO among the objects stops it at once
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
	var buf bytes.Buffer
	_, err := privateGit(ctx, gd, len(anc) == 64, &buf, "merge-base", "--is-ancestor", anc, of)
	out := buf.Bytes()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errGitFIFO):
		return false, fmt.Errorf("git merge-base: %w", err)
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
