package integrity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// IgnoredWalkBound bounds the entries IgnoredChanged looks at in the git-ignored places of
// a workspace (files and folders, all repositories together).
const IgnoredWalkBound = 2_000_000

// maxIgnoredRepos bounds the repositories (the workspace's, and its submodules at any depth)
// whose ignored places IgnoredChanged lists.
const maxIgnoredRepos = 64

// IgnoredResult is what IgnoredChanged found: the workspace-relative paths of the regular files
// and symlinks in git-ignored places that the launch created or changed (Files), and what it
// could not look at (NotChecked: why, one line each; none when all was looked at).
type IgnoredResult struct {
	Files      []string
	NotChecked []string
}

// IgnoredChanged lists the files (regular files and symlinks) in git-ignored places of the
// workspace whose ctime is at or after the snapshot: created, written, renamed, linked or
// chmod-ed since the launch began, which the kernel stamps and no program can set back. What
// is ignored is what the host's git says (`git ls-files --others --ignored --exclude-standard
// --directory`, in the workspace and in each submodule's work tree it holds): the same rules
// that keep the file out of the host's git status, the user's own excludes included. git is
// run with its fsmonitor and untracked cache off and no optional locks: it reads, runs
// nothing and writes nothing. A workspace in no repository, or a host without git, has no
// ignored places (nothing there is under git's review either).
//
// A folder whose own ctime is in the launch was made, renamed, linked or chmod-ed, or had an
// entry added or removed, since the launch began: everything beneath it is taken, whatever
// its ctime, since renaming a folder leaves the ctimes of what it holds as they were (review
// 16, F2: an earlier launch's box content, renamed into an ignored folder).
//
// In a submodule whose untracked files the superproject's git status does not show (its
// ignore setting untracked, dirty or all: hiddenSubmodules), the untracked entries are ignored
// places too (review 17, F9).
//
// Not looked into: .git folders, the dependency folders of the snapshot (Deps: the rule of
// Code the host loads from dependency folders covers them) and the box's own (Own), and the
// linked worktrees of the workspace's repository there at the snapshot (Worktrees: their
// tracked files are under their own git status; their ignored places are listed as the
// workspace's are). What the launch's checks moved aside (Aside) is passed over while it is
// as the check left it: what changed there after the move is taken.
func (s *State) IgnoredChanged(ctx context.Context) IgnoredResult {
	var res IgnoredResult
	if s.Started.IsZero() {
		return res
	}
	if f := s.folders; f != nil {
		<-f.done
	}
	since := s.Started.UnixNano()
	budget := IgnoredWalkBound
	res.NotChecked = s.eachIgnored(ctx, func(rel, repo string) error {
		return s.changedFiles(rel, repo, since, &budget, &res.Files)
	})
	// git lists a folder all of whose files are ignored (x/) besides the files themselves.
	slices.Sort(res.Files)
	res.Files = slices.Compact(res.Files)
	return res
}

// eachIgnored calls walk with each ignored entry of the workspace's repository, of the
// submodules checked out in it (at any depth) and of its linked worktrees there at the
// snapshot (Worktrees) that is looked into (lookInto), and the work tree it belongs to (both
// workspace-relative); it stops at walk's first error. It returns what it could not look at.
func (s *State) eachIgnored(ctx context.Context, walk func(rel, repo string) error) (notChecked []string) {
	repos := []string{"."}
	// hidden are the submodules whose untracked files the superproject's git status does not
	// show (hiddenSubmodules): they are looked into as its ignored places are (review 17, F9).
	hidden := map[string]bool{}
	for i := 0; i < len(repos); i++ {
		if i >= maxIgnoredRepos {
			return append(notChecked, fmt.Sprintf("the git-ignored places of %d more submodules (past the bound of %d repositories)", len(repos)-i, maxIgnoredRepos))
		}
		top := filepath.Join(s.Workspace, repos[i])
		entries, subs, err := ignoredEntries(ctx, s.Workspace, top, i > 0, hidden[repos[i]])
		if err != nil {
			if i > 0 || !errors.Is(err, errNoRepository) {
				notChecked = append(notChecked, fmt.Sprintf("the git-ignored places of %s: %v", orDot(repos[i]), err))
			}
			continue
		}
		var hides map[string]bool
		if len(subs) > 0 && !hidden[repos[i]] {
			if hides, err = hiddenSubmodules(ctx, top, i > 0); err != nil {
				notChecked = append(notChecked, fmt.Sprintf("the untracked files of the submodules of %s: %v", orDot(repos[i]), err))
			}
		}
		for _, sub := range subs {
			r := filepath.Join(repos[i], sub)
			repos = append(repos, r)
			// A submodule beneath a hidden one is hidden too: the superproject shows
			// nothing of what lies in it.
			hidden[r] = hidden[repos[i]] || hides[sub]
		}
		if i == 0 {
			// The linked worktrees there at the snapshot, read as submodules are (private):
			// their git directories lie in the workspace's, where a box may write.
			for _, w := range s.Worktrees {
				if fi, err := os.Lstat(filepath.Join(s.Workspace, w)); err == nil && fi.IsDir() {
					repos = append(repos, w)
				}
			}
		}
		for _, e := range entries {
			rel := filepath.Join(repos[i], e)
			if !s.lookInto(rel, repos[i]) {
				continue
			}
			if err := walk(rel, repos[i]); err != nil {
				return append(notChecked, fmt.Sprintf("%s and what follows it: %v", rel, err))
			}
		}
	}
	return notChecked
}

func orDot(rel string) string {
	if rel == "." {
		return "the workspace"
	}
	return rel
}

// lookInto reports whether the workspace-relative path rel, found in the ignored places of
// the repository whose work tree is repo (workspace-relative), is looked into for files the
// launch left (IgnoredChanged).
func (s *State) lookInto(rel, repo string) bool {
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		if c == ".git" {
			return false
		}
	}
	for _, w := range s.Worktrees {
		if within(rel, w) && !within(repo, w) {
			return false
		}
	}
	p := filepath.Join(s.Workspace, rel)
	if s.owns(p) {
		return false
	}
	for d := range s.Deps {
		if within(p, d) {
			return false
		}
	}
	return true
}

var errNoRepository = errors.New("not in a git repository")

// ignoredEntries asks the host's git for the ignored entries of the work tree at top (paths
// relative to it; a folder ignored whole ends in "/") and the paths of its submodules. The
// workspace's own repository is read with its configuration, which is pinned (or out of the
// box's reach) and the user's. A submodule's (private) is read through a private git
// directory (privateGitDir): its index, its info/exclude and its objects, none of its
// configuration, which a box may have written (a repository it made and added as a gitlink).
// Before, git ls-files --stage there expanded the box's sparse index, and a lazy fetch from
// the promisor remote of the box's configuration ran its upload-pack command (protect10,
// TestAttackIgnoredRunsNothing).
//
// With untracked (a submodule whose untracked files the superproject's git status hides:
// hiddenSubmodules), its untracked entries are listed as well.
func ignoredEntries(ctx context.Context, ws, top string, private, untracked bool) (entries, subs []string, err error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil, errNoRepository
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	env := hostGitEnv()
	if private {
		gd := worktreeGitDir(top)
		common := commonGitDir(top)
		if gd == "" || common == "" {
			return nil, nil, errNoRepository
		}
		dir, err := privateGitDir(common, repoIDLen(ws, gd) == sha256.Size)
		if err != nil {
			return nil, nil, err
		}
		defer os.RemoveAll(dir)
		if b, err := readBeneath(common, filepath.Join(common, "info", "exclude"), maxCheckedFile); err == nil {
			os.MkdirAll(filepath.Join(dir, "info"), 0o700)
			if err := os.WriteFile(filepath.Join(dir, "info", "exclude"), b, 0o600); err != nil {
				return nil, nil, err
			}
		}
		env = append(privateGitEnv(env, dir), "GIT_WORK_TREE="+top, "GIT_INDEX_FILE="+filepath.Join(gd, "index"))
	}
	run := func(args ...string) ([]byte, error) { return readGit(ctx, top, env, args...) }
	out, err := run("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
	if err != nil {
		return nil, nil, err
	}
	if untracked {
		more, err := run("ls-files", "-z", "--others", "--exclude-standard", "--directory")
		if err != nil {
			return nil, nil, err
		}
		out = append(append(out, 0), more...)
	}
	for _, e := range bytes.Split(out, []byte{0}) {
		if len(e) > 0 {
			entries = append(entries, filepath.FromSlash(strings.TrimSuffix(string(e), "/")))
		}
	}
	out, err = run("ls-files", "-z", "--stage")
	if err != nil {
		return nil, nil, err
	}
	for _, e := range bytes.Split(out, []byte{0}) {
		// "MODE OBJECT STAGE\tPATH"; a gitlink has mode 160000.
		if rest, ok := bytes.CutPrefix(e, []byte("160000 ")); ok {
			if _, p, ok := bytes.Cut(rest, []byte("\t")); ok {
				// A submodule checked out (its .git there); an uninitialized one is an empty
				// folder of the superproject.
				if _, err := os.Lstat(filepath.Join(top, string(p), ".git")); err == nil {
					subs = append(subs, filepath.FromSlash(string(p)))
				}
			}
		}
	}
	return entries, subs, nil
}

// readGit runs the host's git in dir with env, its fsmonitor and untracked cache off and no
// optional locks (it reads, runs nothing and writes nothing), and returns its output;
// errNoRepository where dir is in no repository.
func readGit(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	c := exec.CommandContext(ctx, "git", append([]string{"-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
		"--no-optional-locks", "--literal-pathspecs"}, args...)...)
	c.Dir = dir
	c.Env = env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "not a git repository") {
			return nil, errNoRepository
		}
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, msg)
	}
	return out, nil
}

// hostGitEnv is the daemon's environment without the variables that would point git elsewhere
// than the work tree it is run in.
func hostGitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
			"GIT_CEILING_DIRECTORIES", "GIT_NAMESPACE", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "GIT_EDITOR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
}

// moveAside moves path (beneath the workspace) aside (moveAside) and records where it went in
// Aside.
func (s *State) moveAside(path string) (string, error) {
	aside, err := moveAside(s.Workspace, path)
	if err == nil {
		s.recordAside(aside)
	}
	return aside, err
}

// recordAside records path, which a check of the launch has just moved aside, in Aside with
// its ctime now (the move stamped it).
func (s *State) recordAside(path string) {
	fi, err := os.Lstat(path)
	if err != nil {
		return
	}
	if _, _, c := identity(fi); c != 0 {
		if s.Aside == nil {
			s.Aside = map[string]int64{}
		}
		s.Aside[path] = c
	}
}

// worktreesBeneath returns the workspace-relative paths of the linked worktrees beneath ws of
// the repositories whose work trees are tops (linkedWorktrees).
func worktreesBeneath(ws string, tops []string) []string {
	var out []string
	for _, top := range tops {
		gd := worktreeGitDir(top)
		if gd == "" {
			continue
		}
		for _, w := range linkedWorktrees(ws, gd) {
			if rel, err := filepath.Rel(ws, w.top); err == nil && w.index == "" && rel != "." && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	return out
}

// folderRecord is what RecordFolders found: the folders in git-ignored places (path → inode)
// that were at that path, unchanged, when the launch began.
type folderRecord struct {
	done  chan struct{}
	inode map[string]uint64
}

// RecordFolders starts recording, beside the box, the inode of each folder in the workspace's
// git-ignored places whose ctime is before the launch's start: that folder has been at its
// path since before the launch. IgnoredChanged waits for the record and takes what lies
// beneath a folder whose ctime is in the launch only when that folder is not the one recorded
// at its path: renamed there, or made, in the launch. A folder of the host's that only had
// entries added or removed keeps what it held (their ctimes speak for them). A folder not
// recorded (changed before the record reached it, past the bound, or a daemon restarted
// meanwhile: the record is not saved) is taken for new. A second call does nothing.
func (s *State) RecordFolders() {
	if s.folders != nil || s.Started.IsZero() {
		return
	}
	f := &folderRecord{done: make(chan struct{}), inode: map[string]uint64{}}
	s.folders = f
	// What the walk reads of the state, copied: the checks change it while the box runs.
	c := &State{Workspace: s.Workspace, Started: s.Started, Worktrees: slices.Clone(s.Worktrees), Own: slices.Clone(s.Own), Deps: maps.Clone(s.Deps)}
	go func() {
		defer close(f.done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		budget := IgnoredWalkBound
		c.eachIgnored(ctx, func(rel, repo string) error {
			return c.oldFolders(rel, repo, c.Started.UnixNano(), &budget, f.inode)
		})
	}()
}
