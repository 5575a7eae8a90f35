package integrity

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// editIndex applies ed to the index at path (beneath ws; editedIndex) under git's own lock
// (index.lock, created exclusively, renamed over the index), so that a git the host runs
// meanwhile fails rather than loses the change. A lock that exists (a git at work, or a box's)
// is not waited for: unless beside is set, the index stays, and the caller names the command
// that fixes it. With beside (the check at exit, when the box's processes are gone), the
// edited index is written to a file of its own beside the lock and renamed over the index, the
// lock left as it is: a lock the box left would otherwise keep its flags for good (review 15,
// F8), and one a host git holds (git commit waiting in its editor) is that git's to rename
// over the index, with whatever flags it read, which is why the caller checks the index again
// once the lock has gone. It returns what it changed (done.beside: written beside a lock).
func editIndex(ws, path string, ed indexEdit, beside bool) (indexEdited, error) {
	var done indexEdited
	var besideName string // the file written beside a lock that exists ("": the lock)
	lock, _, err := lockGitFile(ws, path, func(dir int, lock string) (int, string, error) {
		fd, err := createLock(dir, lock)
		if errors.Is(err, unix.EEXIST) && beside {
			var name string
			name, fd, err = besideLock(dir)
			done.beside = err == nil
			besideName = name
		}
		if errors.Is(err, unix.EEXIST) {
			return -1, "", errors.New("git's lock index.lock exists: a git at work, or a lock the box left")
		}
		if err != nil {
			return -1, "", fmt.Errorf("take git's lock index.lock: %w", err)
		}
		return fd, "", nil
	})
	if err != nil {
		return done, err
	}
	lock.lock = besideName
	defer lock.release()
	f, err := openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return done, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return done, err
	}
	hashLen := repoIDLen(ws, filepath.Dir(path))
	head, err := readIndexHead(f, fi.Size(), hashLen)
	if err != nil {
		return done, err
	}
	w := bufio.NewWriterSize(lock.f, 256<<10)
	es, exts, err := indexContentsAt(head, fi.Size(), f, hashLen)
	if err != nil {
		return done, err
	}
	// A split index is written whole, unsplit: its entries as git merges them, edited.
	whole, split, err := readSplit(head, fi.Size(), f, es, exts, hashLen, sharedIndex(ws, path))
	if err != nil {
		return done, err
	}
	var edited indexEdited
	if split {
		edited, err = writeEditedIndex(w, whole, int64(len(whole)), nil, hashLen, ed, fi.ModTime())
		for _, x := range exts {
			edited.stripped = append(edited.stripped, x.sig)
		}
	} else {
		edited, err = writeEditedIndex(w, head, fi.Size(), f, hashLen, ed, fi.ModTime())
	}
	if err != nil || len(edited.cleared)+len(edited.zeroed)+len(edited.stripped) == 0 {
		return indexEdited{}, err
	}
	edited.beside = done.beside
	done = edited
	if err := w.Flush(); err != nil {
		return indexEdited{}, err
	}
	if err := lock.commitWritten(); err != nil {
		return indexEdited{}, err
	}
	return done, nil
}

// readIndex reads the index at path (beneath ws, no symlink followed): its start (readIndexHead),
// the modification time of the file it read (git's racy-clean rule compares the entries with
// the time of the index that holds them, not of one written since), its entries and extensions
// (indexContentsAt).
func readIndex(ws, path string, hashLen int) ([]byte, time.Time, []indexEntry, []indexExtension, error) {
	f, err := openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, time.Time{}, nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, nil, nil, err
	}
	head, err := readIndexHead(f, fi.Size(), hashLen)
	if err != nil {
		return nil, time.Time{}, nil, nil, err
	}
	es, exts, err := indexContentsAt(head, fi.Size(), f, hashLen)
	if err != nil {
		return nil, time.Time{}, nil, nil, err
	}
	// A split index: the entries git sees, as one ordinary index; its own extensions stand
	// (the check names them when it removes them).
	whole, split, err := readSplit(head, fi.Size(), f, es, exts, hashLen, sharedIndex(ws, path))
	if err != nil {
		return nil, time.Time{}, nil, nil, fmt.Errorf("%w: %w", errSplitIndex, err)
	}
	if !split {
		return head, fi.ModTime(), es, exts, nil
	}
	es, _, err = indexContents(whole, hashLen)
	return whole, fi.ModTime(), es, exts, err
}

// readIndexRange reads bytes [start, end) of the index at path (beneath ws, no symlink
// followed; at most maxIndexBytes).
func readIndexRange(ws, path string, start, end int) ([]byte, error) {
	if start < 0 || end < start || end-start > maxIndexBytes {
		return nil, fmt.Errorf("index range %d-%d", start, end)
	}
	f, err := openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, end-start)
	if _, err := f.ReadAt(b, int64(start)); err != nil {
		return nil, err
	}
	return b, nil
}

// sharedIndex returns what reads a shared index of the split index at path by name, from the
// index's folder, as git reads it (through a symlink that stays beneath ws; at most
// maxIndexBytes).
func sharedIndex(ws, path string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		return readBeneath(ws, filepath.Join(filepath.Dir(path), name), maxIndexBytes)
	}
}

// readIndexHead reads the start of the index f of size bytes that holds its entries: all of it
// when within maxIndexBytes, else from 1 MiB, doubled until its entries read, up to
// maxIndexBytes (errIndexEntries past it). Extensions past it are not read (indexContentsAt).
func readIndexHead(f io.ReaderAt, size int64, hashLen int) ([]byte, error) {
	n := min(size, 1<<20)
	if size <= maxIndexBytes {
		n = size
	}
	for {
		head := make([]byte, n)
		if _, err := f.ReadAt(head, 0); err != nil {
			return nil, fmt.Errorf("read the index: %w", err)
		}
		if n == size {
			return head, nil
		}
		_, _, err := indexContentsAt(head, size, f, hashLen)
		switch {
		case !errors.Is(err, errPastHead):
			return head, nil // an index git refuses is refused by the caller's parse
		case n >= maxIndexBytes:
			return nil, errIndexEntries
		}
		n = min(2*n, maxIndexBytes, size)
	}
}

// besideLock creates, in dir, a file of its own for an index written while git's lock is held
// (created exclusively, no symlink followed), and returns its name and descriptor.
func besideLock(dir int) (string, int, error) {
	for n := 1; n < 100; n++ {
		name := fmt.Sprintf("index.agentbox-%d-%d", os.Getpid(), n)
		fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if !errors.Is(err, unix.EEXIST) {
			return name, fd, err
		}
	}
	return "", -1, errors.New("no free name beside git's lock index.lock")
}

// staleEntries returns the names of the entries of ix whose stat data makes git take the
// file for unchanged since it was staged (the whole seconds of its mtime and its size agree,
// what git compares under every core.checkStat; the file's type too) while the file changed
// at or after since (its ctime, which no one but the kernel sets) and its content is not the
// entry's object. Entries git compares by content anyway (racily clean: the index is not
// newer than the file), conflicted, intent-to-add, flagged (verifyIndexes' other half) and
// gitlink entries are left out. Only the files that pass the stat comparison are read.
func staleEntries(ws string, ix *gitIndex, since int64, memo *blobMemo) []staleEntry {
	relTop, err := filepath.Rel(ws, ix.top)
	if err != nil || !within(ix.top, ws) {
		return nil
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(wfd)
	// The time of the index whose entries are compared: the box's git may have written another
	// since they were read, and its newer time made git's racily clean entries (an
	// edit-add-commit loop's, the same size in the same second) look trusted, so the check took
	// them for forged and edited the index under git's lock while the box's git worked
	// (TestBoxGitNeverMeetsTheCheckLock failed so in CI, as the ordinary user).
	ist := ix.mtime
	if ist.IsZero() {
		var st unix.Stat_t
		if unix.Stat(ix.path, &st) != nil {
			return nil
		}
		ist = time.Unix(st.Mtim.Unix())
	}
	minimal := strings.EqualFold(configString(repoConfig(ws, filepath.Dir(ix.path)), "core", "checkstat"), "minimal")
	found := make([]*staleEntry, len(ix.entries))
	inChunks(len(ix.entries), func(lo, hi int) {
		var z objectHasher
		defer z.close()
		for i, e := range ix.entries[lo:hi] {
			if sig, ok := staleEntry1(&z, memo, wfd, relTop, ix, e, ist, since, minimal); ok {
				found[lo+i] = &staleEntry{e.name, sig}
			}
		}
	})
	var out []staleEntry
	for _, f := range found {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// staleEntry1 is staleEntries' look at one entry e of ix, whose index's time is ist: the
// signature of its file (ctime, the entry's id) and true when it is stale.
func staleEntry1(z *objectHasher, memo *blobMemo, wfd int, relTop string, ix *gitIndex, e indexEntry, ist time.Time, since int64, minimal bool) (string, bool) {
	typ := e.mode & unix.S_IFMT
	if e.name == "" || e.flags&ceStageMask != 0 || e.ext&ceIntentToAdd != 0 || e.hidden().flag != "" ||
		(typ != unix.S_IFREG && typ != unix.S_IFLNK) {
		return "", false
	}
	rel := filepath.Join(relTop, filepath.FromSlash(e.name))
	var st unix.Stat_t
	if unix.Fstatat(wfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != typ ||
		st.Ctim.Nano() < since || uint32(st.Mtim.Sec) != statField(ix.b, e, 2) || uint32(st.Size) != statField(ix.b, e, 9) ||
		ist.Unix() < st.Mtim.Sec {
		return "", false
	}
	// An index of the file's second: git built without USE_NSEC (Debian's) takes the entry
	// for racily clean and compares the content; one built with it compares the mtime's
	// nanoseconds (unless core.checkStat is minimal), which differ. Only an entry whose
	// nanoseconds are the file's (forged, or a file git staged as it is) can pass for
	// unchanged then. An agent's edit-add-commit loop met this at every check, each an
	// alert and a moment under git's lock (TestBoxGitNeverMeetsTheCheckLock).
	if ist.Unix() == st.Mtim.Sec && statField(ix.b, e, 3) != uint32(st.Mtim.Nsec) && !minimal {
		return "", false
	}
	// An index not newer than the entry's mtime, to the nanosecond: racily clean for a git
	// built with USE_NSEC too (is_racy_stat), which compares the content. An agent's loop
	// that rewrites a file the same size within the kernel's clock tick (4 ms here) of
	// staging it, with git's index write in that tick, leaves the entry so: reported, and
	// cleared under git's lock while the box's git worked (the likely cause of two failed
	// gits of TestBoxGitNeverMeetsTheCheckLock, as the ordinary user in a .ci/run).
	if !ist.After(time.Unix(int64(statField(ix.b, e, 2)), int64(statField(ix.b, e, 3)))) {
		return "", false
	}
	if !entryDiffers(z, memo, wfd, rel, &st, typ, e, ix.hashLen) {
		return "", false
	}
	return fmt.Sprintf("%d %x", st.Ctim.Nano(), e.oid), true
}

// stagedProtected reports, at the check at exit, each entry of the index ix at a protected
// path (protectedRel: a root of the snapshot, or beneath one that is a folder) that is not what
// the snapshot recorded there (ProtectedIndex: added, or another stage, mode or object) and not
// the host's file either (its type, executable bit and content; no file at all counts): the
// box's git add, update-index --cacheinfo or --chmod of a protected file puts the box's
// version in the host's index (git status: MM, AD, TT), which the user's next git commit takes,
// and a git checkout, reset or stash then writes into the work tree (review 32 C, F6). The
// record, not the entry's stat data, tells what the launch staged: the box writes those too
// (review 32 E: an mtime of 0 or of the past passed the first version's test), in every index
// of the workspace (a submodule's, a nested repository's, a linked worktree's: E, F5).
func (s *State) stagedProtected(ix *gitIndex) []Transition {
	protected := s.protectedRel()
	wfd, err := unix.Open(s.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(wfd)
	relTop, err := filepath.Rel(s.Workspace, ix.top)
	if err != nil || !within(ix.top, s.Workspace) {
		return nil
	}
	var z objectHasher
	defer z.close()
	var out []Transition
	record := s.ProtectedIndex[ix.path]
	present := map[string]bool{}
	for _, e := range ix.entries {
		key := ix.key(e.name)
		present[e.name] = true
		if e.name == "" || !protected(key) || record[e.name] == entrySig(e) {
			continue
		}
		typ := e.mode & unix.S_IFMT
		rel := filepath.Join(relTop, filepath.FromSlash(e.name))
		var st unix.Stat_t
		if e.flags&ceStageMask == 0 && (typ == unix.S_IFREG || typ == unix.S_IFLNK) &&
			unix.Fstatat(wfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == typ &&
			(typ != unix.S_IFREG || (st.Mode&0o100 != 0) == (e.mode&0o100 != 0)) &&
			!entryDiffers(&z, s.memo, wfd, rel, &st, typ, e, ix.hashLen) {
			continue // the index holds the host's file: nothing of the box's to commit
		}
		if s.toldOnce(ix.path+"\x00"+e.name, entrySig(e)) {
			continue
		}
		q := shellQuote(e.name)
		out = append(out, Transition{Kind: Modified, Path: filepath.Join(s.Workspace, rel), Alert: true, Detail: fmt.Sprintf(
			"the index of %s holds another version of this protected file (its content, mode or type) than the file on the host, staged while the box ran (by the box's git add, or yours): the host's next git commit there takes it, and a git checkout, reset or stash then writes it into the work tree; see it with git -C %s diff --cached -- %s, drop it with git -C %s restore --staged -- %s",
			ix.top, shellQuote(ix.top), q, shellQuote(ix.top), q)})
	}
	// A protected entry removed from the index: the user's next commit deletes the file, and a
	// checkout then removes it, or puts there what an entry on its way (a symlink .claude the
	// box staged) leads to (review 32 F, F1).
	for _, name := range slices.Sorted(maps.Keys(record)) {
		if present[name] || s.toldOnce(ix.path+"\x00"+name, "removed") {
			continue
		}
		q := shellQuote(name)
		out = append(out, Transition{Kind: Modified, Path: filepath.Join(ix.top, filepath.FromSlash(name)), Alert: true, Detail: fmt.Sprintf(
			"the index of %s no longer holds this protected file, removed while the box ran: the host's next git commit there deletes it, and a checkout or reset then removes it from the work tree (or puts there what an entry on its way leads to); see it with git -C %s diff --cached -- %s, put it back with git -C %s restore --staged -- %s",
			ix.top, shellQuote(ix.top), q, shellQuote(ix.top), q)})
	}
	return out
}

// toldOnce reports whether the staged entry key was reported already as sig (and records it):
// the check of the indexes runs again after the exit when one was locked (RecheckIndexes), and
// its alerts must not repeat.
func (s *State) toldOnce(key, sig string) bool {
	if s.stagedTold == nil {
		s.stagedTold = map[string]string{}
	}
	if s.stagedTold[key] == sig {
		return true
	}
	s.stagedTold[key] = sig
	return false
}

// entryDiffers reports whether the file rel (beneath the workspace opened as wfd, of e's type
// typ) is not e's object as git would store it: its bytes, or a regular file's bytes with each
// CRLF an LF (git stores a text file checked out with CRLF by autocrlf or eol attributes with
// LF). A file that cannot be read differs.
func entryDiffers(z *objectHasher, memo *blobMemo, wfd int, rel string, st *unix.Stat_t, typ uint32, e indexEntry, hashLen int) bool {
	id, err := memo.id(z, wfd, rel, st, typ, hashLen)
	if err == nil && !bytes.Equal(id, e.oid) && typ == unix.S_IFREG {
		if lf, lerr := blobID(z, wfd, rel, typ, hashLen, true); lerr == nil {
			id = lf
		}
	}
	return err != nil || !bytes.Equal(id, e.oid)
}

// blobMemo is what the check at exit's passes share of the files they hash: the stale index
// entries' (staleEntries) and the hidden edits' (hiddenEditsIn) each hashed every tracked file
// the launch changed, the same files one after the other (after a box wrote 5,000 files, a
// third of the check's CPU was the second hashing: docs/benchmarks.md, the thirtieth
// session). A file's id is reused only for the same name with the same identity, size, mtime
// and ctime as when it was hashed; the box has ended when the check runs. The zero value is
// ready; nil hashes every time.
type blobMemo struct {
	mu  sync.Mutex
	ids map[blobKey][]byte
}

// blobKey is a file as blobMemo knows it: its name beneath the workspace and what fstatat
// said of it, and the id's hash and the file's type.
type blobKey struct {
	rel          string
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	typ          uint32
	hashLen      int
}

// blobKeyOf is the key of the file rel that st describes.
func blobKeyOf(rel string, st *unix.Stat_t, typ uint32, hashLen int) blobKey {
	return blobKey{rel, st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano(), typ, hashLen}
}

// id is blobID (the file's bytes, not lf) of the file rel, which fstatat described as st just
// before: the id hashed for the same file since, or a new one.
func (m *blobMemo) id(z *objectHasher, wfd int, rel string, st *unix.Stat_t, typ uint32, hashLen int) ([]byte, error) {
	if m == nil {
		return blobID(z, wfd, rel, typ, hashLen, false)
	}
	k := blobKeyOf(rel, st, typ, hashLen)
	m.mu.Lock()
	id, ok := m.ids[k]
	m.mu.Unlock()
	if ok {
		return id, nil
	}
	// Kept only when the file read is the one st described: a folder on the way swapped
	// between the caller's fstatat and this open (a second box's, during the check) would
	// have had another file's id kept under this one's description (review 30b).
	var got unix.Stat_t
	id, err := blobIDStat(z, wfd, rel, typ, hashLen, false, &got)
	if err == nil && blobKeyOf(rel, &got, typ, hashLen) == k {
		m.mu.Lock()
		if m.ids == nil {
			m.ids = map[blobKey][]byte{}
		}
		m.ids[k] = id
		m.mu.Unlock()
	}
	return id, err
}

// flaggedChanged returns those of the entries of ix named in names (flagged skip-worktree or
// assume-unchanged before the launch) whose file the launch changed (its ctime, which no one
// but the kernel sets, is at or after since) and is not the entry's object: an edit the flag
// hides from the host's git. A file of another type than the entry's (a symlink where a
// regular file was) is not its object either; a folder there is left out (git shows the entry
// deleted and the folder's files untracked, whatever the flag), and so is a file that is gone.
func flaggedChanged(ws string, ix *gitIndex, since int64, names []string) []string {
	relTop, err := filepath.Rel(ws, ix.top)
	if len(names) == 0 || err != nil || !within(ix.top, ws) {
		return nil
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(wfd)
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var out []string
	var z objectHasher
	for _, e := range ix.entries {
		typ := e.mode & unix.S_IFMT
		if !want[e.name] || e.flags&ceStageMask != 0 || (typ != unix.S_IFREG && typ != unix.S_IFLNK) {
			continue
		}
		rel := filepath.Join(relTop, filepath.FromSlash(e.name))
		var st unix.Stat_t
		if unix.Fstatat(wfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Ctim.Nano() < since || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if st.Mode&unix.S_IFMT != typ || entryDiffers(&z, nil, wfd, rel, &st, typ, e, ix.hashLen) {
			out = append(out, e.name)
		}
	}
	return out
}

// staleEntry is an entry staleEntries found: its name, and the file's ctime and the entry's id.
type staleEntry struct{ name, sig string }

// maxLFBytes bounds the file read whole to hash it with its CRLFs as LFs.
const maxLFBytes = 64 << 20

// blobID returns the git object id (SHA-1 or SHA-256 by hashLen) of the file rel (beneath the
// workspace opened as wfd, no symlink followed) as git would store it: a regular file's bytes
// (with each CRLF an LF when lf is set) or a symlink's target.
// z holds what one call reuses from the last (its hashes, its copy buffer).
func blobID(z *objectHasher, wfd int, rel string, typ uint32, hashLen int, lf bool) ([]byte, error) {
	return blobIDStat(z, wfd, rel, typ, hashLen, lf, nil)
}

// blobIDStat is blobID, filling got (when not nil) with what fstat said of the file it read.
func blobIDStat(z *objectHasher, wfd int, rel string, typ uint32, hashLen int, lf bool, got *unix.Stat_t) ([]byte, error) {
	h := z.hash(hashLen)
	if typ == unix.S_IFLNK {
		fd, err := unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		if got != nil {
			if err := unix.Fstat(fd, got); err != nil {
				return nil, err
			}
		}
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "blob %d\x00", n)
		h.Write(buf[:n])
		return h.Sum(nil), nil
	}
	var st unix.Stat_t
	fd, err := openRegularAt(wfd, rel, unix.O_NOFOLLOW, beneath, &st)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if got != nil {
		*got = st
	}
	if lf {
		b, err := io.ReadAll(io.LimitReader(fdReader(fd), maxLFBytes+1))
		if err != nil || len(b) > maxLFBytes || !bytes.Contains(b, []byte("\r\n")) {
			return nil, errNotRegular
		}
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		return h.Sum(nil), nil
	}
	fmt.Fprintf(h, "blob %d\x00", st.Size)
	if n, err := io.CopyBuffer(h, fdReader(fd), z.buf); err != nil || n != st.Size {
		return nil, fmt.Errorf("%s changed while read", rel)
	}
	return h.Sum(nil), nil
}
