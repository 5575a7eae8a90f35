package integrity

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// indexTree returns the entries of ws's .git/index and its cache tree's payload.
func indexTree(t testing.TB, ws string, hashLen int) ([]indexEntry, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, ".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	es, exts, err := indexContents(b, hashLen)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range exts {
		if x.sig == "TREE" {
			return es, b[x.start+8 : x.end]
		}
	}
	t.Fatal("the index has no cache tree")
	return nil, nil
}

// TestCacheTreeAsGit: the cache tree git writes (git add, git write-tree, git commit) matches
// the trees computed from the entries (entryTrees), SHA-1 and SHA-256, with nested folders, an
// executable, a symlink, a gitlink, and folders whose names sort around their files' ("a.c",
// "a/b", "a-"); and the cache tree of an index that staged another pkg/main.go, put into one
// whose entries are HEAD's (review 20's forged index), is named, at pkg/ and the top.
func TestCacheTreeAsGit(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			ws, git := oneCommitRepo(t)
			hashLen := 20
			if format == "sha256" {
				ws = filepath.Join(ws, "s")
				git("init", "-q", "--object-format=sha256", "-b", "main", ws)
				git = func(args ...string) string { return gitIn(ws, "", false, args...) }
				hashLen = 32
			}
			for _, f := range []string{"pkg/main.go", "a.c", "a/b", "a-", "a/x/y/z", "deep/1/2/3/4", "README"} {
				mustWrite(t, filepath.Join(ws, f), f+"\n")
			}
			os.Chmod(filepath.Join(ws, "a.c"), 0o755)
			os.Symlink("a.c", filepath.Join(ws, "link"))
			sub := filepath.Join(ws, "sub")
			git("init", "-q", "--object-format="+format, "-b", "main", sub)
			mustWrite(t, filepath.Join(sub, "f"), "f\n")
			gitIn(sub, "", false, "add", "f")
			gitIn(sub, "", false, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "s")
			git("add", "-A")
			git("write-tree")
			es, p := indexTree(t, ws, hashLen)
			if nodes, err := parseCacheTree(p, hashLen); err != nil || len(nodes) < 6 {
				t.Fatalf("cache tree of git write-tree: %d valid folders (%v), %v", len(nodes), nodes, err)
			}
			if f := cacheTreeForged(p, es, hashLen, nil); len(f) > 0 {
				t.Fatalf("git's own cache tree (git write-tree) taken for forged at %v", f)
			}
			git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "two")
			es, p = indexTree(t, ws, hashLen)
			if f := cacheTreeForged(p, es, hashLen, nil); len(f) > 0 {
				t.Fatalf("git's own cache tree (git commit) taken for forged at %v", f)
			}
			// The forged index: HEAD's entries, the cache tree of one that staged the box's file.
			head := slices.Clone(es)
			mustWrite(t, filepath.Join(ws, "pkg/main.go"), "BOX CODE\n")
			git("add", "pkg/main.go")
			git("write-tree")
			_, forged := indexTree(t, ws, hashLen)
			if f := cacheTreeForged(forged, head, hashLen, nil); !slices.Equal(f, []string{"/", "/pkg/"}) {
				t.Fatalf("the forged cache tree named %v, want [/ /pkg/]", f)
			}
			// Its trees read (they differ from the entries' in content, not only in modes):
			// forged all the same.
			if f := cacheTreeForged(forged, head, hashLen, objectsTrees(ws, hashLen)); !slices.Equal(f, []string{"/", "/pkg/"}) {
				t.Fatalf("the forged cache tree, its trees read, named %v, want [/ /pkg/]", f)
			}
		})
	}
}

// objectsTrees lists the trees of ws's repository (lsTree of .git/objects).
func objectsTrees(ws string, hashLen int) treeLister {
	return func(oid []byte) ([]treeItem, error) {
		return lsTree(filepath.Join(ws, ".git/objects"), oid, hashLen)
	}
}

// rawTree writes, as it is (git mktree would write canonical modes), the tree treeish of ws
// with the modes and ids of change (by name: "MODE" or "MODE ID", MODE "" to keep it), in
// the order of names (nil: the tree's own), and returns its id.
func rawTree(t testing.TB, ws, treeish string, change map[string]string, names []string) string {
	t.Helper()
	lines := map[string][2]string{}
	var order []string
	for _, l := range strings.Split(gitOK(t, ws, "", "ls-tree", treeish), "\n") {
		meta, name, _ := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		lines[name] = [2]string{f[0], f[2]}
		order = append(order, name)
	}
	if names != nil {
		order = names
	}
	var body bytes.Buffer
	for _, name := range order {
		mode, id := lines[name][0], lines[name][1]
		if c, ok := change[name]; ok {
			m, i, _ := strings.Cut(c, " ")
			if m != "" {
				mode = m
			}
			if i != "" {
				id = i
			}
		}
		b, err := hex.DecodeString(id)
		if err != nil {
			t.Fatalf("tree %s: %q: %v", treeish, name, err)
		}
		fmt.Fprintf(&body, "%s %s\x00", mode, name)
		body.Write(b)
	}
	return gitOK(t, ws, body.String(), "hash-object", "-t", "tree", "--literally", "-w", "--stdin")
}

// rootCacheTree is the payload of a cache tree that takes only the top as valid, of count
// entries and tree id.
func rootCacheTree(t *testing.T, count int, id string) []byte {
	t.Helper()
	b, err := hex.DecodeString(id)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(fmt.Sprintf("\x00%d 0\n", count)), b...)
}

// oddModesRepo makes a repository of the object format whose HEAD's trees hold modes git reads
// as others (100664, 100775, 100600: at the top, in pkg/, pkg/sub/ and lib/), its index and
// cache tree primed from them by git reset --hard; it returns the repository, its id length,
// and the ids of the top tree and of lib/'s.
func oddModesRepo(t testing.TB, format string) (ws string, hashLen int, root, lib string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	hashLen = 20
	if format == "sha256" {
		hashLen = 32
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	ws = filepath.Join(dir, "r")
	gitOK(t, dir, "", "init", "-q", "--object-format="+format, "-b", "main", ws)
	git := func(args ...string) string { return gitOK(t, ws, "", args...) }
	for _, f := range []string{"README", "run.sh", "pkg/main.go", "pkg/sub/x", "lib/a"} {
		mustWrite(t, filepath.Join(ws, f), f+"\n")
	}
	os.Chmod(filepath.Join(ws, "run.sh"), 0o755)
	git("add", "-A")
	git("commit", "-qm", "one")
	sub := rawTree(t, ws, "HEAD:pkg/sub", map[string]string{"x": "100664"}, nil)
	pkg := rawTree(t, ws, "HEAD:pkg", map[string]string{"main.go": "100664", "sub": "40000 " + sub}, nil)
	lib = rawTree(t, ws, "HEAD:lib", map[string]string{"a": "100600"}, nil)
	root = rawTree(t, ws, "HEAD", map[string]string{"README": "100664", "run.sh": "100775", "pkg": "40000 " + pkg, "lib": "40000 " + lib}, nil)
	if raw := git("cat-file", "tree", root); !strings.Contains(raw, "100664 README") || !strings.Contains(raw, "100775 run.sh") {
		t.Fatalf("the top tree holds no odd mode (the test would prove nothing): %q", raw)
	}
	git("update-ref", "refs/heads/main", git("commit-tree", "-p", "HEAD", "-m", "an old tool's trees", root))
	git("reset", "-q", "--hard")
	return ws, hashLen, root, lib
}

// TestCacheTreeOddModes: an honest cache tree that git primed (git reset --hard, as a box's
// agent runs it) from a HEAD whose trees hold modes git reads as others (100664 and 100775,
// which an older git or another tool wrote) names trees other than the entries' by id, and is
// not taken for forged once its trees are read (one git ls-tree for the top and the folders
// beneath); with a sparse index too, whose sparse directory entry holds the tree id git read.
// A tree that differs from the entries' in more than the modes git reads (an executable bit,
// the order of its entries), or that cannot be read, is forged (review 20b,
// TestAttackHonestCacheTreeOfOddModesTakenForForged).
func TestCacheTreeOddModes(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			ws, hashLen, root, lib := oddModesRepo(t, format)
			git := func(args ...string) string { return gitOK(t, ws, "", args...) }
			calls := 0
			counted := func(oid []byte) ([]treeItem, error) { calls++; return objectsTrees(ws, hashLen)(oid) }
			es, p := indexTree(t, ws, hashLen)
			if f := cacheTreeForged(p, es, hashLen, nil); !slices.Equal(f, []string{"/", "/lib/", "/pkg/", "/pkg/sub/"}) {
				t.Fatalf("the primed cache tree, ids compared alone, named %v, want [/ /lib/ /pkg/ /pkg/sub/] (the test would prove nothing)", f)
			}
			if f := cacheTreeForged(p, es, hashLen, counted); len(f) > 0 || calls != 1 {
				t.Fatalf("git's own cache tree, primed from trees of odd modes, taken for forged at %v (%d listings, want 1)", f, calls)
			}
			ix := &gitIndex{path: filepath.Join(ws, ".git/index"), top: ws, hashLen: hashLen}
			var err error
			if ix.b, _, ix.entries, ix.exts, err = readIndex(ws, ix.path, hashLen); err != nil {
				t.Fatal(err)
			}
			if f := forgedCacheTree(ws, ix); len(f) > 0 {
				t.Fatalf("forgedCacheTree took git's own cache tree, primed from trees of odd modes, for forged at %v", f)
			}

			// Trees that git reads as other content than the entries: forged.
			for name, id := range map[string]string{
				"run.sh not executable": rawTree(t, ws, "HEAD", map[string]string{"run.sh": "100664"}, nil),
				"entries reordered":     rawTree(t, ws, "HEAD", nil, []string{"README", "lib", "run.sh", "pkg"}),
				"absent":                strings.Repeat("ab", hashLen),
			} {
				if f := cacheTreeForged(rootCacheTree(t, len(es), id), es, hashLen, objectsTrees(ws, hashLen)); !slices.Equal(f, []string{"/"}) {
					t.Errorf("%s: a cache tree naming tree %s at the top named %v, want [/]", name, id, f)
				}
			}
			// The honest top alone, as a payload of its own: not forged (the case above, the
			// forged ones' counterpart).
			if f := cacheTreeForged(rootCacheTree(t, len(es), root), es, hashLen, objectsTrees(ws, hashLen)); len(f) > 0 {
				t.Errorf("the top tree of odd modes alone taken for forged at %v", f)
			}

			// A sparse index: lib/ is one entry, a sparse directory holding the id git read.
			git("sparse-checkout", "set", "--cone", "--sparse-index", "pkg")
			git("reset", "-q", "--hard")
			es, p = indexTree(t, ws, hashLen)
			if !slices.ContainsFunc(es, func(e indexEntry) bool { return e.name == "lib/" && hex.EncodeToString(e.oid) == lib }) {
				t.Fatalf("the sparse index holds no sparse directory lib/ of tree %s (the test would prove nothing)", lib)
			}
			if f := cacheTreeForged(p, es, hashLen, nil); !slices.Contains(f, "/") {
				t.Fatalf("the primed cache tree of the sparse index, ids compared alone, named %v, want / among them (the test would prove nothing)", f)
			}
			if f := cacheTreeForged(p, es, hashLen, objectsTrees(ws, hashLen)); len(f) > 0 {
				t.Fatalf("git's own cache tree of a sparse index, primed from trees of odd modes, taken for forged at %v", f)
			}
		})
	}
}

// TestCanonMode: the modes git gives tree entries it reads (tree-walk.c, canon_mode).
func TestCanonMode(t *testing.T) {
	for in, want := range map[uint32]uint32{
		0o100644: 0o100644, 0o100664: 0o100644, 0o100600: 0o100644, 0o100444: 0o100644,
		0o100755: 0o100755, 0o100775: 0o100755, 0o100700: 0o100755, 0o100100: 0o100755,
		0o120000: 0o120000, 0o120777: 0o120000, 0o040000: 0o040000, 0o040755: 0o040000,
		0o160000: 0o160000, 0o010644: 0o160000, 0: 0o160000,
	} {
		if got := canonMode(in); got != want {
			t.Errorf("canonMode(%o) = %o, want %o", in, got, want)
		}
	}
}

// splitRepo makes a repository at ws whose index is split (git update-index --split-index)
// with its cache tree, valid, in the split file, and returns that index as read.
func splitRepo(t *testing.T, ws string) *gitIndex {
	t.Helper()
	gitOK(t, ws, "", "init", "-q", "-b", "main", ".")
	for _, f := range []string{"README", "pkg/main.go", "go.mod"} {
		mustWrite(t, filepath.Join(ws, f), f+"\n")
	}
	gitOK(t, ws, "", "add", "-A")
	gitOK(t, ws, "", "commit", "-qm", "one")
	gitOK(t, ws, "", "update-index", "--split-index")
	gitOK(t, ws, "", "write-tree")
	ix := &gitIndex{path: filepath.Join(ws, ".git/index"), top: ws, hashLen: 20}
	var err error
	if ix.b, _, ix.entries, ix.exts, err = readIndex(ws, ix.path, 20); err != nil {
		t.Fatal(err)
	}
	sigs := ""
	for _, x := range ix.exts {
		sigs += x.sig + " "
	}
	if !strings.Contains(sigs, "link") || !strings.Contains(sigs, "TREE") || len(ix.entries) != 3 {
		t.Fatalf("the split index has extensions %q and %d entries, want link and TREE and 3 (the test would prove nothing)", sigs, len(ix.entries))
	}
	return ix
}

// TestSplitIndexCacheTreeUnreadable: the cache tree of a split index lies in the split file,
// read again by its range (readIndexRange) after the merged entries were read; when that read
// fails (the box rewrote the split file shorter meanwhile, or put there a symlink leading out
// of the workspace), the cache tree is taken for forged at its top, never for honest; git's
// own cache tree of the split index, read whole, is honest.
func TestSplitIndexCacheTreeUnreadable(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct {
		name    string
		replace func(t *testing.T, index string)
	}{
		{"rewritten shorter", func(t *testing.T, index string) {
			b, err := os.ReadFile(index)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, index+".new", string(b[:len(b)/2]))
			if err := os.Rename(index+".new", index); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink leading out", func(t *testing.T, index string) {
			out := filepath.Join(t.TempDir(), "index")
			if err := os.Rename(index, out); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(out, index); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			ix := splitRepo(t, ws)
			if f := forgedCacheTree(ws, ix); len(f) > 0 {
				t.Fatalf("git's own cache tree of the split index taken for forged at %v", f)
			}
			c.replace(t, ix.path)
			if f := forgedCacheTree(ws, ix); !slices.Equal(f, []string{"/"}) {
				t.Fatalf("the cache tree of a split file that could not be read again named %v, want [/]", f)
			}
		})
	}
}

// TestSplitIndexSharedUnreadableWhileBoxRuns: a box splits the index and puts its shared
// index behind an absolute symlink to a file of the workspace (the workspace is at its own
// path in the box): git reads the shared index through it, the check cannot (it follows no
// symlink out of the folder, and an absolute one counts as out). While the box runs, the
// check of an event in the repository (verifyCacheTrees) read nothing and left the split
// file's cache tree, unchecked, to the user's git commit (review 20b's plant carried through).
// Now the index, written while the box ran and not readable by the check, goes aside, as at a
// full check.
func TestSplitIndexSharedUnreadableWhileBoxRuns(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	gitOK(t, ws, "", "init", "-q", "-b", "main", ".")
	mustWrite(t, filepath.Join(ws, "README"), "one\n")
	gitOK(t, ws, "", "add", "-A")
	gitOK(t, ws, "", "commit", "-qm", "one")
	s := Snapshot(resolveWS(t, ws), Limits{})
	ix := splitRepo(t, ws)
	shared, _ := filepath.Glob(filepath.Join(ws, ".git/sharedindex.*"))
	if len(shared) != 1 {
		t.Fatalf("shared indexes %v, want one", shared)
	}
	moved := filepath.Join(ws, ".git/shared.real")
	if err := os.Rename(shared[0], moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, shared[0]); err != nil {
		t.Fatal(err)
	}
	if out := gitOK(t, ws, "", "ls-files"); out != "README\ngo.mod\npkg/main.go" {
		t.Fatalf("git does not read the shared index through the absolute symlink: %q (the test would prove nothing)", out)
	}
	if _, _, _, _, err := readIndex(ws, ix.path, 20); !errors.Is(err, errSplitIndex) {
		t.Fatalf("the check read the split index: %v (the test would prove nothing)", err)
	}
	tr := s.verifyCacheTrees([]string{ws})
	if len(tr) != 1 || !tr[0].Alert || tr[0].Path != ix.path || !strings.Contains(tr[0].Detail, "moved aside to") {
		t.Fatalf("transitions %+v, want one alert on the index saying it was moved aside", tr)
	}
	if _, err := os.Lstat(ix.path); !os.IsNotExist(err) {
		t.Errorf("the index, its cache tree unchecked, is still there: %v", err)
	}
}

// BenchmarkCacheTreeOddModes measures cacheTreeForged on the cache tree git primed from trees
// of odd modes (oddModesRepo: 5 entries, 4 folders): "ids" compares ids alone (the common
// path: an honest cache tree git wrote), "read" lists the top tree with git ls-tree (lsTree)
// to find it honest, the cost a mismatch adds.
func BenchmarkCacheTreeOddModes(b *testing.B) {
	ws, hashLen, _, _ := oddModesRepo(b, "sha1")
	es, p := indexTree(b, ws, hashLen)
	for _, c := range []struct {
		name string
		list treeLister
		want int
	}{{"ids", nil, 4}, {"read", objectsTrees(ws, hashLen), 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if f := cacheTreeForged(p, es, hashLen, c.list); len(f) != c.want {
					b.Fatalf("named %v, want %d folders", f, c.want)
				}
			}
		})
	}
}
