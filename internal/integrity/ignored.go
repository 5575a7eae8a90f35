package integrity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/hostprog"
)

// IgnoredWalkBound bounds the entries IgnoredChanged looks at in the git-ignored places of
// a workspace (files and folders, all repositories together).
const IgnoredWalkBound = 2_000_000

// maxIgnoredRepos bounds the repositories (the workspace's, and its submodules at any depth)
// whose ignored places IgnoredChanged lists.
const maxIgnoredRepos = 64

// IgnoredResult is what IgnoredChanged found: the workspace-relative paths of the regular files
// and symlinks in git-ignored places (and the runnable ones in the folders an allowed .envrc
// puts on PATH) that the launch created or changed (Files), and what it
// could not look at (NotChecked: why, one line each; none when all was looked at).
type IgnoredResult struct {
	Files      []string
	NotChecked []string
	// Failed says, one line each, where git failed or was not run (killed at its time
	// bound, a file it would wait on left in place) and the walk in Go took every untracked
	// file the launch left there instead (fallbackEntries); Aside, what was moved aside
	// before git ran (unblockGit). Both are for the user: the check did not go as it should.
	Failed []string
	Aside  []string
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
//
// Files also has what a PATH search runs that the launch left in the folders the top's allowed
// .envrc puts on PATH (pathDirsChanged: PATH_add bin), tracked or not: the host's shell runs
// them at the next cd into the workspace, and git status is no review of that (review 21).
func (s *State) IgnoredChanged(ctx context.Context) IgnoredResult {
	var res IgnoredResult
	if s.Started.IsZero() {
		return res
	}
	if f := s.folders; f != nil {
		<-f.done
	}
	// A ctime from ctimeLag before the snapshot counts: the kernel stamps it from its coarse
	// clock, which lags the snapshot's by up to a tick, and a file the box wrote at once had a
	// ctime 2-5.5 ms before Started here (tmpfs, 2026-12-05: TestRecordFoldersSaved failed
	// 17 times in 30).
	since := s.Started.Add(-ctimeLag).UnixNano()
	budget := IgnoredWalkBound
	res.NotChecked, res.Failed, res.Aside = s.eachIgnored(ctx, true, func(rel, repo string) error {
		return s.changedFiles(rel, repo, since, &budget, &res.Files)
	})
	res.Files = append(res.Files, s.pathDirsChanged(since)...)
	// git lists a folder all of whose files are ignored (x/) besides the files themselves.
	slices.Sort(res.Files)
	res.Files = slices.Compact(res.Files)
	return res
}

// eachIgnored calls walk with each ignored entry of the workspace's repository, of the
// submodules checked out in it (at any depth) and of its linked worktrees there at the
// snapshot (Worktrees) that is looked into (lookInto), and the work tree it belongs to (both
// workspace-relative); it stops at walk's first error. It returns what it could not look at,
// where git failed and every untracked entry was walked instead (fallbackEntries), and what
// was moved aside first so that git would not wait on it (unblockGit; with move only, the
// check at exit: the record at the launch's start moves nothing).
func (s *State) eachIgnored(ctx context.Context, move bool, walk func(rel, repo string) error) (notChecked, failed, aside []string) {
	aside, left, note := s.unblockGit(move)
	if note != "" {
		notChecked = append(notChecked, note)
	}
	var blocked error
	if len(left) > 0 {
		blocked = fmt.Errorf("git was not run: %s", strings.Join(left[:min(len(left), 3)], "; "))
	}
	researched := false
	repos := []string{"."}
	// hidden are the submodules whose untracked files the superproject's git status does not
	// show (hiddenSubmodules): they are looked into as its ignored places are (review 17, F9).
	hidden := map[string]bool{}
	for i := 0; i < len(repos); i++ {
		if i >= maxIgnoredRepos {
			return append(notChecked, fmt.Sprintf("the git-ignored places of %d more submodules (past the bound of %d repositories)", len(repos)-i, maxIgnoredRepos)), failed, aside
		}
		top := filepath.Join(s.Workspace, repos[i])
		var entries, subs []string
		err := blocked
		if err == nil {
			entries, subs, err = ignoredEntries(ctx, s.Workspace, top, s.private(i), hidden[repos[i]])
		}
		if errors.Is(err, errGitFIFO) && move && !researched {
			// git met a FIFO the search before it did not see (made since: a second box's),
			// and was stopped at once (runCheckGit). The workspace is searched again (once):
			// what the launch made is removed, and git runs again where nothing is left.
			researched = true
			s.gitChecked = false
			more, left, _ := s.unblockGit(true)
			aside = append(aside, more...)
			if len(more) > 0 && len(left) == 0 {
				entries, subs, err = ignoredEntries(ctx, s.Workspace, top, s.private(i), hidden[repos[i]])
			}
		}
		if err != nil && (i > 0 || !errors.Is(err, errNoRepository) || worktreeGitDir(top) != "") {
			// git failed where there is a repository (killed at its time bound, a file it
			// would wait on, a HEAD the box removed): what the launch left there is taken by
			// a walk in Go, every untracked entry looked at (review 18, F3).
			var ferr error
			if entries, subs, ferr = fallbackEntries(s.Workspace, top); ferr != nil {
				notChecked = append(notChecked, fmt.Sprintf("the git-ignored places of %s: %v (and the walk in Go: %v)", orDot(repos[i]), err, ferr))
				continue
			}
			failed = append(failed, fmt.Sprintf("%s: %v", orDot(repos[i]), err))
			if errors.Is(err, errGitTimeBound) && blocked == nil {
				// What held git there (a file the search did not see) may hold it in the
				// next repositories too: 2 minutes each, up to 64. The walk stands in.
				blocked = fmt.Errorf("git was not run: it was stopped at its time bound in %s", orDot(repos[i]))
			}
			if move && i == 0 && blocked == nil {
				s.gitLeft = append(s.gitLeft, fmt.Sprintf("git failed in the workspace: %v", err))
			}
		} else if err != nil {
			continue // no repository
		}
		var hides map[string]bool
		if len(subs) > 0 && !hidden[repos[i]] && err == nil {
			if hides, err = hiddenSubmodules(ctx, top, s.private(i)); err != nil {
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
				return append(notChecked, fmt.Sprintf("%s and what follows it: %v", rel, err)), failed, aside
			}
		}
	}
	return notChecked, failed, aside
}

// private reports whether the i-th work tree eachIgnored looks at (0: the workspace's top) is
// read through a private git directory, without its configuration (workTreeGitEnv): every one
// but the workspace's own repository of the launch, whose configuration is pinned. A
// repository at the top of a workspace that was in none at the snapshot (NoRepository) is the
// box's, its configuration the box's.
func (s *State) private(i int) bool { return i > 0 || s.NoRepository }

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

// surelyNoRepository reports whether git, run in the folder dir with hostGitEnv, certainly
// finds no repository: dir is a folder, and neither it nor any folder above it, up to the
// root, as written or symlink-resolved (git discovers from its resolved working folder), holds
// an entry named .git (a folder, a file, a symlink: anything) or HEAD (which git's test for a
// bare repository or a git directory needs). git's discovery looks for nothing else once
// GIT_DIR and GIT_CEILING_DIRECTORIES are unset (hostGitEnv), and stops earlier than this, at a
// filesystem boundary; an entry that cannot be looked at counts as one found. Then the checks
// at exit need no run of git, each of which costs a launch's end milliseconds (3 in a
// workspace in no repository: docs/benchmarks.md); where it says false, git is run and
// decides, as before. Not repoTop's rule (the daemon's), which takes a .git only with HEAD
// in it: a check at exit must never skip a repository git would find.
func surelyNoRepository(dir string) bool {
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return false
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	for _, start := range []string{filepath.Clean(dir), resolved} {
		if !filepath.IsAbs(start) {
			return false
		}
		for d := start; ; d = filepath.Dir(d) {
			for _, name := range []string{".git", "HEAD"} {
				if _, err := os.Lstat(filepath.Join(d, name)); !errors.Is(err, os.ErrNotExist) {
					return false
				}
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return true
}

// errGitTimeBound is the error of a git call of the checks stopped at its time bound
// (gitCheckTimeout).
var errGitTimeBound = errors.New("stopped at its time bound")

// errGitFIFO is the error of a git call of the checks that waited on a FIFO (runCheckGit): it
// was stopped at once.
var errGitFIFO = errors.New("it waited on a FIFO")

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
	if _, err := hostprog.Find("git"); err != nil {
		return nil, nil, errNoRepository
	}
	if !private && surelyNoRepository(top) {
		return nil, nil, errNoRepository
	}
	ctx, cancel := context.WithTimeout(ctx, gitCheckTimeout)
	defer cancel()
	env, done, err := workTreeGitEnv(ws, top, private)
	if err != nil {
		return nil, nil, err
	}
	defer done()
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

// workTreeGitEnv returns the environment the checks at exit run git with in the work tree top
// (beneath ws), and the function that removes what it made. The workspace's own repository
// of the launch (private false) is read with its configuration, which is pinned (or out of the
// box's reach), and a copy of its index (indexCopyEnv). Any other (private: a submodule, a
// linked worktree, a repository the box made at the workspace's top: State.NoRepository) is
// read through a private git directory (privateGitDir): its index (a copy), its info/exclude
// and its objects, none of its configuration, which a box may have written; errNoRepository
// where top has no .git. Of a repository the box made at the top, the ignore file its
// configuration names (core.excludesFile, boxExcludesFile) is read as the host's git status
// reads it, before its info/exclude.
func workTreeGitEnv(ws, top string, private bool) (env []string, done func(), err error) {
	env = hostGitEnv()
	if !private {
		index, done, err := indexCopyEnv(worktreeGitDir(top))
		if err != nil {
			return nil, nil, err
		}
		return append(env, index...), done, nil
	}
	gd := worktreeGitDir(top)
	common := commonGitDir(top)
	if gd == "" || common == "" {
		return nil, nil, errNoRepository
	}
	dir, err := privateGitDir(common, repoIDLen(ws, gd) == sha256.Size)
	if err != nil {
		return nil, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	var exclude []byte
	if top == ws {
		// git reads core.excludesFile's patterns before info/exclude's, which win over them:
		// one list with info/exclude last matches as git's two do (the last match decides).
		if b := boxExcludesFile(ws, gd, common); len(b) > 0 {
			exclude = append(b, '\n')
		}
	}
	if b, err := readBeneath(common, filepath.Join(common, "info", "exclude"), maxCheckedFile); err == nil {
		exclude = append(exclude, b...)
	}
	if len(exclude) > 0 {
		os.MkdirAll(filepath.Join(dir, "info"), 0o700)
		if err := os.WriteFile(filepath.Join(dir, "info", "exclude"), exclude, 0o600); err != nil {
			done()
			return nil, nil, err
		}
	}
	index, err := indexCopy(gd, dir)
	if err != nil {
		done()
		return nil, nil, err
	}
	return append(privateGitEnv(env, dir), "GIT_WORK_TREE="+top, "GIT_INDEX_FILE="+index), done, nil
}

// boxConfigValue returns the last value of section.key (lower-case, no subsection) in the
// configuration of the repository whose git directory is gd (common its common dir) beneath
// ws, as git reads it: the common dir's config, then gd's config.worktree. A file that is not a
// regular file beneath ws, or that git would refuse, gives nothing (a config with executable
// keys is moved aside by the scan before the checks at exit run).
func boxConfigValue(ws, gd, common, section, key string) string {
	v := ""
	for _, f := range []string{filepath.Join(common, "config"), filepath.Join(gd, "config.worktree")} {
		b, err := readBeneath(ws, f, maxCheckedFile)
		if err != nil {
			continue
		}
		entries, err := ParseConfig(b)
		if err != nil {
			continue
		}
		if x := lastValue(entries, section, key); x != "" {
			v = x
		}
	}
	return v
}

// boxExcludesFile returns the content of the ignore file the configuration of the repository
// at ws's top (gd, common) names (core.excludesFile), when it is a regular file beneath ws (a
// relative one is relative to the top, as git opens it; "~" is the home folder): the host's git
// status hides what it ignores. One leading out of ws is a finding of the scan, which moved the
// config aside.
func boxExcludesFile(ws, gd, common string) []byte {
	v := boxConfigValue(ws, gd, common, "core", "excludesfile")
	if v == "" {
		return nil
	}
	p, ok := expandHome(v)
	if !ok {
		return nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(ws, p)
	}
	b, err := readBeneath(ws, filepath.Clean(p), maxCheckedFile)
	if err != nil {
		return nil
	}
	return b
}

// maxIndexCopy bounds the index indexCopy copies (git's own bound is the memory it can map).
const maxIndexCopy = 1 << 30

// indexCopy copies the index of the git directory gd (gd/index: read beneath gd, without
// waiting on a FIFO, a regular file only) into the folder dir, and returns the copy's path for
// GIT_INDEX_FILE; where gd has no index, a path where none is (git then reads no index, as it
// would). The checks run git on the copy: git opens GIT_INDEX_FILE as it finds it, and a box's
// FIFO there held each git for its whole time bound, one repository after another, and the
// end of the launch with them: 2 minutes per submodule, up to 64 (review 17, F4,
// TestAttackIgnoredCheckHangs).
func indexCopy(gd, dir string) (string, error) {
	dst := filepath.Join(dir, "agentbox-index")
	f, err := openReadBeneath(gd, filepath.Join(gd, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return dst, nil
	}
	if err != nil {
		return "", fmt.Errorf("its index (%s) was not read: %w", filepath.Join(gd, "index"), err)
	}
	defer f.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(out, io.LimitReader(f, maxIndexCopy+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxIndexCopy {
		err = fmt.Errorf("its index (%s) is larger than %d MiB", filepath.Join(gd, "index"), maxIndexCopy>>20)
	}
	return dst, err
}

// indexCopyEnv is indexCopy into a folder of its own, for a repository read with its own
// git directory: the variable that names the copy (none where gd is "", no repository), and
// the function that removes it.
func indexCopyEnv(gd string) (env []string, done func(), err error) {
	if gd == "" {
		return nil, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "agentbox-index-")
	if err != nil {
		return nil, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	index, err := indexCopy(gd, dir)
	if err != nil {
		done()
		return nil, nil, err
	}
	return []string{"GIT_INDEX_FILE=" + index}, done, nil
}

// readGit runs the host's git in dir with env, its fsmonitor and untracked cache off and no
// optional locks (it reads, runs nothing and writes nothing), and returns its output;
// errNoRepository where dir is in no repository.
func readGit(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	c := checkGit(ctx, args...)
	c.Dir = dir
	c.Env = env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := runCheckGit(c)
	if errors.Is(err, errGitFIFO) {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("git %s: %w (%v): %v", args[0], errGitTimeBound, ctx.Err(), err)
		}
		if strings.Contains(msg, "not a git repository") {
			return nil, errNoRepository
		}
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, msg)
	}
	return out, nil
}

// checkGit is the host's git (hostprog) run as the checks run it: no fsmonitor, no untracked
// cache, no optional locks, pathspecs taken literally.
func checkGit(ctx context.Context, args ...string) *exec.Cmd {
	return hostprog.Command(ctx, "git", append([]string{"-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
		"--no-optional-locks", "--literal-pathspecs"}, args...)...)
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
// the repositories whose work trees are tops (linkedWorktrees), each whose work tree holds a
// .git.
func worktreesBeneath(ws string, tops []string) []string {
	var out []string
	for _, top := range tops {
		gd := worktreeGitDir(top)
		if gd == "" {
			continue
		}
		for _, w := range linkedWorktrees(ws, gd) {
			rel, err := filepath.Rel(ws, w.top)
			if err != nil || w.index != "" || rel == "." || slices.Contains(out, rel) {
				continue
			}
			// A record whose work tree has no .git (its folder removed: prunable) is no
			// worktree git works in (review 30: its record was reported again at every
			// launch's exit as removed then; verifyWorktreeRecords).
			if _, err := os.Lstat(filepath.Join(w.top, ".git")); err == nil {
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
// recorded (changed before the record reached it, or past the bound) is taken for new.
//
// Once made, the record is saved at path (when not ""), beside the launch's integrity state,
// and done (when not nil) is called with the error of that save: a daemon restarted while the
// box runs reads it back (LoadFolders). Before, it was kept in memory only, and after a restart
// every folder of the host's whose ctime the box had moved was taken whole at exit, the user's
// old files in it too. A daemon stopped before the record was saved leaves none: then, as
// before, such a folder is taken whole. A second call does nothing.
func (s *State) RecordFolders(path string, done func(error)) {
	if s.folders != nil || s.Started.IsZero() {
		return
	}
	f := &folderRecord{done: make(chan struct{}), inode: map[string]uint64{}}
	s.folders = f
	if s.NoRepository {
		// No repository at launch, so no git-ignored place to record. A walk started here ran
		// git in the workspace with the configuration of a repository the box had made
		// meanwhile (git init), a config the box wrote: its promisor remote's uploadpack ran in
		// the daemon (review 22, TestAttackRecordFoldersReadsBoxConfig).
		var err error
		if path != "" {
			err = saveFolders(path, f.inode)
		}
		close(f.done)
		if done != nil {
			done(err)
		}
		return
	}
	// What the walk reads of the state, copied: the checks change it while the box runs.
	c := &State{Workspace: s.Workspace, Started: s.Started, Worktrees: slices.Clone(s.Worktrees), Own: slices.Clone(s.Own), Deps: maps.Clone(s.Deps)}
	go func() {
		defer close(f.done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		budget := IgnoredWalkBound
		c.eachIgnored(ctx, false, func(rel, repo string) error {
			return c.oldFolders(rel, repo, c.Started.UnixNano(), &budget, f.inode)
		})
		var err error
		if path != "" {
			err = saveFolders(path, f.inode)
		}
		if done != nil {
			done(err)
		}
	}()
}

// savedFolders is the file RecordFolders saves: the record, by path.
type savedFolders struct {
	Inode map[string]uint64 `json:"inode"`
}

func saveFolders(path string, inode map[string]uint64) error {
	b, err := json.Marshal(savedFolders{Inode: inode})
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("integrity: save the record of the ignored folders: %w", err)
	}
	return nil
}

// LoadFolders reads back the record RecordFolders saved at path, for a state loaded by a
// daemon that did not make it (Load, after a restart while the box ran). An error wrapping
// fs.ErrNotExist says that none was saved: the folders whose ctime is in the launch are then
// taken whole at exit. It is called before the state is shared with the checks.
func (s *State) LoadFolders(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("integrity: load the record of the ignored folders: %w", err)
	}
	var saved savedFolders
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("integrity: load the record of the ignored folders %s: %w", path, err)
	}
	f := &folderRecord{done: make(chan struct{}), inode: saved.Inode}
	if f.inode == nil {
		f.inode = map[string]uint64{}
	}
	close(f.done)
	s.folders = f
	return nil
}
