package integrity

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/agentbox/agentbox/internal/hostprog"
)

// cacheTreeNode is a folder the cache tree (the index's TREE extension) takes as valid: how
// many entries lie beneath it and the id of its tree.
type cacheTreeNode struct {
	count int
	oid   []byte
}

// parseCacheTree returns the valid folders of the cache tree p (the TREE extension's payload,
// its header left out), by path with a trailing slash ("" for the top), as git's
// read_one reads them: a NUL-terminated name, the entry count (-1: invalid) and the number of
// subtrees in ASCII, a newline, the tree id when valid, then the subtrees.
func parseCacheTree(p []byte, hashLen int) (map[string]cacheTreeNode, error) {
	out := map[string]cacheTreeNode{}
	var read func(prefix string, depth int) error
	read = func(prefix string, depth int) error {
		if depth > 4096 {
			return errors.New("the cache tree is too deep")
		}
		nul := bytes.IndexByte(p, 0)
		if nul < 0 {
			return errors.New("the cache tree is truncated")
		}
		name := string(p[:nul])
		p = p[nul+1:]
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			return errors.New("the cache tree is truncated")
		}
		count, subs, ok := strings.Cut(string(p[:nl]), " ")
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(subs)
		if !ok || err1 != nil || err2 != nil || k < 0 {
			return fmt.Errorf("the cache tree has a bad node %q", p[:nl])
		}
		p = p[nl+1:]
		path := prefix
		if depth > 0 {
			path = prefix + name + "/"
		}
		if n >= 0 {
			if len(p) < hashLen {
				return errors.New("the cache tree is truncated")
			}
			out[path] = cacheTreeNode{n, p[:hashLen]}
			p = p[hashLen:]
		}
		for range k {
			if err := read(path, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := read("", 0); err != nil {
		return nil, err
	}
	return out, nil
}

// entryTrees returns the folders of the entries es (an index's, in its order) with the tree
// git writes for each (cache-tree.c, update_one: each entry as "MODE NAME\0ID" in index order,
// a folder as "40000 NAME\0ID" of its own tree, a sparse directory entry as the tree it names;
// the whole as a tree object of the repository's hash), by path with a trailing slash ("" for
// the top). A folder holding an entry git leaves out of a tree it takes as valid (conflicted,
// intent-to-add) has none.
func entryTrees(es []indexEntry, hashLen int) map[string]cacheTreeNode {
	out := map[string]cacheTreeNode{}
	var build func(lo, hi int, prefix string) ([]byte, bool)
	build = func(lo, hi int, prefix string) ([]byte, bool) {
		var body bytes.Buffer
		ok := true
		for i := lo; i < hi; {
			e := es[i]
			rest := e.name[len(prefix):]
			slash := strings.IndexByte(rest, '/')
			switch {
			case e.flags&ceStageMask != 0 || e.ext&ceIntentToAdd != 0:
				ok = false
				i++
			case slash >= 0 && slash == len(rest)-1 && e.mode&0o170000 == 0o040000:
				// A sparse directory entry: a folder of one entry, its tree the entry's
				// (update_one's leaf).
				fmt.Fprintf(&body, "40000 %s\x00", rest[:slash])
				body.Write(e.oid)
				out[prefix+rest] = cacheTreeNode{1, e.oid}
				i++
			case slash >= 0:
				sub := prefix + rest[:slash+1]
				j := i + 1
				for j < hi && strings.HasPrefix(es[j].name, sub) {
					j++
				}
				id, subOK := build(i, j, sub)
				ok = ok && subOK
				fmt.Fprintf(&body, "40000 %s\x00", rest[:slash])
				body.Write(id)
				i = j
			default:
				fmt.Fprintf(&body, "%o %s\x00", e.mode, rest)
				body.Write(e.oid)
				i++
			}
		}
		id := treeID(body.Bytes(), hashLen)
		if ok {
			out[prefix] = cacheTreeNode{hi - lo, id}
		}
		return id, ok
	}
	build(0, len(es), "")
	return out
}

// cacheTreeForged returns the folders whose tree the cache tree p (the TREE extension's
// payload) takes as valid while it is not the one git writes from the entries es beneath them
// (entryTrees): an honest cache tree matches, a forged one has git commit other trees than the
// entries' while git status and git diff --cached show nothing (review 20). A cache tree that
// cannot be read is forged at its top.
//
// A folder whose tree id alone differs is read, when list is not nil: git primes the cache
// tree with the ids of the trees it reads (git reset, git read-tree: prime_cache_tree), and a
// tree an older git or another tool wrote can hold modes git reads as others (100664 for
// 100644), while the index holds the modes as read. Such a folder is honest when its tree,
// each mode as git reads it, is the entries' tree byte for byte (sameAsRead): git commits the
// same content under another id. A tree list cannot read stays forged.
func cacheTreeForged(p []byte, es []indexEntry, hashLen int, list treeLister) []string {
	nodes, err := parseCacheTree(p, hashLen)
	if err != nil {
		return []string{"/"}
	}
	want := entryTrees(es, hashLen)
	paths := slices.Sorted(maps.Keys(nodes)) // a folder before those beneath it (read)
	read := map[string][]byte{}
	var out []string
	for _, path := range paths {
		n := nodes[path]
		w, ok := want[path]
		if ok && w.count == n.count && (bytes.Equal(w.oid, n.oid) || list != nil && sameAsRead(path, n.oid, w.oid, want, read, hashLen, list)) {
			continue
		}
		out = append(out, "/"+path)
	}
	return out
}

// treeLister lists the tree oid and every tree beneath it as git reads them (lsTree).
type treeLister func(oid []byte) ([]treeItem, error)

// treeItem is an entry of a listed tree or of a tree beneath it, in the trees' own order (git
// ls-tree -r -t): its mode, id, and path from the listed tree.
type treeItem struct {
	mode uint32
	oid  []byte
	path string
}

// canonMode is the mode git gives a tree entry when it reads it (tree-walk.c, canon_mode): a
// regular file 100755 when its owner may execute it, else 100644; a symlink 120000; a folder
// 40000; anything else a gitlink, 160000.
func canonMode(m uint32) uint32 {
	switch m & 0o170000 {
	case 0o100000:
		if m&0o100 != 0 {
			return 0o100755
		}
		return 0o100644
	case 0o120000, 0o040000:
		return m & 0o170000
	}
	return 0o160000
}

// sameAsRead reports whether the tree oid, which the cache tree names for the folder path, is
// the tree wantID of the entries once each of its modes (and those of the trees beneath) is
// the one git reads (canonMode): the tree id git would write after reading it into an index.
// A tree beneath whose own id is that of the entries' folder there (a sparse directory entry
// holds the id it read) is taken as it is. read holds, by folder and tree id ("PATH\x00ID"), the
// ids computed from earlier listings, so a folder beneath one already listed lists nothing.
func sameAsRead(path string, oid, wantID []byte, want map[string]cacheTreeNode, read map[string][]byte, hashLen int, list treeLister) bool {
	if id, ok := read[path+"\x00"+string(oid)]; ok {
		return bytes.Equal(id, wantID)
	}
	items, err := list(oid)
	if err != nil {
		return false
	}
	kids := map[string][]treeItem{} // by folder beneath path, in the trees' order
	for _, it := range items {
		dir := ""
		if i := strings.LastIndexByte(it.path, '/'); i >= 0 {
			dir = it.path[:i+1]
		}
		kids[dir] = append(kids[dir], it)
	}
	var build func(dir string, oid []byte, depth int) []byte
	build = func(dir string, oid []byte, depth int) []byte {
		if w, ok := want[path+dir]; ok && bytes.Equal(w.oid, oid) || depth > 4096 {
			return oid
		}
		var body bytes.Buffer
		for _, it := range kids[dir] {
			m, id := canonMode(it.mode), it.oid
			if m == 0o040000 {
				id = build(it.path+"/", it.oid, depth+1)
			}
			fmt.Fprintf(&body, "%o %s\x00", m, it.path[len(dir):])
			body.Write(id)
		}
		id := treeID(body.Bytes(), hashLen)
		read[path+dir+"\x00"+string(oid)] = id
		return id
	}
	return bytes.Equal(build("", oid, 0), wantID)
}

// treeID is the id of the tree object of content body, SHA-1 or SHA-256 by hashLen.
func treeID(body []byte, hashLen int) []byte {
	var h hash.Hash = sha1.New()
	if hashLen == sha256.Size {
		h = sha256.New()
	}
	fmt.Fprintf(h, "tree %d\x00", len(body))
	h.Write(body)
	return h.Sum(nil)
}

// treeListTimeout bounds one git ls-tree of a cache tree's tree.
const treeListTimeout = 30 * time.Second

// lsTree lists the tree oid of the object store objects, and every tree beneath it, with the
// host's git (git ls-tree -r -t -z: the modes as git reads them). git runs in an empty
// repository of its own, a temporary folder that is also its home and current directory, with
// objects as its object store and no configuration but that repository's (no system or global
// one, none of the workspace), no replace refs, and a timeout; at most maxIndexBytes of what
// it prints is read.
func lsTree(objects string, oid []byte, hashLen int) ([]treeItem, error) {
	git, err := hostprog.Find("git")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "agentbox-tree-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
	if hashLen == sha256.Size {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = sha256\n"
	}
	for _, d := range []string{"objects", "refs"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o700); err != nil {
			return nil, err
		}
	}
	for name, s := range map[string]string{"HEAD": "ref: refs/heads/main\n", "config": config} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(s), 0o600); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), treeListTimeout)
	defer cancel()
	run := func(stdin string, args ...string) ([]byte, error) {
		// git under an address-space bound (the box wrote the objects: a tree that inflates to
		// gigabytes must not cost the host that; review 21b), with its pack windows bounded to
		// fit beneath it.
		cmd := hostprog.Command(ctx, "sh", append([]string{"-c", `ulimit -v ` + strconv.Itoa(treeListMemKB) + ` && exec "$@"`, "sh", git.Path,
			"-c", "core.packedGitWindowSize=32m", "-c", "core.packedGitLimit=256m", "-c", "core.deltaBaseCacheLimit=32m"}, args...)...)
		cmd.Dir = tmp
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GIT_DIR=" + tmp, "GIT_OBJECT_DIRECTORY=" + objects,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_NO_REPLACE_OBJECTS=1",
			"GIT_CEILING_DIRECTORIES=" + filepath.Dir(tmp), "LC_ALL=C"}
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		b, rerr := io.ReadAll(io.LimitReader(stdout, maxIndexBytes+1))
		if len(b) > maxIndexBytes {
			cancel() // git is killed: its listing is not read
			rerr = fmt.Errorf("git %s printed more than %d bytes", args[0], maxIndexBytes)
		}
		werr := cmd.Wait()
		switch {
		case rerr != nil:
			return nil, rerr
		case ctx.Err() != nil:
			return nil, fmt.Errorf("git %s: %w", args[0], ctx.Err())
		case werr != nil:
			return nil, fmt.Errorf("git %s: %v: %s", args[0], werr, strings.TrimSpace(stderr.String()))
		}
		return b, nil
	}
	// git ls-tree lists the tree of a commit or a tag it is given, and a commit named as a
	// folder's tree would go into the user's next commit as that folder (review 21b): the
	// object and every tree beneath it must be trees.
	id := hex.EncodeToString(oid)
	kind, err := run("", "cat-file", "-t", id)
	if err != nil {
		return nil, err
	}
	if k := strings.TrimSpace(string(kind)); k != "tree" {
		return nil, fmt.Errorf("%s is a %s, not a tree", id, k)
	}
	b, err := run("", "ls-tree", "-r", "-t", "-z", id)
	if err != nil {
		return nil, err
	}
	items, err := parseLsTree(b, hashLen)
	if err != nil {
		return nil, err
	}
	var subtrees strings.Builder
	n := 0
	for _, it := range items {
		if it.mode == 0o040000 {
			fmt.Fprintf(&subtrees, "%x\n", it.oid)
			n++
		}
	}
	if n > 0 {
		kinds, err := run(subtrees.String(), "cat-file", "--batch-check=%(objecttype)")
		if err != nil {
			return nil, err
		}
		for _, k := range strings.Split(strings.TrimSuffix(string(kinds), "\n"), "\n") {
			if k != "tree" {
				return nil, fmt.Errorf("a folder of %s is a %s, not a tree", id, k)
			}
		}
		if c := strings.Count(string(kinds), "\n"); c != n {
			return nil, fmt.Errorf("git cat-file answered %d of %d folders of %s", c, n, id)
		}
	}
	return items, nil
}

// treeListMemKB bounds the address space of the git that lsTree runs (1 GiB, in KiB).
const treeListMemKB = 1 << 20

// parseLsTree reads the output of git ls-tree -z: per entry "MODE TYPE ID\tPATH\0".
func parseLsTree(b []byte, hashLen int) ([]treeItem, error) {
	var out []treeItem
	for len(b) > 0 {
		nul := bytes.IndexByte(b, 0)
		if nul < 0 {
			return nil, errors.New("git ls-tree: a line without its end")
		}
		meta, path, ok := strings.Cut(string(b[:nul]), "\t")
		b = b[nul+1:]
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("git ls-tree: a bad line %q", meta)
		}
		mode, err1 := strconv.ParseUint(f[0], 8, 32)
		oid, err2 := hex.DecodeString(f[2])
		if err1 != nil || err2 != nil || len(oid) != hashLen {
			return nil, fmt.Errorf("git ls-tree: a bad line %q", meta)
		}
		out = append(out, treeItem{uint32(mode), oid, path})
	}
	return out, nil
}
