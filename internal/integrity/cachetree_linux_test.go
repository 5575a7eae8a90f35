package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// indexTree returns the entries of ws's .git/index and its cache tree's payload.
func indexTree(t *testing.T, ws string, hashLen int) ([]indexEntry, []byte) {
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
			if f := cacheTreeForged(p, es, hashLen); len(f) > 0 {
				t.Fatalf("git's own cache tree (git write-tree) taken for forged at %v", f)
			}
			git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "two")
			es, p = indexTree(t, ws, hashLen)
			if f := cacheTreeForged(p, es, hashLen); len(f) > 0 {
				t.Fatalf("git's own cache tree (git commit) taken for forged at %v", f)
			}
			// The forged index: HEAD's entries, the cache tree of one that staged the box's file.
			head := slices.Clone(es)
			mustWrite(t, filepath.Join(ws, "pkg/main.go"), "BOX CODE\n")
			git("add", "pkg/main.go")
			git("write-tree")
			_, forged := indexTree(t, ws, hashLen)
			if f := cacheTreeForged(forged, head, hashLen); !slices.Equal(f, []string{"/", "/pkg/"}) {
				t.Fatalf("the forged cache tree named %v, want [/ /pkg/]", f)
			}
		})
	}
}
