package integrity

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// Git trusts its object store: it reads a loose object by its name and a packed one through
// its pack's index, and checks neither against the id it asked for. A box that rewrote an
// existing loose object (same name, other content), or added a pack whose index files other
// content under an id the repository already has (git looks in packs first, the newest pack
// first), had the host's git show, diff, check out and archive the box's content under the
// reviewed commit (review 12, F8). Objects are content-addressed: what the launch wrote or
// changed under objects/ is checked against its name, and what does not match is moved aside.

// packVerifyTimeout bounds one git index-pack --verify.
const packVerifyTimeout = 5 * time.Minute

// verifyObjects checks the object stores of gitdirs (beneath the workspace) for what changed
// at or after since (ctime, which only the kernel sets): each loose object must inflate and
// hash to its name (SHA-1 or SHA-256, by the name's length); each pack must pass git
// index-pack --verify (every object its index names is recomputed from the pack); an
// alternates file (objects found in another store when missing from this one) is never the
// launch's. What fails is moved aside, an alert on it; a derived cache git rebuilds (a
// commit-graph, a multi-pack-index, a bitmap or reverse index), whose ids git trusts as well,
// is moved aside without one.
//
// The submodule gitdirs beneath each one's common dir (modules/**, at any depth) are checked
// too, those of submodules not checked out among them (after git submodule deinit, or a clone
// without --recurse-submodules): no index leads to them, but the host's git submodule update
// checks out from their stores.
func (s *State) verifyObjects(gitdirs []string, since int64) []Transition {
	var out []Transition
	seen := map[string]bool{}
	var check func(gd string, depth int)
	check = func(gd string, depth int) {
		if seen[gd] || depth > maxGitNesting {
			return
		}
		seen[gd] = true
		if c, ok, _ := commonDir(s.Workspace, gd); ok {
			// A linked worktree's: the common dir's store is checked as its own gitdir.
			check(c, depth)
			return
		} else if _, err := os.Lstat(filepath.Join(gd, "commondir")); err == nil {
			return // one out of the workspace, which the box cannot write, or unreadable
		}
		out = append(out, s.verifyStore(filepath.Join(gd, "objects"), since)...)
		subs, _ := moduleGitDirs(gd) // a symlink among them: the scan moved it aside
		for _, sub := range subs {
			check(sub, depth+1)
		}
	}
	for _, gd := range gitdirs {
		check(gd, 0)
	}
	return out
}

// objectAside moves path aside and returns the transition that says so (alert: the content
// failed its check; otherwise a cache git rebuilds).
func (s *State) objectAside(path, why string, alert bool) Transition {
	aside, err := s.moveAside(path)
	if err != nil {
		return Transition{Kind: Modified, Path: path, Alert: true, Detail: why + "; it could not be moved aside (" + err.Error() + "): remove it"}
	}
	return Transition{Kind: Modified, Path: path, Alert: alert, Detail: why + "; moved aside to " + aside}
}

func (s *State) verifyStore(objects string, since int64) []Transition {
	var st unix.Stat_t
	if unix.Lstat(objects, &st) != nil || !within(objects, s.Workspace) {
		return nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if st.Ctim.Nano() < since {
			return nil
		}
		return []Transition{s.objectAside(objects, "the object store is not a folder (git follows a symlink): what git reads there is not what the launch's git wrote", true)}
	}
	var out []Transition
	// The loose objects' paths (objects/xx/…), checked together by the batch: not all at
	// once, nor a fan-out folder's all at once, which a box's millions of files named as
	// objects would have made a daemon's gigabyte (review 30).
	var loose []string
	flush := func() {
		out = append(out, s.verifyLoose(loose, since)...)
		loose = loose[:0]
	}
	names, _ := readDirNames(objects)
	for _, n := range names {
		if len(n) == 2 && isHex(n) {
			// (The folder's own transition after those of the batches it filled: flush
			// appends to out meanwhile.)
			tr := s.looseIn(filepath.Join(objects, n), since, func(p string) {
				if loose = append(loose, p); len(loose) >= looseBatch {
					flush()
				}
			})
			out = append(out, tr...)
		}
	}
	flush()
	for _, n := range names {
		switch p := filepath.Join(objects, n); n {
		case "pack":
			out = append(out, s.verifyPacks(p, since)...)
		case "info":
			out = append(out, s.verifyObjectInfo(p, since)...)
		}
	}
	return out
}

// looseBatch is how many loose objects' paths verifyStore holds before it checks them.
const looseBatch = 4096

// changedSince reports whether the entry at path (not followed) changed at or after since.
func changedSince(path string, since int64) (unix.Stat_t, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return st, false
	}
	return st, st.Ctim.Nano() >= since
}

// looseIn calls add with the path of each loose object in the fan-out folder dir
// (objects/xx), read by batches of looseBatch names, and returns the transition of a dir that
// is not a folder.
func (s *State) looseIn(dir string, since int64, add func(path string)) []Transition {
	st, changed := changedSince(dir, since)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if !changed {
			return nil
		}
		return []Transition{s.objectAside(dir, "a folder of loose objects is not a folder (git follows a symlink): the objects git reads there are not checked", true)}
	}
	eachDirName(dir, looseBatch, func(names []string) {
		for _, n := range names {
			if (len(n) != 2*sha1.Size-2 && len(n) != 2*sha256.Size-2) || !isHex(n) {
				continue // git reads no other name (tmp_obj_*, a quarantined one)
			}
			add(filepath.Join(dir, n))
		}
	})
	return nil
}

// verifyLoose checks the loose objects at paths (objects/xx/…) that changed at or after since,
// several at a time (inChunks), and moves aside those that are not what their name says.
func (s *State) verifyLoose(paths []string, since int64) []Transition {
	errs := make([]error, len(paths))
	inChunks(len(paths), func(lo, hi int) {
		var z objectHasher
		defer z.close()
		for i, p := range paths[lo:hi] {
			if _, changed := changedSince(p, since); changed {
				errs[lo+i] = s.checkLoose(&z, p, filepath.Base(filepath.Dir(p))+filepath.Base(p))
			}
		}
	})
	var out []Transition
	for i, err := range errs {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			out = append(out, s.objectAside(paths[i], "a loose object the launch wrote or changed is not what its name says ("+err.Error()+"): git would have read it for that id wherever the id is used (show, diff, checkout, archive); if the repository had the object before, it is missing now: fetch it again or restore it from a backup (git fsck names what is missing)", true))
		}
	}
	return out
}

// objectHasher keeps what the check at exit reuses from one file or object to the next: the
// hashes, a copy buffer, and for the loose objects the buffered and zlib readers and the
// workspace's descriptor. Made anew for each, they were most of the check's allocations (and
// its garbage collection) and a third of its system calls after a box wrote 5,000 files
// (docs/benchmarks.md, "Work in the box"). The zero value is ready to use; close closes it.
type objectHasher struct {
	h1, h256 hash.Hash
	buf      []byte
	br       *bufio.Reader
	zr       io.ReadCloser
	wfd      int  // the workspace's descriptor (O_PATH), when open
	open     bool // whether wfd is open
}

// close closes what z opened.
func (z *objectHasher) close() {
	if z.open {
		unix.Close(z.wfd)
		z.open = false
	}
}

// hash returns the hash of ids of hashLen bytes (SHA-1 or SHA-256), reset.
func (z *objectHasher) hash(hashLen int) hash.Hash {
	if z.h1 == nil {
		z.h1, z.h256, z.buf = sha1.New(), sha256.New(), make([]byte, 32<<10)
	}
	h := z.h1
	if hashLen == sha256.Size {
		h = z.h256
	}
	h.Reset()
	return h
}

// checkLoose inflates the loose object at path (beneath the workspace, no symlink followed)
// and checks that it hashes to id (hex).
func (s *State) checkLoose(z *objectHasher, path, id string) error {
	rel, err := filepath.Rel(s.Workspace, path)
	if err != nil || !within(path, s.Workspace) {
		return errOutside
	}
	if !z.open {
		if z.wfd, err = unix.Open(s.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		z.open = true
	}
	var st unix.Stat_t
	fd, err := openRegularAt(z.wfd, rel, unix.O_NOFOLLOW, beneath, &st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	want, _ := hex.DecodeString(id)
	h := z.hash(len(want))
	// zlib reads through a bufio.Reader of its own unless given an io.ByteReader.
	if z.br == nil {
		z.br = bufio.NewReader(fdReader(fd))
	} else {
		z.br.Reset(fdReader(fd))
	}
	if z.zr == nil {
		z.zr, err = zlib.NewReader(z.br)
	} else {
		err = z.zr.(zlib.Resetter).Reset(z.br, nil)
	}
	if err != nil {
		return fmt.Errorf("not zlib: %w", err)
	}
	if _, err := io.CopyBuffer(h, z.zr, z.buf); err != nil {
		return fmt.Errorf("inflate: %w", err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("its content hashes to %x", got)
	}
	return nil
}

// openBeneath opens the regular file at path beneath the workspace, following no symlink,
// without blocking on a FIFO.
func openBeneath(ws, path string) (*os.File, error) {
	return openRegular(ws, path, unix.O_NOFOLLOW, beneath)
}

// packCaches are the suffixes of the files git derives from a pack and trusts for ids and
// offsets: rebuilt by git (repack, gc, maintenance), so moved aside when the launch wrote them.
var packCaches = []string{".bitmap", ".rev"}

// packFiles are the suffixes of the files git keeps beside a pack, under its name.
var packFiles = []string{".pack", ".idx", ".rev", ".bitmap", ".keep", ".promisor", ".mtimes"}

// verifyPacks checks the packs of objects/pack that the launch added or changed.
func (s *State) verifyPacks(dir string, since int64) []Transition {
	if st, _ := changedSince(dir, since); st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil // a pack folder that is not one: git finds no pack there
	}
	names, _ := readDirNames(dir)
	var out []Transition
	for _, n := range names {
		p := filepath.Join(dir, n)
		base, isPack := strings.CutSuffix(n, ".pack")
		switch {
		case strings.HasPrefix(n, "multi-pack-index"):
			if _, changed := changedSince(p, since); changed {
				out = append(out, s.objectAside(p, "a multi-pack-index the launch wrote (git takes the pack and offset of every id from it, unchecked; git rebuilds it)", false))
			}
		case isPack: // any name: git loads every *.idx whose .pack is there (packfile.c; review 15, F16)
			idx := filepath.Join(dir, base+".idx")
			_, pc := changedSince(p, since)
			ist, ic := changedSince(idx, since)
			if !pc && !ic || ist.Mode == 0 {
				continue // git reads no pack without its index (git renames the index in last)
			}
			if _, err := hostprog.Find("git"); err != nil {
				out = append(out, Transition{Kind: Modified, Path: p, Alert: true, Detail: "a pack the launch added or changed could not be verified (no git on the daemon's PATH for git index-pack --verify): its index may name other content under an id the repository has; run git fsck"})
				continue
			}
			if err := s.checkPack(p, idx); err != nil && !errors.Is(err, os.ErrNotExist) {
				why := "a pack the launch added or changed failed git index-pack --verify (" + err.Error() + "): its index may name other content under an id the repository has, which git reads before any loose object or older pack"
				for _, m := range names {
					if ext, ok := strings.CutPrefix(m, base); ok && slices.Contains(packFiles, ext) {
						out = append(out, s.objectAside(filepath.Join(dir, m), why, true))
					}
				}
			}
		default:
			for _, suf := range packCaches {
				if strings.HasSuffix(n, suf) {
					if _, changed := changedSince(p, since); changed {
						out = append(out, s.objectAside(p, "a pack's "+suf+" file the launch wrote (git trusts its positions unchecked; git rebuilds it)", false))
					}
				}
			}
		}
	}
	return out
}

// checkPack runs git index-pack --verify on the pack and its index, which it opens itself
// (beneath the workspace, no symlink followed) and hands to git as descriptors: git reads
// nothing else of the workspace and no configuration (a private folder for its current
// directory and home, no system or global configuration).
func (s *State) checkPack(pack, idx string) error {
	pf, err := openBeneath(s.Workspace, pack)
	if err != nil {
		return fmt.Errorf("open the pack: %w", err) // gone (a gc meanwhile): not reported
	}
	defer pf.Close()
	xf, err := openBeneath(s.Workspace, idx)
	if err != nil {
		return fmt.Errorf("open its index: %w", err)
	}
	defer xf.Close()
	format, err := idxFormat(xf)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "agentbox-pack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, fd := range map[string]int{"p.pack": 3, "p.idx": 4} {
		if err := os.Symlink(fmt.Sprintf("/proc/self/fd/%d", fd), filepath.Join(tmp, name)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), packVerifyTimeout)
	defer cancel()
	cmd := hostprog.Command(ctx, "git", "index-pack", "--verify", "--object-format="+format, "p.pack")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(tmp), "LC_ALL=C"}
	cmd.ExtraFiles = []*os.File{pf, xf}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// idxFormat tells a pack index's object format by its size (version 2: header, fan-out, then
// per object an id, a CRC and an offset; two checksums at the end), rewinding the file.
func idxFormat(f *os.File) (string, error) {
	defer f.Seek(0, io.SeekStart)
	var head [8 + 256*4]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || !bytes.Equal(head[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return "", errors.New("its index is not a version 2 pack index")
	}
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	n := int64(head[8+255*4])<<24 | int64(head[8+255*4+1])<<16 | int64(head[8+255*4+2])<<8 | int64(head[8+255*4+3])
	for _, c := range []struct {
		name string
		size int64
	}{{"sha1", sha1.Size}, {"sha256", sha256.Size}} {
		// Large offsets (8 bytes each) may follow the 4-byte ones.
		small := 8 + 256*4 + n*(c.size+8) + 2*c.size
		if fi.Size() >= small && (fi.Size()-small)%8 == 0 && fi.Size()-small <= n*8 {
			return c.name, nil
		}
	}
	return "", errors.New("its index's size fits neither SHA-1 nor SHA-256")
}

// verifyObjectInfo checks objects/info: an alternates file the launch wrote is moved aside
// (another store, which nothing checks, supplies what this one lacks), and so is a
// commit-graph (git takes each commit's tree and parents from it, unchecked; it rebuilds it).
func (s *State) verifyObjectInfo(dir string, since int64) []Transition {
	var out []Transition
	for _, c := range []struct {
		name, why string
		alert     bool
	}{
		{"alternates", "an alternates file the launch wrote: git takes the objects this store lacks from the stores it names, which nothing checks", true},
		{"http-alternates", "an alternates file the launch wrote: git takes the objects this store lacks from the stores it names, which nothing checks", true},
		{"commit-graph", "a commit-graph the launch wrote (git takes each commit's tree and parents from it, unchecked; git rebuilds it)", false},
		{"commit-graphs", "a commit-graph chain the launch wrote (git takes each commit's tree and parents from it, unchecked; git rebuilds it)", false},
	} {
		p := filepath.Join(dir, c.name)
		if _, scanned := s.Exec[p]; scanned && c.alert {
			// The workspace scan's (a nested repository's, not pinned): recorded at the
			// snapshot, or since, and moved aside when new or changed (mergeExec, which ran
			// first): one still recorded is the one the snapshot saw (the host may have
			// written it in the second before the launch).
			continue
		}
		if st, changed := changedSince(p, since); changed && !s.unchangedRoot(p, st) {
			out = append(out, s.objectAside(p, c.why, c.alert))
		}
	}
	return out
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// unchangedRoot reports whether path is an integrity root that the snapshot recorded as the
// same file (inode and ctime) as st: a pinned alternates file the host wrote just before the
// launch (its ctime within the second before it), which the box cannot write (bound), is not
// the launch's.
func (s *State) unchangedRoot(path string, st unix.Stat_t) bool {
	for _, r := range s.Roots {
		if r.Path == path {
			e := r.Entry
			return e.Kind == KindFile && e.Dev == uint64(st.Dev) && e.Ino == st.Ino && e.Ctime == st.Ctim.Nano()
		}
	}
	return false
}
