package integrity

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
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
		var h hash.Hash = sha1.New()
		if hashLen == sha256.Size {
			h = sha256.New()
		}
		fmt.Fprintf(h, "tree %d\x00", body.Len())
		h.Write(body.Bytes())
		id := h.Sum(nil)
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
// (entryTrees): an honest cache tree always matches, a forged one has git commit other trees
// than the entries' while git status and git diff --cached show nothing (review 20). A cache
// tree that cannot be read is forged at its top.
func cacheTreeForged(p []byte, es []indexEntry, hashLen int) []string {
	nodes, err := parseCacheTree(p, hashLen)
	if err != nil {
		return []string{"/"}
	}
	want := entryTrees(es, hashLen)
	var out []string
	for path, n := range nodes {
		w, ok := want[path]
		if !ok || w.count != n.count || !bytes.Equal(w.oid, n.oid) {
			out = append(out, "/"+path)
		}
	}
	slices.Sort(out)
	return out
}
