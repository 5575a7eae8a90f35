package integrity

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The index's skip-worktree (extended flag, index v3 and later) and assume-unchanged (flag)
// bits make git skip the work tree's file: a box that edits a tracked file and sets one hides
// its edit from the host's git status, git diff, commit -a and stash, while every build tool
// reads the box's file (review 12, F9). GITDIR/index must stay writable (git in the box needs
// it), so the watch parses it, never runs git on the workspace, and reports each entry newly
// flagged whose file exists in the work tree (a sparse checkout flags absent files: such a flag
// the launch set goes at exit), and each entry flagged before the launch whose file the launch
// changed so that it is not the entry's object. A sparse index's directory entry the launch
// introduced, which the host's git expands into files flagged skip-worktree unless the
// repository's configuration keeps the sparse index (sparseIndexKept), moves the index aside at
// exit (review 19b).

// maxIndexBytes bounds the part of an index held in memory: its header and entries (a
// repository of a million files has an index of about 100 MiB), and its extensions when the
// whole file is within it. The extensions of a larger index are walked by their lengths and
// copied through, never read whole: one padded past the bound by a valid resolve-undo record
// was not checked at all (review 15, F15). An index whose entries pass the bound is not
// checked, and one the launch wrote is moved aside (errIndexEntries).
const maxIndexBytes = 256 << 20

// errIndexEntries is an index whose entries lie past maxIndexBytes.
var errIndexEntries = fmt.Errorf("its entries take more than %d MiB", maxIndexBytes>>20)

// errSplitIndex is a split index whose shared index could not be read or merged: one the
// launch wrote is moved aside, as git may read what the check could not.
var errSplitIndex = errors.New("a split index that could not be read")

// errPastHead is an index entry past the part of the index read so far (readIndexHead reads
// more).
var errPastHead = errors.New("index entries past the part read")

// Hidden-entry kinds, by the flag git sets.
const (
	hiddenSkipWorktree    = "skip-worktree"
	hiddenAssumeUnchanged = "assume-unchanged"
)

// hiddenEntry is an index entry flagged skip-worktree or assume-unchanged: its flag
// (hiddenSkipWorktree when both are set) and where the bits lie in the index.
type hiddenEntry struct {
	flag string
	bits []flagBit
}

// flagBit is a bit of the big-endian 16-bit field at off.
type flagBit struct {
	off int
	bit uint16
}

// indexEntry is one entry of a git index: where it lies and what git reads of it.
type indexEntry struct {
	name string
	// off is where the entry starts: its stat data (ctime, mtime, dev, ino, mode, uid, gid,
	// size; 4 bytes each), then the object id, the flags and the extended flags.
	off      int
	mode     uint32
	oid      []byte
	flagsOff int
	extOff   int // 0 without extended flags
	flags    uint16
	ext      uint16
}

// Index entry flags (git's read-cache.c).
const (
	ceAssumeUnchanged = 0x8000
	ceExtended        = 0x4000
	ceStageMask       = 0x3000
	ceSkipWorktree    = 0x4000 // extended
	ceIntentToAdd     = 0x2000 // extended
)

// statField returns the 32-bit stat field at index i (0 ctime s, 1 ctime ns, 2 mtime s,
// 3 mtime ns, 4 dev, 5 ino, 6 mode, 7 uid, 8 gid, 9 size) of e in the index b.
func statField(b []byte, e indexEntry, i int) uint32 {
	return binary.BigEndian.Uint32(b[e.off+4*i:])
}

// hidden returns the entry's hiding flag and where its bits lie (flag "" when it has none).
// gitlink reports whether the entry is a gitlink (mode 160000: a submodule, or a nested
// repository added as such), whose .git the host's git status enters.
func (e indexEntry) gitlink() bool { return e.mode&0o170000 == 0o160000 && e.name != "" }

// indexGitlinks returns the paths of the index b's gitlinks.
func indexGitlinks(b []byte, idLen int) ([]string, error) {
	es, err := indexEntries(b, idLen)
	var out []string
	for _, e := range es {
		if e.gitlink() {
			out = append(out, e.name)
		}
	}
	return out, err
}

func (e indexEntry) hidden() hiddenEntry {
	var h hiddenEntry
	if e.flags&ceAssumeUnchanged != 0 {
		h = hiddenEntry{hiddenAssumeUnchanged, []flagBit{{e.flagsOff, ceAssumeUnchanged}}}
	}
	if e.ext&ceSkipWorktree != 0 {
		h = hiddenEntry{hiddenSkipWorktree, append(h.bits, flagBit{e.extOff, ceSkipWorktree})}
	}
	return h
}

// indexHidden returns the entries of the index b (version 2, 3 or 4; SHA-1 or SHA-256) flagged
// skip-worktree or assume-unchanged, by path.
func indexHidden(b []byte, idLen int) (map[string]hiddenEntry, error) {
	es, err := indexEntries(b, idLen)
	if err != nil {
		return nil, err
	}
	out := map[string]hiddenEntry{}
	for _, e := range es {
		// In a split index, an entry with no name replaces one of the shared index.
		if h := e.hidden(); h.flag != "" && e.name != "" {
			out[e.name] = h
		}
	}
	return out, nil
}

// indexEntries returns the entries of the index b (version 2, 3 or 4) of a repository whose
// object ids are idLen bytes long (objectIDLen).
func indexEntries(b []byte, idLen int) ([]indexEntry, error) {
	es, _, err := indexContents(b, idLen)
	return es, err
}

// indexContents returns the entries of the index b, of a repository whose object ids are idLen
// bytes long, and its extensions. The length is the repository's (objectIDLen), as git takes
// it, never the index's trailing checksum's: git does not verify that checksum when it reads
// an index, so a SHA-1 repository's index ending in a SHA-256 of itself had the check read
// other entries than git (review 14, F13).
func indexContents(b []byte, idLen int) ([]indexEntry, []indexExtension, error) {
	return indexContentsAt(b, int64(len(b)), nil, idLen)
}

// indexContentsAt is indexContents of an index of size bytes whose first bytes are head (the
// whole index when r is nil): the entries must lie in head (errPastHead), and the extensions
// past it are walked by their lengths, their headers read from r.
func indexContentsAt(head []byte, size int64, r io.ReaderAt, idLen int) ([]indexEntry, []indexExtension, error) {
	if len(head) < 12 || string(head[:4]) != "DIRC" {
		return nil, nil, errors.New("not a git index (no DIRC signature)")
	}
	if size < int64(12+idLen) {
		return nil, nil, errors.New("git index is truncated")
	}
	return parseIndex(head, size, r, idLen)
}

// objectIDLen returns the length of the object ids of a repository whose configuration (its
// common dir's config file) is config: 32 with extensions.objectFormat = sha256, else 20, as
// git decides it. A config that cannot be read as git reads it gives 20: git refuses such a
// repository, and the index is then read as SHA-1's.
func objectIDLen(config []byte) int {
	es, _ := ParseConfig(config)
	n := sha1.Size
	for _, e := range es {
		if e.Section == "extensions" && !e.HasSub && e.Key == "objectformat" {
			if strings.EqualFold(e.Value, "sha256") {
				n = sha256.Size
			} else {
				n = sha1.Size
			}
		}
	}
	return n
}

// repoIDLen returns objectIDLen of the git directory gd's repository: its common dir's config
// (commondir, beneath ws), or its own.
func repoIDLen(ws, gd string) int {
	cfg := filepath.Join(gd, "config")
	if common, ok, err := commonDir(ws, gd); err == nil && ok && common != "" {
		cfg = filepath.Join(common, "config")
	}
	b, _ := readBeneath(ws, cfg, maxCheckedFile)
	return objectIDLen(b)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// indexExtension is one extension of a git index: its signature and the bytes it takes,
// header included (b[start:end]).
type indexExtension struct {
	sig        string
	start, end int
}

// Index extensions the check models (git's read-cache.c, read_index_extension). It reads the
// entries as git's sequential reader does (those of a split index merged with its shared
// index's: readSplit); of the extensions, it leaves the resolve-undo record (REUC: only
// git checkout -m and update-index --unresolve read it, which show what they bring back) and
// the sparse-index marker (sdir, no content). Every other extension is something git trusts
// over what the entries and the work tree say, which a box can forge (strippedExtensions).
var keptExtensions = map[string]bool{"REUC": true, "sdir": true}

// strippedExtensions says what each extension the check removes from an index the launch
// changed makes git trust; an unknown optional one (an upper-case first letter) git ignores.
var strippedExtensions = map[string]string{
	"TREE": "the cache tree, whose tree ids git status and git diff --cached take for the entries' (a forged one hides a staged change)",
	"UNTR": "the untracked cache, whose lists of untracked files git status trusts while a folder's stat data matches (a forged one hides a new file)",
	"FSMN": "the fsmonitor data, whose entries git takes for unchanged without looking at their files",
	"IEOT": "the index entry offset table, from which git's threaded reader (3 CPUs or more, 30,000 entries or more, or index.threads) reads entries other than the ones in sequence",
	"link": "the split index's link to its shared index (GITDIR/sharedindex.*), which holds most entries: the index is written whole, as git reads it",
	"EOIE": "the end-of-index-entries marker, which makes git's threaded reader read the extensions (and, with IEOT, the entries) from where it says",
}

// parseIndex reads the entries and the extensions of the index of size bytes whose object ids
// are hashLen bytes long, whose first bytes are b (all of them when r is nil): its entries
// must lie in b (errPastHead), and the headers of the extensions past b are read from r.
func parseIndex(b []byte, size int64, r io.ReaderAt, hashLen int) ([]indexEntry, []indexExtension, error) {
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return nil, nil, fmt.Errorf("git index version %d (2, 3 and 4 are read)", version)
	}
	count := binary.BigEndian.Uint32(b[8:12])
	fileEnd := size - int64(hashLen)
	end := len(b)
	if int64(end) >= fileEnd {
		end = int(fileEnd)
	}
	truncated := func(format string, a ...any) error {
		if int64(end) < fileEnd {
			return errPastHead
		}
		return fmt.Errorf(format, a...)
	}
	off := 12
	var out []indexEntry
	var prev []byte
	for i := uint32(0); i < count; i++ {
		start := off
		fixed := 40 + hashLen + 2 // ctime, mtime, dev, ino, mode, uid, gid, size; id; flags
		if off+fixed > end {
			return nil, nil, truncated("git index entry %d is truncated", i)
		}
		e := indexEntry{off: start, mode: binary.BigEndian.Uint32(b[off+24:]), oid: b[off+40 : off+40+hashLen], flagsOff: off + 40 + hashLen}
		e.flags = binary.BigEndian.Uint16(b[e.flagsOff:])
		off += fixed
		if e.flags&ceExtended != 0 {
			if version < 3 || off+2 > end {
				return nil, nil, truncated("git index entry %d: extended flags in a version %d index", i, version)
			}
			e.ext, e.extOff = binary.BigEndian.Uint16(b[off:]), off
			off += 2
		}
		var name []byte
		if version == 4 {
			strip, n, ok := indexVarint(b[off:end])
			if !ok || strip > uint64(len(prev)) {
				return nil, nil, truncated("git index entry %d: bad path prefix", i)
			}
			off += n
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return nil, nil, truncated("git index entry %d is truncated", i)
			}
			name = append(append([]byte(nil), prev[:len(prev)-int(strip)]...), b[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(b[off:end], 0)
			if nul < 0 {
				return nil, nil, truncated("git index entry %d is truncated", i)
			}
			name = b[off : off+nul]
			// 1 to 8 NULs pad the entry to a multiple of 8 bytes.
			off = start + (off-start+nul+8)&^7
			if off > end {
				return nil, nil, truncated("git index entry %d is truncated", i)
			}
		}
		if nl := int(e.flags & 0x0fff); nl < 0x0fff && nl != len(name) {
			return nil, nil, fmt.Errorf("git index entry %d: name length %d, path of %d bytes", i, nl, len(name))
		}
		prev = name
		e.name = string(name)
		out = append(out, e)
	}
	// Extensions: a 4-byte signature and a 4-byte size each, as git's sequential reader walks
	// them. A split index (link) keeps most entries, and the flags set on them, in a
	// sharedindex file this check does not read.
	var exts []indexExtension
	for int64(off)+8 <= fileEnd {
		hdr := make([]byte, 8)
		if off+8 <= len(b) {
			copy(hdr, b[off:])
		} else if _, err := r.ReadAt(hdr, int64(off)); err != nil {
			return nil, nil, fmt.Errorf("read the index's extensions: %w", err)
		}
		sig := string(hdr[:4])
		size := int64(binary.BigEndian.Uint32(hdr[4:]))
		switch {
		case int64(off)+8+size > fileEnd:
			return nil, nil, fmt.Errorf("the index's %q extension runs past its end", sig)
		case !keptExtensions[sig] && strippedExtensions[sig] == "" && (sig[0] < 'A' || sig[0] > 'Z'):
			// git 2.39 refuses an index with a required extension it does not know; a later
			// git may read it.
			return nil, nil, fmt.Errorf("the index has a %q extension, which this check does not know", sig)
		}
		exts = append(exts, indexExtension{sig, off, off + 8 + int(size)})
		off += 8 + int(size)
	}
	return out, exts, nil
}

// indexVarint decodes the offset encoding of index v4 path prefixes (git's decode_varint).
func indexVarint(b []byte) (uint64, int, bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	c := b[0]
	val := uint64(c & 127)
	n := 1
	for c&128 != 0 {
		if n >= len(b) || n > 9 {
			return 0, 0, false
		}
		val++
		c = b[n]
		n++
		val = val<<7 + uint64(c&127)
	}
	return val, n, true
}

// workspaceIndex returns the path of the index of the workspace's own git directory (.git, or
// the gitdir a .git file names beneath the workspace), or "".
func workspaceIndex(ws string) string { return repoIndex(ws, ws) }

// repoIndex returns the path of the index of the repository whose work tree is top (beneath
// ws): top/.git/index, or the index of the gitdir a .git file names beneath ws; "" without one.
func repoIndex(ws, top string) string {
	dg := filepath.Join(top, ".git")
	fi, err := os.Lstat(dg)
	switch {
	case err != nil:
		return ""
	case fi.IsDir():
		return filepath.Join(dg, "index")
	}
	if gd, ok := dotGitTarget(ws, dg); ok {
		return filepath.Join(gd, "index")
	}
	return ""
}

// gitIndex is an index the watch reads, read: the workspace's own, or that of a repository a
// gitlink of another leads to (a submodule, or a nested repository added with git add).
type gitIndex struct {
	path string // the index file
	top  string // its work tree
	// rel is top relative to the workspace, with a trailing slash ("" for the workspace).
	rel string
	b   []byte
	// mtime is the modification time of the index file b was read from (zero: unknown).
	mtime   time.Time
	entries []indexEntry
	exts    []indexExtension
	hashLen int
}

// key is the workspace-relative path of the entry name.
func (ix *gitIndex) key(name string) string { return ix.rel + name }

// maxIndexDepth bounds how deep gitlinks are followed (a submodule of a submodule …).
const maxIndexDepth = 4

// readIndexes reads the workspace's index, those of the repositories the workspace scan found
// (tops: nested clones a gitlink does not lead to, in an ignored lib/ or in a workspace that
// is no repository itself, linked worktrees and submodules; review 14, F2) and, through the
// gitlinks of each one read, the indexes of the repositories checked out there, and those of
// each one's linked worktrees (their indexes lie in the common dir, in the workspace, wherever
// their work trees lie: the box writes them): the host's git status at the top enters each
// gitlink, and so does git diff; in a linked worktree or a nested clone it reads that one's
// index. Each index's work tree is the one git takes: core.worktree when the repository's
// configuration names one beneath the workspace (workTree). Those the scan found are bounded
// by the scan; the others are followed
// at most maxIndexDepth deep, at most maxGitDirs of them. fn gets each index read, or why it
// could not be read (an index that does not exist is skipped). It returns the git directories
// of those repositories (the index's folder), with or without an index.
func readIndexes(ws string, tops []string, fn func(ix *gitIndex, err error)) []string {
	type todo struct {
		top string
		// index is the index's path when it is not the one top's .git leads to (a linked
		// worktree's outside the workspace, whose .git the daemon does not follow).
		index string
		depth int
	}
	queue := []todo{{ws, "", 0}}
	for _, top := range tops {
		queue = append(queue, todo{top, "", 0})
	}
	seen := map[string]bool{}
	followed := 0
	var gitdirs []string
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if t.depth > 0 {
			if followed >= maxGitDirs {
				continue
			}
			followed++
		}
		p := t.index
		if p == "" {
			p = repoIndex(ws, t.top)
		}
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		gitdirs = append(gitdirs, filepath.Dir(p))
		if t.index == "" {
			t.top = workTree(ws, filepath.Dir(p), t.top)
		}
		ix := &gitIndex{path: p, top: t.top}
		if t.top != ws {
			r, _ := filepath.Rel(ws, t.top)
			ix.rel = filepath.ToSlash(r) + "/"
		}
		ix.hashLen = repoIDLen(ws, filepath.Dir(p))
		var err error
		ix.b, ix.mtime, ix.entries, ix.exts, err = readIndex(ws, p, ix.hashLen)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			fn(ix, fmt.Errorf("%s: %w", p, err))
			continue
		}
		fn(ix, nil)
		if t.depth >= maxIndexDepth {
			continue
		}
		// The linked worktrees of the repository whose work trees lie in the workspace: the
		// host's git status there reads GITDIR/worktrees/<id>/index (review 13, F1 in a
		// worktree added with git worktree add).
		for _, w := range linkedWorktrees(ws, filepath.Dir(p)) {
			if w.top != t.top {
				queue = append(queue, todo{w.top, w.index, t.depth + 1})
			}
		}
		for _, e := range ix.entries {
			if e.gitlink() {
				sub := filepath.Join(t.top, filepath.FromSlash(e.name))
				if within(sub, ws) && sub != t.top {
					queue = append(queue, todo{sub, "", t.depth + 1})
				}
			}
		}
	}
	return gitdirs
}

// linkedWorktree is a linked worktree of a repository: its work tree, and its index when the
// work tree lies outside the workspace ("": the one its .git file names, repoIndex).
type linkedWorktree struct{ top, index string }

// linkedWorktrees returns the linked worktrees of the repository whose git directory is gd:
// each COMMON/worktrees/<id>/gitdir names its worktree's .git file, read as git's
// get_linked_worktree reads it (trailing blanks dropped, then the "/.git"; a relative path is
// relative to the worktree's gitdir). COMMON is gd's common dir when it lies beneath ws, else
// gd. A work tree beneath ws has the index its own .git file names (repoIndex), which is what
// the host's git reads there; one outside the workspace (git worktree add ../wt) has
// COMMON/worktrees/<id>/index, which lies in the workspace and which the box can write, while
// the daemon does not follow the .git of a folder the box cannot reach.
func linkedWorktrees(ws, gd string) []linkedWorktree {
	if c, ok, _ := commonDir(ws, gd); ok {
		gd = c
	}
	dir := filepath.Join(gd, "worktrees")
	names, err := readDirNames(dir)
	if err != nil {
		return nil
	}
	var out []linkedWorktree
	for _, n := range names {
		admin := filepath.Join(dir, n)
		b, err := readBeneath(ws, filepath.Join(admin, "gitdir"), maxGitFile)
		if err != nil {
			continue
		}
		p := worktreeTop(admin, b)
		if p == "" {
			continue
		}
		switch {
		case within(p, ws):
			out = append(out, linkedWorktree{top: p})
		default:
			out = append(out, linkedWorktree{top: p, index: filepath.Join(admin, "index")})
		}
	}
	return out
}

// worktreeTop returns the work tree a linked worktree's git directory admin names in its
// gitdir file, whose content is b, as git's get_linked_worktree reads it (trailing blanks and
// the "/.git" dropped, up to a NUL byte; a relative path relative to admin), or "".
func worktreeTop(admin string, b []byte) string {
	p := cString(strings.TrimSuffix(strings.TrimRight(string(b), " \t\n\r"), "/.git"))
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(admin, p)
	}
	return filepath.Clean(p)
}

// workTree returns the work tree git takes for the git directory gd, found at top: the
// core.worktree of its configuration (the common dir's config, and the gitdir's
// config.worktree with extensions.worktreeConfig; a relative one is relative to gd) when that
// lies beneath ws, else top. A repository at meta/ whose core.worktree is ../src has its index
// entries at src/: the checks read the files there, as the host's git in meta/ does. One that
// leads out of the workspace is a finding of the scan (pathKeysOutside), moved aside.
func workTree(ws, gd, top string) string {
	es := repoConfig(ws, gd)
	wt := ""
	for _, e := range es {
		if e.Section == "core" && !e.HasSub && e.Key == "worktree" {
			wt = e.Value
		}
	}
	if wt == "" {
		return top
	}
	if !filepath.IsAbs(wt) {
		wt = filepath.Join(gd, wt)
	}
	if wt = filepath.Clean(wt); within(wt, ws) && isDir(wt) {
		return wt
	}
	return top
}

// repoConfig returns the configuration of the git directory gd (beneath ws) as the host's git
// reads it there, includes left out: the common dir's config, then the gitdir's config.worktree
// with extensions.worktreeConfig.
func repoConfig(ws, gd string) []ConfigEntry {
	cfg := filepath.Join(gd, "config")
	if common, ok, _ := commonDir(ws, gd); ok && common != "" {
		cfg = filepath.Join(common, "config")
	}
	b, _ := readBeneath(ws, cfg, maxCheckedFile)
	es, _ := ParseConfig(b)
	if configBool(es, "extensions", "worktreeconfig") {
		if b, err := readBeneath(ws, filepath.Join(gd, "config.worktree"), maxCheckedFile); err == nil {
			more, _ := ParseConfig(b)
			es = append(es, more...)
		}
	}
	return es
}

// sparseIndexKept reports whether the host's git keeps the sparse index of the git directory
// gd as it is, and shows a file written beneath a directory entry: its configuration (the
// repository's, which the box cannot write) turns on core.sparseCheckout (git then clears the
// skip-worktree flag of a present file, a directory entry's expanded too) and index.sparse (git
// then reads directory entries as such), and leaves sparse.expectFilesOutsideOfPatterns off
// (which keeps present files flagged). Otherwise git expands each directory entry into the
// files of its tree, every one flagged skip-worktree, and shows no change of them (review 19b).
func sparseIndexKept(ws, gd string) bool {
	es := repoConfig(ws, gd)
	return configBool(es, "core", "sparsecheckout") && configBool(es, "index", "sparse") &&
		!configBool(es, "sparse", "expectfilesoutsideofpatterns")
}

// maxNamedBeneath bounds the files an alert on a directory entry names beneath it.
const maxNamedBeneath = 20

// filesBeneath returns the workspace-relative paths of at most maxNamedBeneath files (not
// folders; no symlink followed) beneath the folder dir of the work tree top, whose
// workspace-relative path, with a trailing slash, is rel.
func filesBeneath(top, rel, dir string) []string {
	var out []string
	root := filepath.Join(top, filepath.FromSlash(strings.TrimSuffix(dir, "/")))
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
		return nil
	}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if len(out) == maxNamedBeneath {
			return filepath.SkipAll
		}
		if r, err := filepath.Rel(top, p); err == nil {
			out = append(out, rel+filepath.ToSlash(r))
		}
		return nil
	})
	return out
}

// configBool reports whether the last value of section.key (no subsection) in es is git's
// true (a bare key, "true", "yes", "on", or a number other than 0).
// configString returns the last value of section.key (no subsection) in es, as git reads it.
func configString(es []ConfigEntry, section, key string) string {
	v := ""
	for _, e := range es {
		if e.Section == section && !e.HasSub && e.Key == key {
			v = e.Value
		}
	}
	return v
}

func configBool(es []ConfigEntry, section, key string) bool {
	v := false
	for _, e := range es {
		if e.Section == section && !e.HasSub && e.Key == key {
			switch n, err := strconv.ParseInt(e.Value, 10, 64); {
			case err == nil:
				v = n != 0
			default:
				v = slices.Contains([]string{"true", "yes", "on"}, strings.ToLower(e.Value))
			}
		}
	}
	return v
}

// readHidden returns the hidden entries of the workspace's indexes (workspace-relative path →
// flag), why an index could not be read (by index path), and the entries at the protected
// paths (protected: index path → entry name → entrySig).
func readHidden(ws string, tops []string, protected func(string) bool) (map[string]string, map[string]string, map[string]map[string]string) {
	flags, errs, prot := map[string]string{}, map[string]string{}, map[string]map[string]string{}
	readIndexes(ws, tops, func(ix *gitIndex, err error) {
		if err != nil {
			errs[ix.path] = err.Error()
			return
		}
		for _, e := range ix.entries {
			if h := e.hidden(); h.flag != "" && e.name != "" {
				flags[ix.key(e.name)] = h.flag
			}
			if e.name != "" && protected != nil && protected(ix.key(e.name)) {
				if prot[ix.path] == nil {
					prot[ix.path] = map[string]string{}
				}
				prot[ix.path][e.name] = entrySig(e)
			}
		}
	})
	if len(prot) == 0 {
		prot = nil
	}
	return nilIfEmpty(flags), nilIfEmpty(errs), prot
}

// entrySig names what an index entry gives git: its stage, mode and object id.
func entrySig(e indexEntry) string {
	return fmt.Sprintf("%d %o %x", (e.flags&ceStageMask)>>12, e.mode, e.oid)
}

// protectedRoots returns the workspace-relative paths of the roots of the snapshot beneath the
// workspace, outside its .git: the protected files and folders.
func (s *State) protectedRoots() []string {
	var rels []string
	for _, r := range s.Roots {
		rel, err := filepath.Rel(s.Workspace, r.Path)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || rel == ".git" || strings.HasPrefix(rel, ".git/") {
			continue
		}
		rels = append(rels, rel)
	}
	return rels
}

// protectedRel returns a reporter of the workspace-relative paths at or beneath a protected
// root of s (a pinned file or folder beneath the workspace, outside .git), or on the way to
// one: an index entry there (a symlink .claude, a sparse directory entry) decides what a
// checkout puts at the protected path beneath it (review 32 F, F1).
func (s *State) protectedRel() func(string) bool {
	rels := s.protectedRoots()
	return func(p string) bool {
		return slices.ContainsFunc(rels, func(r string) bool {
			return p == r || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/")
		})
	}
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// indexEdit is what editIndex changes in an index.
type indexEdit struct {
	// flagged are the entries whose skip-worktree and assume-unchanged flags are cleared.
	flagged []string
	// zero are the entries whose stat data is cleared.
	zero []string
	// strip drops every extension but keptExtensions.
	strip bool
}

// indexEdited is what editIndex changed: the entries whose flags it cleared and whose stat
// data it cleared, and the extensions it dropped.
type indexEdited struct {
	cleared, zeroed, stripped []string
	// beside: written beside git's lock, which a host git may rename over it (editIndex).
	beside bool
}

// editedIndex returns the index b with ed applied (writeEditedIndex).
func editedIndex(b []byte, hashLen int, ed indexEdit, mtime time.Time) ([]byte, indexEdited, error) {
	var w bytes.Buffer
	done, err := writeEditedIndex(&w, b, int64(len(b)), nil, hashLen, ed, mtime)
	if err != nil {
		return nil, done, err
	}
	return w.Bytes(), done, nil
}

// writeEditedIndex writes to w the index of size bytes whose first bytes are head (all of them
// when r is nil; the rest is read from r) with ed applied: the flags of the entries named in
// ed.flagged cleared (those it flags), the stat data of those named in ed.zero cleared (git then
// compares their files' content again, as it does for an entry it smudged as racily clean), the
// extensions but keptExtensions dropped when ed.strip is set, and its trailing checksum
// recomputed under the repository's hash (left zero when index.skipHash left it so). The
// entries keep their bytes otherwise, so that git reads them as they were, and extensions past
// head are copied from r, never held whole. The index written is newer than the one read (whose
// mtime is mtime; zero: unknown): entries git compared by content because they were not older
// than it (racily clean) have their stat data cleared too, as git's own write smudges them, so
// that the new index's time does not make git trust their stat data.
func writeEditedIndex(w io.Writer, head []byte, size int64, r io.ReaderAt, hashLen int, ed indexEdit, mtime time.Time) (indexEdited, error) {
	var done indexEdited
	es, exts, err := indexContentsAt(head, size, r, hashLen)
	if err != nil {
		return done, err
	}
	byName := make(map[string]indexEntry, len(es))
	for _, e := range es {
		if e.name != "" && e.flags&ceStageMask == 0 {
			byName[e.name] = e
		}
	}
	fileEnd := size - int64(hashLen)
	nb := bytes.Clone(head[:min(int64(len(head)), fileEnd)])
	for _, n := range ed.flagged {
		h := byName[n].hidden()
		if h.flag == "" {
			continue
		}
		for _, f := range h.bits {
			binary.BigEndian.PutUint16(nb[f.off:], binary.BigEndian.Uint16(nb[f.off:])&^f.bit)
		}
		done.cleared = append(done.cleared, n)
	}
	zeroStat := func(e indexEntry) {
		// Everything but the mode: ctime, mtime, dev, ino (24 bytes); uid, gid, size (12).
		clear(nb[e.off : e.off+24])
		clear(nb[e.off+28 : e.off+40])
	}
	for _, n := range ed.zero {
		if e, ok := byName[n]; ok {
			zeroStat(e)
			done.zeroed = append(done.zeroed, n)
		}
	}
	if !mtime.IsZero() {
		for _, e := range es {
			// git's is_racy_timestamp, without the nanoseconds (git built without USE_NSEC
			// takes a whole second for racy): gitlinks are never racy.
			if !e.gitlink() && int64(statField(head, e, 2)) >= mtime.Unix() {
				zeroStat(e)
			}
		}
	}
	// What is written: parts of nb, then of the file (head, or r past it).
	type part struct{ start, end int64 }
	parts := []part{{0, fileEnd}}
	if ed.strip && len(exts) > 0 {
		parts = []part{{0, int64(exts[0].start)}}
		for _, x := range exts {
			if keptExtensions[x.sig] {
				parts = append(parts, part{int64(x.start), int64(x.end)})
			} else {
				done.stripped = append(done.stripped, x.sig)
			}
		}
	}
	var sum hash.Hash = sha1.New()
	if hashLen == sha256.Size {
		sum = sha256.New()
	}
	out := io.MultiWriter(w, sum)
	for _, p := range parts {
		if p.start < int64(len(nb)) {
			if _, err := out.Write(nb[p.start:min(p.end, int64(len(nb)))]); err != nil {
				return done, err
			}
			p.start = min(p.end, int64(len(nb)))
		}
		if p.start < p.end {
			if n, err := io.Copy(out, io.NewSectionReader(r, p.start, p.end-p.start)); err != nil || n != p.end-p.start {
				return done, fmt.Errorf("copy the index's extensions: %d of %d bytes: %v", n, p.end-p.start, err)
			}
		}
	}
	trailer := make([]byte, hashLen)
	if fileEnd+int64(hashLen) <= int64(len(head)) {
		copy(trailer, head[fileEnd:])
	} else if _, err := r.ReadAt(trailer, fileEnd); err != nil {
		return done, fmt.Errorf("read the index's checksum: %w", err)
	}
	if !allZero(trailer) {
		trailer = sum.Sum(nil)
	}
	_, err = w.Write(trailer)
	return done, err
}

// verifyIndexes checks the indexes readIndexes reads. It reports each entry newly flagged
// skip-worktree or assume-unchanged whose file exists in the work tree (at exit, whether it
// exists or not: the next launch's snapshot would take the flag for the user's), each entry
// flagged before the launch whose file the launch changed and is not the entry's object
// (flaggedChanged), and each entry whose stat data makes git take a file the launch changed for
// unchanged while the file's content is not the entry's object (a box that rewrote the entry's
// stat data, or its object id, after editing the file: review 12, F9's flagless variant), and
// fixes them in place under git's lock (an entry whose flag goes has its stat data cleared
// too); and it reports an index it cannot read (once per cause). It returns the transitions
// and the git directories of the indexes (readIndexes). At exit (the box's processes are
// gone), an index whose lock is held is written beside the lock (editIndex) and recorded in
// s.lockedIndexes, for RecheckIndexes once the lock has gone.
func (s *State) verifyIndexes(tops []string, exit bool) ([]Transition, []string) {
	var out []Transition
	seen, stale, errs := map[string]string{}, maps.Clone(s.Stale), map[string]string{}
	if stale == nil {
		stale = map[string]string{}
	}
	since := s.since()
	stripLeft := map[string]string{}
	gitdirs := readIndexes(s.Workspace, tops, func(ix *gitIndex, err error) {
		if tr, ok := s.asideUnchecked(ix.path, err); ok {
			out = append(out, tr)
			return
		}
		if err != nil {
			msg := err.Error()
			errs[ix.path] = msg
			if s.IndexErrs[ix.path] != msg {
				out = append(out, Transition{Kind: Modified, Path: ix.path, Alert: true, Detail: "the index could not be checked (the skip-worktree and assume-unchanged flags, and stat data that hides a changed file): " + msg})
			}
			return
		}
		// A sparse index's directory entries (a folder the cone leaves out) are git's to
		// expand: kept when the host's configuration keeps the sparse index (sparseIndexKept;
		// git shows a file written beneath then), and otherwise those the launch introduced
		// are forged, as the host's git expands them into files flagged skip-worktree: at
		// exit the index goes aside (review 19b).
		sparseKept := sparseIndexKept(s.Workspace, filepath.Dir(ix.path))
		var dirs []string
		for _, e := range ix.entries {
			if e.mode&0o170000 != 0o040000 || e.name == "" || sparseKept || s.Hidden[ix.key(e.name)] == hiddenSkipWorktree {
				continue
			}
			dirs = append(dirs, e.name)
		}
		if len(dirs) > 0 && exit {
			var files []string
			for _, d := range dirs {
				files = append(files, filesBeneath(ix.top, ix.rel, d)...)
			}
			d := fmt.Sprintf("the index holds sparse directory entries the launch introduced (%s), while the repository's configuration keeps no sparse index (core.sparseCheckout and index.sparse): the host's git expands each into the files of its tree flagged skip-worktree, and git status, git diff, commit -a and stash skip them", strings.Join(dirs, ", "))
			if len(files) > 0 {
				d += fmt.Sprintf("; files beneath them in the work tree, whose changes were hidden from review: %s", strings.Join(files, ", "))
				if len(files) == maxNamedBeneath {
					d += ", …"
				}
			}
			aside, merr := s.moveAside(ix.path)
			if merr == nil {
				out = append(out, Transition{Kind: Modified, Path: ix.path, Alert: true, Detail: d + fmt.Sprintf(
					"; it was moved aside to %s: run %s reset to make it again from HEAD (git status then shows those files' changes; what was staged is in the file moved aside)", aside, ixGit(ix))})
				return
			}
			out = append(out, Transition{Kind: Modified, Path: ix.path, Alert: true, Detail: d + fmt.Sprintf(
				"; it could not be moved aside (%v): move it aside yourself and run %s reset", merr, ixGit(ix))})
		}
		// fresh: flagged during the launch, the file there; absent: flagged during the launch,
		// no file (cleared at exit); before: flagged before the launch, of which carried are
		// those whose file the launch changed so that it is not the entry's object.
		var fresh, again, absent, before []string
		for _, e := range ix.entries {
			h := e.hidden()
			if h.flag == "" || e.name == "" {
				continue
			}
			k := ix.key(e.name)
			if e.mode&0o170000 == 0o040000 && s.Hidden[k] != h.flag {
				// A directory entry: git's to expand (above); its flag stays.
				continue
			}
			switch s.Hidden[k] {
			case h.flag:
				seen[k] = h.flag
				before = append(before, e.name)
				continue
			case h.flag + leftStale:
				// Reported, and left so because the index was locked: cleared again quietly.
				again = append(again, e.name)
				continue
			}
			if _, err := os.Lstat(filepath.Join(ix.top, filepath.FromSlash(e.name))); err != nil {
				// A sparse checkout flags the files it leaves out: while the box runs, its git
				// may. At exit the flag is the box's, and it goes: the next launch's snapshot
				// would take it for the user's, and a file written there then would be hidden.
				if exit {
					absent = append(absent, e.name)
				}
				continue
			}
			fresh = append(fresh, e.name)
		}
		if exit {
			out = append(out, s.stagedProtected(ix)...)
		}
		carried := flaggedChanged(s.Workspace, ix, since, before)
		// Reported once per file and content (a file git converts, a filter such as LFS, that
		// the box checked out looks the same at every check); one left so because the index
		// was locked is cleared again quietly.
		var forged, retry []string
		sig := map[string]string{}
		for _, f := range staleEntries(s.Workspace, ix, since, s.memo) {
			sig[f.name] = f.sig
			switch s.Stale[ix.key(f.name)] {
			case f.sig:
			case f.sig + leftStale:
				retry = append(retry, f.name)
			default:
				forged = append(forged, f.name)
			}
		}
		// Extensions git trusts that the check does not model, in an index the launch changed:
		// removed at exit. While the box runs they stay: each of its commits writes the cache
		// tree, and removing it then, under git's lock, made the box's next git fail on
		// index.lock (TestBoxGitNeverMeetsTheCheckLock).
		// Changed: the index's own ctime (a symlink put there, or a file renamed or linked
		// there, is new) or, through a symlink, its target's. Its target's alone let a later
		// launch point .git/index at a file an earlier one had forged: the check at exit of
		// the later one took the cache tree for the user's (review 20,
		// TestAttackIndexSymlinkKeepsCacheTree).
		var strip []string
		if exit && (s.changedSince(ix.path) || targetChangedSince(ix.path, since)) {
			for _, x := range ix.exts {
				if !keptExtensions[x.sig] {
					strip = append(strip, x.sig)
				}
			}
		}
		// A cache tree that names, for a folder it takes as valid, another tree than the one
		// its entries make (an honest one never does): removed at any check, the box running
		// or not (git's lock is taken then only for a forged one).
		forgedTree := forgedCacheTree(s.Workspace, ix)
		if len(forgedTree) > 0 && len(strip) == 0 {
			for _, x := range ix.exts {
				if !keptExtensions[x.sig] {
					strip = append(strip, x.sig)
				}
			}
		}
		if len(fresh)+len(again)+len(absent)+len(carried)+len(forged)+len(retry)+len(strip) == 0 {
			return
		}
		// An entry whose flag goes has its stat data cleared too: a box that also wrote the
		// file's stat data into it would have git take the file for unchanged without the flag.
		unflag := slices.Concat(fresh, again, carried)
		done, cerr := editIndex(s.Workspace, ix.path, indexEdit{flagged: slices.Concat(unflag, absent), zero: slices.Concat(forged, retry, unflag), strip: len(strip) > 0}, exit)
		cleared, zeroed := done.cleared, done.zeroed
		if done.beside {
			if s.lockedIndexes == nil {
				s.lockedIndexes = map[string]bool{}
			}
			s.lockedIndexes[ix.path] = true
		}
		if len(forgedTree) > 0 && slices.Contains(done.stripped, "TREE") {
			out = append(out, forgedTreeTransition(ix, forgedTree))
		}
		if exit && len(strip) > 0 && cerr != nil {
			// Not removed (git's lock could not be taken: a folder the box made unwritable):
			// checked again once the index or its folder changes (RecheckIndexes), and
			// reported once.
			sig := stripSig(ix.path)
			if _, told := s.stripLeft[ix.path]; !told {
				out = append(out, strippedTransition(ix, strip, done.stripped, cerr))
			}
			stripLeft[ix.path] = sig
		} else if len(strip) > 0 && len(done.stripped) > 0 {
			if _, told := s.stripLeft[ix.path]; told {
				out = append(out, Transition{Kind: Modified, Path: ix.path, Detail: "the extensions reported earlier, which could not be removed, were removed: git reads the entries the check read"})
			} else if t := strippedTransition(ix, strip, done.stripped, nil); t.Alert {
				out = append(out, t)
			}
		}
		for _, n := range append(slices.Clip(forged), retry...) {
			stale[ix.key(n)] = sig[n]
			if !slices.Contains(zeroed, n) {
				stale[ix.key(n)] += leftStale
			}
		}
		flag := map[string]string{}
		for _, e := range ix.entries {
			if h := e.hidden(); h.flag != "" {
				flag[e.name] = h.flag
			}
		}
		for _, n := range again {
			if !slices.Contains(cleared, n) {
				seen[ix.key(n)] = flag[n] + leftStale
				continue
			}
			d := fmt.Sprintf("the %s flag reported earlier, which git's lock kept, was cleared: git shows the file's changes as ordinary work", flag[n])
			if done.beside {
				d += besideNote
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(n)), Detail: d})
		}
		for _, n := range fresh {
			k := ix.key(n)
			d := fmt.Sprintf("the index flagged it %s: the host's git status, git diff, commit -a and stash skipped the file, whose changes were hidden from review", flag[n])
			if slices.Contains(cleared, n) {
				d += "; the flag was cleared: git shows the file's changes as ordinary work"
				if done.beside {
					d += besideNote
				}
			} else {
				if cerr != nil {
					d += "; the flag could not be cleared (" + cerr.Error() + ")"
				}
				d += fmt.Sprintf("; run %s update-index --no-%s %q", ixGit(ix), flag[n], n)
				seen[k] = flag[n]
				if cerr != nil {
					seen[k] += leftStale // cleared at the first check that can
				}
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(n)), Alert: true, Detail: d})
		}
		for _, n := range carried {
			k := ix.key(n)
			d := fmt.Sprintf("the index flagged it %s before the launch, and the launch changed the file, which is not the staged object: the host's git status, git diff, commit -a and stash skipped the change", flag[n])
			if slices.Contains(cleared, n) {
				delete(seen, k)
				d += fmt.Sprintf("; the flag was cleared: git shows the file's changes as ordinary work (yours too, if you kept changes of your own under the flag: after review, %s update-index --%s %q sets it again)", ixGit(ix), flag[n], n)
				if done.beside {
					d += besideNote
				}
			} else {
				if cerr != nil {
					d += "; the flag could not be cleared (" + cerr.Error() + ")"
					seen[k] = flag[n] + leftStale // cleared at the first check that can
				}
				d += fmt.Sprintf("; run %s update-index --no-%s %q", ixGit(ix), flag[n], n)
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(n)), Alert: true, Detail: d})
		}
		for _, n := range absent {
			d := fmt.Sprintf("the index flagged it %s while the box ran, and the file is gone: the host's git status did not show its deletion, and the flag would hide a file written there later", flag[n])
			if slices.Contains(cleared, n) {
				d += fmt.Sprintf("; the flag was cleared: git shows the deletion (%s restore %q brings the file back)", ixGit(ix), n)
				if done.beside {
					d += besideNote
				}
			} else {
				if cerr != nil {
					d += "; the flag could not be cleared (" + cerr.Error() + ")"
					seen[ix.key(n)] = flag[n] + leftStale // cleared at the first check that can
				}
				d += fmt.Sprintf("; run %s update-index --no-%s %q", ixGit(ix), flag[n], n)
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(n)), Alert: true, Detail: d})
		}
		for _, n := range forged {
			d := "the index's entry for the file claimed it unchanged since it was staged (its stat data matched the file, which the launch changed), while its content is not the staged object: the host's git status and git diff did not show the change"
			if slices.Contains(zeroed, n) {
				d += "; the entry's stat data was cleared: git compares the file's content again and shows the change"
				if done.beside {
					d += besideNote
				}
			} else {
				if cerr != nil {
					d += "; the stat data could not be cleared (" + cerr.Error() + ")"
				}
				d += fmt.Sprintf("; run touch %q (git then compares the file's content again)", filepath.Join(ix.top, filepath.FromSlash(n)))
			}
			out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(n)), Alert: true, Detail: d})
		}
	})
	s.Hidden, s.Stale, s.IndexErrs = nilIfEmpty(seen), nilIfEmpty(stale), nilIfEmpty(errs)
	s.stripLeft = nilIfEmpty(stripLeft)
	return out, gitdirs
}

// asideUnchecked moves aside the index at path, written while the box ran, whose entries the
// check cannot hold (err: errIndexEntries, or errSplitIndex: a shared index it cannot read or
// merge, which git may read): git would read flags, stat data and a cache tree no one checked.
// git reset rebuilds it. It reports whether it did so, with the alert.
func (s *State) asideUnchecked(path string, err error) (Transition, bool) {
	if !errors.Is(err, errIndexEntries) && !errors.Is(err, errSplitIndex) || !s.changedSince(path) {
		return Transition{}, false
	}
	aside, merr := s.moveAside(path)
	if merr != nil {
		return Transition{}, false
	}
	return Transition{Kind: Modified, Path: path, Alert: true, Detail: fmt.Sprintf(
		"the index, written while the box ran, could not be checked (%v): it was moved aside to %s; run git reset to make it again from HEAD (what was staged is in the file moved aside)", err, aside)}, true
}

// forgedCacheTree returns the folders the cache tree of ix names forged (cacheTreeForged,
// reading a tree that differs from the entries' from the repository's objects: repoTrees);
// none for one whose cache tree lies past what was read.
func forgedCacheTree(ws string, ix *gitIndex) []string {
	split := slices.ContainsFunc(ix.exts, func(x indexExtension) bool { return x.sig == "link" })
	for _, x := range ix.exts {
		if x.sig != "TREE" {
			continue
		}
		if split {
			// A split index: ix.b and its entries are the merged index git reads; the cache
			// tree lies in the split file's own bytes. Before, it went unchecked while the box
			// ran, and one git update-index --split-index carried review 20's forged cache tree
			// into the user's commit (review 20b, TestAttackSplitIndexCacheTreeCommittedWhileBoxRuns).
			b, err := readIndexRange(ws, ix.path, x.start+8, x.end)
			if err != nil {
				return []string{"/"} // unreadable: taken for forged, and removed
			}
			return cacheTreeForged(b, ix.entries, ix.hashLen, repoTrees(ws, ix))
		}
		if x.end <= len(ix.b) {
			return cacheTreeForged(ix.b[x.start+8:x.end], ix.entries, ix.hashLen, repoTrees(ws, ix))
		}
	}
	return nil
}

// repoTrees lists a tree of the repository whose index ix is (lsTree), from the objects folder
// of its common dir (the one its commondir file names, beneath ws) or of its own git
// directory. A common dir out of ws is not read: its trees cannot be listed.
func repoTrees(ws string, ix *gitIndex) treeLister {
	return func(oid []byte) ([]treeItem, error) {
		gd := filepath.Dir(ix.path)
		common, ok, err := commonDir(ws, gd)
		switch {
		case err != nil:
			return nil, err
		case common != "" && !ok:
			return nil, fmt.Errorf("the common dir %s %w", common, errOutside)
		case common != "":
			gd = common
		}
		return lsTree(filepath.Join(gd, "objects"), oid, ix.hashLen)
	}
}

// forgedTreeTransition is the alert on the forged cache tree of ix, removed.
func forgedTreeTransition(ix *gitIndex, folders []string) Transition {
	return Transition{Kind: Modified, Path: ix.path, Alert: true, Detail: fmt.Sprintf(
		"the index's cache tree named, for %s, trees that are not those of the entries beneath: the host's next git commit would have written them, whatever the entries hold, while git status and git diff --cached showed nothing; it was removed: git reads the entries the check read", strings.Join(folders, ", "))}
}

// verifyCacheTrees checks the cache tree of the index of each repository top among dirs
// (folders an event named) whose index changed since this check last read it, and removes a
// forged one (forgedCacheTree) under git's lock: while the box runs, the periodic check of a
// workspace the events cover reads no index, and the host's git commit took the trees a box's
// cache tree named (review 20, TestAttackCacheTreeCommittedWhileBoxRuns). One that cannot be
// removed now (a git at work) is checked again at the next event. An index written while the
// box ran whose entries it cannot read (asideUnchecked) goes aside, as at a full check.
func (s *State) verifyCacheTrees(dirs []string) []Transition {
	var out []Transition
	for _, d := range dirs {
		p := repoIndex(s.Workspace, d)
		fi, err := os.Stat(p)
		if p == "" || err != nil {
			continue
		}
		_, _, ct := identity(fi)
		sig := fmt.Sprintf("%d %d", ct, fi.Size())
		if s.treeSeen[p] == sig {
			continue
		}
		ix := &gitIndex{path: p, top: d, hashLen: repoIDLen(s.Workspace, filepath.Dir(p))}
		ix.b, ix.mtime, ix.entries, ix.exts, err = readIndex(s.Workspace, p, ix.hashLen)
		if tr, ok := s.asideUnchecked(p, err); ok {
			// Its cache tree cannot be checked against entries the check cannot read, and git
			// reads them: before, it stayed while the box ran (a shared index behind an
			// absolute symlink, TestSplitIndexSharedUnreadableWhileBoxRuns).
			out = append(out, tr)
			continue
		}
		if err != nil {
			continue // the full checks report it
		}
		if f := forgedCacheTree(s.Workspace, ix); len(f) > 0 {
			done, err := editIndex(s.Workspace, p, indexEdit{strip: true}, false)
			if err != nil || !slices.Contains(done.stripped, "TREE") {
				continue
			}
			out = append(out, forgedTreeTransition(ix, f))
			continue
		}
		if s.treeSeen == nil {
			s.treeSeen = map[string]string{}
		}
		s.treeSeen[p] = sig
	}
	return out
}

// targetChangedSince reports whether the index at p is a symlink whose target's ctime is not
// older than since.
func targetChangedSince(p string, since int64) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	_, _, ct := identity(fi)
	return ct >= since
}

// stripSig is what RecheckIndexes compares to know whether an index whose extensions could not
// be removed, or its folder, has changed since: their ctimes (chmod changes the folder's).
func stripSig(p string) string {
	sig := ""
	for _, q := range []string{p, filepath.Dir(p)} {
		if fi, err := os.Lstat(q); err == nil {
			_, _, ct := identity(fi)
			sig += fmt.Sprintf("%d ", ct)
		}
	}
	if fi, err := os.Stat(p); err == nil {
		_, _, ct := identity(fi)
		sig += fmt.Sprint(ct)
	}
	return sig
}

// ixGit is the git command line an alert names for ix: git, or git -C TOP for a repository
// other than the workspace's.
func ixGit(ix *gitIndex) string {
	if ix.rel == "" {
		return "git"
	}
	return fmt.Sprintf("git -C %q", ix.top)
}

// besideNote ends the alert on an index written beside git's lock (editIndex).
const besideNote = " (git's lock index.lock was held when the box had ended: the index was written beside it, and it is checked again once the lock has gone, as a git that held it puts back the index it read; a lock no git holds is the box's: remove it)"

// strippedTransition reports the extensions of ix an index check removed (stripped) or meant
// to (strip, cerr why it could not): an alert naming what each made git trust. The cache tree
// alone (TREE), which every git commit and git add in the box writes and git rebuilds at the
// next commit, is removed quietly (Alert false: the caller reports nothing). One that could
// not be removed is an alert, the cache tree alone too: the host's next git commit would take
// the trees it names for the entries' (review 20, TestAttackCacheTreeKeptWhenStripFails).
func strippedTransition(ix *gitIndex, strip, stripped []string, cerr error) Transition {
	var what []string
	tree := false
	for _, x := range slices.Compact(slices.Sorted(slices.Values(strip))) {
		w := strippedExtensions[x]
		if w == "" {
			w = "an extension git ignores"
		}
		tree = tree || x == "TREE"
		what = append(what, x+": "+w)
	}
	d := "the index, written while the box ran, carried extensions that git trusts and this check does not read (" + strings.Join(what, "; ") + ")"
	if cerr == nil {
		d += "; they were removed (git rebuilds what it needs): git reads the entries the check read"
		alert := slices.ContainsFunc(strip, func(x string) bool { return x != "TREE" && x != "link" })
		return Transition{Kind: Modified, Path: ix.path, Alert: alert, Detail: d}
	}
	g := ixGit(ix)
	d += fmt.Sprintf("; they could not be removed (%v): once no git is at work and the folder is writable again (the check tries again when it changes), run %s", cerr, removeExtensionsCommand(g, tree))
	if tree {
		d += " (the cache tree: without it, the host's next git commit would write the trees it names, whatever the entries hold; git status and git diff --cached do not show them)"
	}
	return Transition{Kind: Modified, Path: ix.path, Alert: true, Detail: d}
}

// removeExtensionsCommand is the command line an alert names that removes the extensions the
// check removes, with git (ixGit): update-index --force-write-index drops the untracked
// cache, the offset table and the fsmonitor data but keeps the cache tree, which only an entry
// written again invalidates; writing every entry again (ls-files -s into update-index
// --index-info) keeps what is staged. Both read the entries one-threaded, as the check does.
func removeExtensionsCommand(g string, tree bool) string {
	c := g + " -c index.threads=1 update-index --no-untracked-cache --force-write-index"
	if tree {
		c += fmt.Sprintf(" && %s -c index.threads=1 ls-files -s -z | %s -c index.threads=1 update-index -z --index-info", g, g)
	}
	return c
}

// leftStale marks, in State.Stale, an entry reported whose stat data could not be cleared.
const leftStale = " left"

// since is the ctime (ns) from which a file counts as changed during the launch: a second
// before the snapshot (the kernel's coarse clock may stamp a file a little before the time a
// later read of the clock gives); 0 when Started is unknown (every file).
func (s *State) since() int64 {
	if s.Started.IsZero() {
		return 0
	}
	return s.Started.Add(-time.Second).UnixNano()
}
