package integrity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/hostprog"
)

// maxCheckouts bounds the files of one repository compared with git's checkout of their object
// (one git run each): those git's conversions make equal to it while their bytes are not it.
const maxCheckouts = 256

// maxHiddenTaken bounds the files the check at exit puts back and keeps the launch's version
// of (verifyHiddenEdits) in one launch: past it a file is named only.
const maxHiddenTaken = changes.MaxChanges

// hiddenEditsTimeout bounds the git runs of the check of one repository (verifyHiddenEdits).
const hiddenEditsTimeout = 2 * time.Minute

// verifyHiddenEdits is the check at exit for the tracked files the launch changed whose change
// the host's git status and git diff do not show (docs/integrity.md, "Tracked edits git does
// not show"). It reads the indexes readIndexes reads (the workspace's, its submodules' and
// nested repositories' at any depth, their linked worktrees'), and looks only at the tracked
// regular files whose ctime is in the launch (s.since) and whose bytes are not the object the
// host's git compares them with (hashed here, no attribute applied). Of those, it reports:
//
//   - a file whose bytes git's conversions (the attributes a worktree .gitattributes selects
//     with no configuration: ident, text, eol, crlf, working-tree-encoding) make equal to that
//     object (git hash-object, with them) while they are not git's checkout of it (git
//     cat-file --filters): git status and git diff show nothing, and the host's tools run the
//     bytes. Before, a box's `build.sh ident` and a rewritten `$Id$` line hid a command in
//     build.sh from every git view (review 18b, TestAttackIdentHidesEdit);
//   - in a submodule whose effective ignore is dirty or all (submoduleIgnores), or beneath one,
//     a file whose bytes are neither the object of the commit the superproject records for the
//     submodule (its gitlink) nor git's checkout of it: the superproject's git status and git
//     diff show none of the submodule's changes (review 18b, TestAttackSubmoduleDirtyTrackedEdit).
//
// Each is an alert naming the file. With a store (s.Changes), the launch's version of each is
// kept there as a proposed change that modifies the file, and the file is put back as git
// checks out the object it was compared with (changes.TakeHidden): the host's file holds what
// its git views say it holds again, and agentbox changes and apply show and take the launch's
// version; a file past maxHiddenTaken, one the recorded commit does not hold, or one that
// cannot be put back stays as the launch left it, and its alert says why. git runs as the check
// of git-ignored places runs it (ignoredEntries): the workspace's repository with its
// configuration (pinned) and a copy of its index, any other through a private git directory
// (none of its configuration), fsmonitor off, no optional locks. A file that is the object's
// bytes, or git's checkout of them (CRLF line ends of an eol=crlf file), is no finding.
func (s *State) verifyHiddenEdits(tops []string) []Transition {
	if _, err := hostprog.Find("git"); err != nil {
		return nil
	}
	var out []Transition
	if !s.Started.IsZero() {
		// The first of the checks at exit that runs git in the work tree: what the launch made
		// there that git would wait on is removed first (unblockGit, said here; the later
		// checks reuse its result). Before, a box's FIFO at a .gitattributes git reads for a
		// changed file held git hash-object for this check's 2-minute bound.
		moved, _, _ := s.unblockGit(true)
		for _, m := range moved {
			out = append(out, Transition{Kind: Modified, Path: s.Workspace, Alert: true, Detail: "before the check at exit ran git: " + m})
		}
	}
	since := s.since()
	var ixs []*gitIndex
	readIndexes(s.Workspace, tops, func(ix *gitIndex, err error) {
		if err == nil {
			ixs = append(ixs, ix) // one that cannot be read is verifyIndexes' alert
		}
	})
	ctx := context.Background()
	budget, researched := maxHiddenTaken, false
	// The submodules whose changes the superproject's git status hides (their effective ignore
	// dirty or all: why), by work tree (absolute), and the commit each superproject's index
	// records for each submodule it holds.
	why, commit := map[string]string{}, map[string][]byte{}
	for _, ix := range ixs {
		var links []indexEntry
		for _, e := range ix.entries {
			if e.gitlink() && e.flags&ceStageMask == 0 {
				links = append(links, e)
			}
		}
		if len(links) == 0 {
			continue
		}
		ignores, err := submoduleIgnores(ctx, ix.top, ix.top != s.Workspace || s.NoRepository)
		if err != nil {
			out = append(out, Transition{Kind: Modified, Path: ix.top, Alert: true,
				Detail: fmt.Sprintf("the tracked files the launch changed in submodules whose changes git status hides (ignore = dirty or all) were not checked: %v", err)})
		}
		for _, e := range links {
			sub := filepath.Join(ix.top, filepath.FromSlash(e.name))
			commit[sub] = e.oid
			if v := ignores[filepath.Clean(filepath.FromSlash(e.name))]; v == "dirty" || v == "all" {
				why[sub] = fmt.Sprintf("whose changes the superproject's git status and git diff do not show (its ignore is %s)", v)
			}
		}
	}
	for _, ix := range ixs {
		// A submodule beneath a hidden one is hidden too: the superproject shows nothing of
		// what lies in it.
		var hiddenWhy string
		for d := ix.top; d != s.Workspace && within(d, s.Workspace); d = filepath.Dir(d) {
			if w, ok := why[d]; ok {
				hiddenWhy = w
				break
			}
		}
		sub := hiddenWhy != ""
		var at []byte
		if sub {
			at = commit[ix.top]
		}
		found, err := s.hiddenEditsIn(ctx, ix, since, sub, at, &budget)
		if errors.Is(err, errGitFIFO) && !researched && !s.Started.IsZero() {
			// git met a FIFO made after the search (a second box's) and was stopped at once
			// (runCheckGit): searched again (once), what the launch made is removed, and the
			// repository is checked again where nothing is left.
			researched = true
			s.gitChecked = false
			moved, left, _ := s.unblockGit(true)
			for _, m := range moved {
				out = append(out, Transition{Kind: Modified, Path: s.Workspace, Alert: true, Detail: "before the check at exit ran git: " + m})
			}
			if len(moved) > 0 && len(left) == 0 {
				found, err = s.hiddenEditsIn(ctx, ix, since, sub, at, &budget)
			}
		}
		if err != nil {
			out = append(out, Transition{Kind: Modified, Path: ix.top, Alert: true,
				Detail: fmt.Sprintf("the tracked files the launch changed were not checked for changes git status does not show: %v", err)})
		}
		for _, f := range found {
			p := filepath.Join(ix.top, filepath.FromSlash(f.name))
			git := "git"
			if ix.top != s.Workspace {
				git = fmt.Sprintf("git -C %q", ix.top)
			}
			var d string
			if sub {
				r, _ := filepath.Rel(s.Workspace, ix.top)
				d = fmt.Sprintf("the launch changed this tracked file of the submodule %s, %s", r, hiddenWhy)
			} else {
				d = fmt.Sprintf("the launch changed this tracked file, and git's conversions the attributes select for it (ident, text, eol, crlf, working-tree-encoding: a .gitattributes file) make the host's git status and git diff show it unchanged while its bytes are not the staged object's (%x) nor git's checkout of it", f.ref)
			}
			switch {
			case f.taken:
				d += fmt.Sprintf(": it was put back as git checks out the object %x, and the launch's version is kept as a proposed change (agentbox changes shows it, agentbox apply puts it back); check .gitattributes", f.ref)
				if f.truncated {
					d += fmt.Sprintf(" (kept truncated at %d bytes: it cannot be applied)", changes.MaxFile)
				}
			case sub:
				d += fmt.Sprintf(": the host's git status and git diff at the top show nothing of it, and the host's tools run it; review it with %s diff %x -- %q", git, at, f.name)
			default:
				d += fmt.Sprintf(": the host's tools run bytes no git view shows; compare it with %s cat-file --filters :%q, and check .gitattributes", git, f.name)
			}
			if f.err != nil {
				d += fmt.Sprintf(" (it stays as the launch left it: it was not put back: %v)", f.err)
			}
			out = append(out, Transition{Kind: Modified, Path: p, Alert: true, Detail: d})
		}
	}
	return out
}

// hiddenEdit is a file hiddenEditsIn found: its name in the index and the object it was
// compared with (nil: none, a file the recorded commit does not hold); taken says it was put
// back and the launch's version kept (truncated: cut at changes.MaxFile), err why not.
type hiddenEdit struct {
	name             string
	ref              []byte
	taken, truncated bool
	err              error
}

// hiddenEditsIn returns the tracked regular files of ix's work tree changed at or after since
// (ctime) whose bytes are hidden from the host's git views: with sub (a submodule whose changes
// the superproject hides), those that are neither the object of the commit (its tree; the
// index when commit is nil or cannot be read) nor git's checkout of it; otherwise those that
// are not the index's object while git's conversions make them equal to it, and are not git's
// checkout of it.
//
// With a store (s.Changes), each found is put back and kept there (changes.TakeHidden), while
// budget lasts.
func (s *State) hiddenEditsIn(ctx context.Context, ix *gitIndex, since int64, sub bool, commit []byte, budget *int) ([]hiddenEdit, error) {
	relTop, err := filepath.Rel(s.Workspace, ix.top)
	if err != nil || !within(ix.top, s.Workspace) {
		return nil, nil
	}
	wfd, err := unix.Open(s.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(wfd)
	// ref: name → the object the file is compared with; changed: the names whose file the
	// launch changed (ctime), with the file's own object id.
	ref := map[string][]byte{}
	var names []string
	for _, e := range ix.entries {
		if e.name == "" || e.flags&ceStageMask != 0 || e.ext&ceIntentToAdd != 0 || e.mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		ref[e.name] = e.oid
		names = append(names, e.name)
	}
	type cand struct {
		name     string
		raw, ref []byte
	}
	// looks are the files to look at: those of the index, or of the recorded commit (below).
	type look struct {
		name string
		want []byte
	}
	var looks []look
	// lookAll looks at each file: its bytes' object when the launch changed it (ctime) and it
	// is not want, several at a time (inChunks), in the order of looks.
	lookAll := func() []cand {
		found := make([]*cand, len(looks))
		inChunks(len(looks), func(lo, hi int) {
			var z objectHasher
			defer z.close()
			// Each folder is opened once (beneath the workspace, no symlink followed) and its
			// files are looked at by name: the index lists a folder's files together. Its
			// folder unopenable, a file is no tracked file git reads either.
			dirfd, dirName := -1, ""
			defer func() {
				if dirfd >= 0 {
					unix.Close(dirfd)
				}
			}()
			for i, l := range looks[lo:hi] {
				rel := filepath.Join(relTop, filepath.FromSlash(l.name))
				if d := filepath.Dir(rel); d != dirName || dirfd < 0 {
					if dirfd >= 0 {
						unix.Close(dirfd)
					}
					dirName = d
					var err error
					if dirfd, err = unix.Openat2(wfd, d, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath}); err != nil {
						dirfd = -1
						continue
					}
				}
				var st unix.Stat_t
				if unix.Fstatat(dirfd, filepath.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ctim.Nano() < since {
					continue
				}
				raw, err := s.memo.id(&z, wfd, rel, &st, unix.S_IFREG, ix.hashLen)
				if err != nil || !bytes.Equal(raw, l.want) {
					found[lo+i] = &cand{l.name, raw, l.want}
				}
			}
		})
		var cands []cand
		for _, c := range found {
			if c != nil {
				cands = append(cands, *c)
			}
		}
		return cands
	}
	// The git runs, each only when a file needs it.
	var g *hiddenGit
	git := func() (*hiddenGit, error) {
		if g == nil {
			var err error
			if g, err = newHiddenGit(ix, ix.top == s.Workspace && !s.NoRepository, ctx); err != nil {
				return nil, err
			}
		}
		return g, nil
	}
	defer func() {
		if g != nil {
			g.close()
		}
	}()
	if sub && commit != nil {
		// What the superproject compares the submodule with is the commit its gitlink records.
		gg, err := git()
		if err != nil {
			return nil, err
		}
		tree, err := gg.tree(commit)
		if err == nil {
			for _, n := range names {
				if _, ok := tree[n]; !ok {
					looks = append(looks, look{n, nil}) // tracked in the submodule, not in the recorded commit
				}
			}
			// (In name order, so that a folder's files follow each other.)
			for _, n := range slices.Sorted(maps.Keys(tree)) {
				looks = append(looks, look{n, tree[n]})
			}
			ref = tree
			names = nil
		}
	}
	for _, n := range names {
		looks = append(looks, look{n, ref[n]})
	}
	cands := lookAll()
	if len(cands) == 0 {
		return nil, nil
	}
	gg, err := git()
	if err != nil {
		return nil, err
	}
	var out []hiddenEdit
	// git's conversions (clean): a file they make equal to the object is hidden wherever it is
	// when its bytes are not git's checkout of the object; one they leave different is shown
	// by git status, except in a submodule whose changes the superproject hides.
	var paths []string
	for _, c := range cands {
		paths = append(paths, c.name)
	}
	clean, err := gg.cleanIDs(paths)
	if err != nil {
		return nil, err
	}
	var check []cand
	for i, c := range cands {
		switch {
		case c.ref == nil || c.raw == nil:
			check = append(check, c) // not in the recorded commit, or not read: reported
		case clean[i] == nil || bytes.Equal(clean[i], c.ref):
			// A name git's input cannot carry is not known to be shown: checked further.
			check = append(check, c)
		case sub:
			out = append(out, hiddenEdit{name: c.name, ref: c.ref})
		}
	}
	var smudge []cand
	for _, c := range check {
		if c.ref == nil || c.raw == nil {
			out = append(out, hiddenEdit{name: c.name, ref: c.ref})
			continue
		}
		smudge = append(smudge, c)
	}
	var past error
	if len(smudge) > maxCheckouts {
		past = fmt.Errorf("%d files whose bytes git's conversions make equal to the staged object were not compared with git's checkout of it (past the bound of %d; the first: %s)", len(smudge)-maxCheckouts, maxCheckouts, smudge[maxCheckouts].name)
		smudge = smudge[:maxCheckouts]
	}
	if len(smudge) > 0 {
		var pairs [][2]string
		for _, c := range smudge {
			pairs = append(pairs, [2]string{hex.EncodeToString(c.ref), c.name})
		}
		ids, err := gg.checkoutIDs(pairs, ix.hashLen)
		if err != nil {
			return nil, err
		}
		for i, c := range smudge {
			if !bytes.Equal(ids[i], c.raw) {
				out = append(out, hiddenEdit{name: c.name, ref: c.ref})
			}
		}
	}
	slices.SortFunc(out, func(a, b hiddenEdit) int { return strings.Compare(a.name, b.name) })
	if s.Changes != "" {
		for i := range out {
			h := &out[i]
			if h.ref == nil {
				h.err = errors.New("the commit the superproject records does not hold it: there is nothing to put back")
				continue
			}
			if *budget <= 0 {
				h.err = fmt.Errorf("past the bound of %d files put back in one launch", maxHiddenTaken)
				continue
			}
			*budget--
			// git's checkout of the object, as the host's git restore would write it.
			base, err := gg.run(nil, "cat-file", "--filters", "--path="+h.name, hex.EncodeToString(h.ref))
			if err != nil {
				h.err = err
				continue
			}
			h.truncated, h.err = changes.TakeHidden(s.Changes, s.Workspace, filepath.Join(relTop, filepath.FromSlash(h.name)), base)
			h.taken = h.err == nil
		}
	}
	return out, past
}

// hiddenGit runs git for verifyHiddenEdits in one work tree: the workspace's own repository
// of the launch with its (pinned) configuration and a copy of its index, any other (a
// repository the box made at the top too: State.NoRepository) through a private git directory
// (workTreeGitEnv's rules).
type hiddenGit struct {
	ctx    context.Context
	cancel func()
	top    string
	env    []string
	done   func()
}

func newHiddenGit(ix *gitIndex, pinned bool, ctx context.Context) (*hiddenGit, error) {
	ctx, cancel := context.WithTimeout(ctx, hiddenEditsTimeout)
	g := &hiddenGit{ctx: ctx, cancel: cancel, top: ix.top, env: hostGitEnv(), done: func() {}}
	gd := filepath.Dir(ix.path)
	if pinned {
		index, done, err := indexCopyEnv(gd)
		if err != nil {
			cancel()
			return nil, err
		}
		g.env, g.done = append(g.env, index...), done
		return g, nil
	}
	common := commonGitDir(ix.top)
	if common == "" {
		common = gd
	}
	dir, err := privateGitDir(common, ix.hashLen == sha256.Size)
	if err != nil {
		cancel()
		return nil, err
	}
	g.done = func() { os.RemoveAll(dir) }
	// No index: what is read is the work tree's files, their attributes and objects.
	g.env = append(privateGitEnv(g.env, dir), "GIT_WORK_TREE="+ix.top, "GIT_INDEX_FILE="+filepath.Join(dir, "agentbox-index"))
	return g, nil
}

func (g *hiddenGit) close() {
	g.cancel()
	g.done()
}

// run runs git with in as its standard input.
func (g *hiddenGit) run(in []byte, args ...string) ([]byte, error) {
	c := checkGit(g.ctx, args...)
	c.Dir, c.Env, c.Stdin = g.top, g.env, bytes.NewReader(in)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := runCheckGit(c)
	if err != nil {
		return nil, fmt.Errorf("git %s in %s: %w: %s", args[0], g.top, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// tree returns the regular files of commit's tree: path → object id.
func (g *hiddenGit) tree(commit []byte) (map[string][]byte, error) {
	out, err := g.run(nil, "ls-tree", "-r", "-z", "--full-tree", hex.EncodeToString(commit))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for e := range bytes.SplitSeq(out, []byte{0}) {
		// "MODE TYPE OBJECT\tPATH"
		meta, p, ok := bytes.Cut(e, []byte("\t"))
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 || (f[0] != "100644" && f[0] != "100755") {
			continue
		}
		id, err := hex.DecodeString(f[2])
		if err != nil {
			continue
		}
		files[string(p)] = id
	}
	return files, nil
}

// errLineName is a file name git's line-based input cannot carry.
var errLineName = errors.New("its name holds a line break")

// cleanIDs returns the object id git stores for each file (paths relative to the work tree):
// its bytes with the conversions its attributes select (git hash-object --stdin-paths), nil
// for a name git's input cannot carry.
func (g *hiddenGit) cleanIDs(paths []string) ([][]byte, error) {
	var in bytes.Buffer
	var idx []int
	for i, p := range paths {
		if strings.ContainsAny(p, "\n\r") {
			continue
		}
		in.WriteString(p + "\n")
		idx = append(idx, i)
	}
	ids := make([][]byte, len(paths))
	if len(idx) == 0 {
		return ids, nil
	}
	out, err := g.run(in.Bytes(), "hash-object", "--stdin-paths")
	if err != nil {
		return nil, err
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(idx) {
		return nil, fmt.Errorf("git hash-object gave %d ids for %d files", len(lines), len(idx))
	}
	for j, i := range idx {
		if ids[i], err = hex.DecodeString(lines[j]); err != nil {
			return nil, fmt.Errorf("git hash-object: %w", err)
		}
	}
	return ids, nil
}

// checkoutIDs returns, for each (object, path), the object id of git's checkout of the object
// at that path (git cat-file --filters --path: the conversions its attributes select, hashed as
// a blob); nil for a path git's input cannot carry. One git run each: git 2.39's --batch
// --filters gives the object's size unconverted in its header, so its output cannot be split.
func (g *hiddenGit) checkoutIDs(pairs [][2]string, hashLen int) ([][]byte, error) {
	ids := make([][]byte, len(pairs))
	var z objectHasher
	defer z.close()
	for i, p := range pairs {
		out, err := g.run(nil, "cat-file", "--filters", "--path="+p[1], p[0])
		if err != nil {
			return nil, err
		}
		h := z.hash(hashLen)
		fmt.Fprintf(h, "blob %d\x00", len(out))
		h.Write(out)
		ids[i] = h.Sum(nil)
	}
	return ids, nil
}
