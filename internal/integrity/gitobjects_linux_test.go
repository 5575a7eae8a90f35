package integrity

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestObjectsForgedMovedAside guards review 12, F8: git reads an object by its name (loose)
// or through its pack's index and checks neither against the id. A box that rewrote the loose
// object of a committed Makefile, added a pack whose index files other content under the id of
// a committed build.sh, or deleted an object and named a store of its own in
// objects/info/alternates, had the host's git show (and check out, diff, archive) its content
// under the reviewed commit. The check at exit moves each aside (SHA-1 and SHA-256
// repositories): the host's git then shows the reviewed build.sh and refuses the two missing
// objects instead of reading the box's. What the box's own git wrote (a commit's loose objects,
// a fetched pack) stays, and a commit-graph it wrote is moved aside without an alert.
func TestObjectsForgedMovedAside(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel() // each variant its own repositories
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			other, scratch := t.TempDir(), t.TempDir()
			git := func(dir string, args ...string) string { return gitIn(dir, "", false, args...) }
			for _, d := range []string{ws, other, scratch} {
				git(d, "init", "-q", "--object-format="+format, "-b", "main", d)
			}
			mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed build\n")
			mustWrite(t, filepath.Join(ws, "build.sh"), "echo reviewed\n")
			mustWrite(t, filepath.Join(ws, "lib.c"), "int reviewed;\n")
			git(ws, "add", ".")
			git(ws, "commit", "-qm", "init")
			mustWrite(t, filepath.Join(other, "other.txt"), "other history\n")
			git(other, "add", ".")
			git(other, "commit", "-qm", "other")
			id := func(spec string) string { return strings.TrimSpace(git(ws, "rev-parse", spec)) }
			mk, sh, lib := id("HEAD:Makefile"), id("HEAD:build.sh"), id("HEAD:lib.c")
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box's own git: a commit (loose objects), a fetch (a pack), a commit-graph.
			mustWrite(t, filepath.Join(ws, "new.txt"), "new work\n")
			git(ws, "add", "new.txt")
			git(ws, "commit", "-qm", "new")
			git(ws, "-c", "fetch.unpackLimit=1", "fetch", "-q", other, "main:other")
			git(ws, "commit-graph", "write", "--reachable")
			// The attacks: Makefile's loose object rewritten, a pack whose index files another
			// blob under build.sh's id.
			pack := forgeObjects(t, filepath.Join(ws, ".git/objects"), scratch, mk, sh)
			// lib.c's object deleted, and found in an alternate store the box made.
			alt := filepath.Join(ws, ".cache/objs")
			mustWrite(t, filepath.Join(alt, lib[:2], lib[2:]), string(deflate(t, "blob 10\x00int pwnd;\n")))
			os.Remove(filepath.Join(ws, ".git/objects", lib[:2], lib[2:]))
			mustWrite(t, filepath.Join(ws, ".git/objects/info/alternates"), alt+"\n")
			for spec, want := range map[string]string{"HEAD~1:Makefile": "PWNED", "HEAD~1:build.sh": "pwned", "HEAD~1:lib.c": "pwnd"} {
				if out := git(ws, "show", spec); !strings.Contains(out, want) {
					t.Fatalf("the host's git show %s gives %q here, not the box's content", spec, out)
				}
			}

			got := map[string]Transition{}
			for _, tr := range s.VerifyExec() {
				got[strings.TrimPrefix(tr.Path, ws+"/")] = tr
			}
			for _, p := range []string{".git/objects/" + mk[:2] + "/" + mk[2:], ".git/objects/pack/pack-" + pack + ".pack",
				".git/objects/pack/pack-" + pack + ".idx", ".git/objects/info/alternates"} {
				if tr := got[p]; !tr.Alert || !strings.Contains(tr.Detail, "moved aside to") {
					t.Errorf("%s: transition %+v, want an alert saying it was moved aside", p, tr)
				}
				delete(got, p)
			}
			if tr := got[".git/objects/info/commit-graph"]; tr.Alert || !strings.Contains(tr.Detail, "moved aside to") {
				t.Errorf("commit-graph: transition %+v, want one saying it was moved aside, not an alert", tr)
			}
			delete(got, ".git/objects/info/commit-graph")
			if len(got) != 0 {
				t.Errorf("unexpected transitions (the box's own commit and fetch): %+v", got)
			}
			if out := git(ws, "show", "HEAD~1:build.sh"); out != "echo reviewed\n" {
				t.Errorf("git show HEAD~1:build.sh after the check: %q", out)
			}
			for _, spec := range []string{"HEAD~1:Makefile", "HEAD~1:lib.c"} {
				if out := git(ws, "show", spec); strings.Contains(out, "PWNED") || strings.Contains(out, "pwnd") || !strings.Contains(out, "exit status") {
					t.Errorf("git show %s after the check: %q, want git's refusal of a missing object", spec, out)
				}
			}
			if out := git(ws, "show", "HEAD:new.txt", "other:other.txt"); out != "new work\nother history\n" {
				t.Errorf("the box's own objects after the check: %q", out)
			}
			if again := s.VerifyExec(); len(again) != 0 {
				t.Errorf("reported again: %+v", again)
			}
		})
	}
}

// TestObjectsForgedPackAnyName (review 15, F16): git loads every *.idx of objects/pack whose
// .pack is there, whatever its name (packfile.c), where the check verified only pack-*: a box's
// lying pack named evil.pack had the host's git show its content under the reviewed id. For
// each name git reads (checked here against git itself), the check moves the pair aside.
func TestObjectsForgedPackAnyName(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, name := range []string{"evil", ".hidden", "x.y", "pack"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			scratch := t.TempDir()
			git := func(dir string, args ...string) string { return gitIn(dir, "", false, args...) }
			for _, d := range []string{ws, scratch} {
				git(d, "init", "-q", "-b", "main", d)
			}
			mustWrite(t, filepath.Join(ws, "build.sh"), "echo reviewed\n")
			git(ws, "add", ".")
			git(ws, "commit", "-qm", "init")
			sh := strings.TrimSpace(git(ws, "rev-parse", "HEAD:build.sh"))
			s := Snapshot(resolveWS(t, ws), Limits{})
			objects := filepath.Join(ws, ".git/objects")
			// The committed blob leaves the loose store (a gc would pack it): only the pack
			// can give it then.
			os.Remove(filepath.Join(objects, sh[:2], sh[2:]))
			evil := strings.TrimSpace(gitIn(scratch, "echo pwned\n", false, "hash-object", "-w", "--stdin"))
			pack := strings.TrimSpace(gitIn(scratch, evil+"\n", false, "pack-objects", "-q", filepath.Join(objects, "pack/pack")))
			forgeIdxID(t, filepath.Join(objects, "pack/pack-"+pack+".idx"), sh)
			for _, ext := range []string{".pack", ".idx"} {
				if err := os.Rename(filepath.Join(objects, "pack/pack-"+pack+ext), filepath.Join(objects, "pack", name+ext)); err != nil {
					t.Fatal(err)
				}
			}
			if out := git(ws, "show", "HEAD:build.sh"); !strings.Contains(out, "pwned") {
				t.Fatalf("git does not read a pack named %s here (git show: %q): the name needs no check", name, out)
			}
			ts := s.VerifyExec()
			aside := 0
			for _, tr := range ts {
				if tr.Alert && strings.Contains(tr.Detail, "moved aside to") && strings.HasPrefix(filepath.Base(tr.Path), name+".") {
					aside++
				}
			}
			if aside != 2 {
				t.Errorf("transitions %+v, want %s.pack and %s.idx moved aside", ts, name, name)
			}
			if out := git(ws, "show", "HEAD:build.sh"); strings.Contains(out, "pwned") {
				t.Errorf("git show HEAD:build.sh after the check: %q", out)
			}
		})
	}
}

// forgeObjects does what the box does in the object store objects: it rewrites the loose
// object mk (a committed Makefile's) with other content, and adds a pack (made in the
// repository scratch) whose index files the blob "echo pwned" under the id sh. It returns the
// pack's name.
func forgeObjects(t *testing.T, objects, scratch, mk, sh string) string {
	t.Helper()
	loose := filepath.Join(objects, mk[:2], mk[2:])
	os.Chmod(loose, 0o644)
	if err := os.WriteFile(loose, deflate(t, "blob 26\x00all:\n\t@id > PWNED; echo x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	evil := strings.TrimSpace(gitIn(scratch, "echo pwned\n", false, "hash-object", "-w", "--stdin"))
	pack := strings.TrimSpace(gitIn(scratch, evil+"\n", false, "pack-objects", "-q", filepath.Join(objects, "pack/pack")))
	forgeIdxID(t, filepath.Join(objects, "pack/pack-"+pack+".idx"), sh)
	return pack
}

func deflate(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// forgeIdxID rewrites the version 2 index of a one-object pack to file its object under id
// (hex), with the fan-out and the index's checksum to match.
func forgeIdxID(t *testing.T, path, id string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString(id)
	if binary.BigEndian.Uint32(b[8+255*4:]) != 1 {
		t.Fatalf("%s holds more than one object", path)
	}
	for i := 0; i < 256; i++ {
		n := uint32(0)
		if i >= int(want[0]) {
			n = 1
		}
		binary.BigEndian.PutUint32(b[8+4*i:], n)
	}
	copy(b[8+256*4:], want)
	if len(want) == sha256.Size {
		s := sha256.Sum256(b[:len(b)-sha256.Size])
		copy(b[len(b)-sha256.Size:], s[:])
	} else {
		s := sha1.Sum(b[:len(b)-sha1.Size])
		copy(b[len(b)-sha1.Size:], s[:])
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestObjectsForgedSubmoduleNotCheckedOut guards the object stores of submodules that are not
// checked out (after git submodule deinit, or a clone without --recurse-submodules): no index
// leads to their gitdirs (GITDIR/modules/<name>, nested ones at any depth), but the host's git
// submodule update checks out from them. A box that rewrote the loose object of the
// submodule's committed Makefile, or added a pack whose index files other content under the id
// of its build.sh, had the host's git submodule update --init check out its content under the
// recorded commit. The check at exit moves both aside: the host's git then refuses the missing
// object and takes the other from the pack it fetched.
func TestObjectsForgedSubmoduleNotCheckedOut(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	lib, scratch := t.TempDir(), t.TempDir()
	git := func(dir string, args ...string) string {
		return gitIn(dir, "", false, append([]string{"-c", "protocol.file.allow=always"}, args...)...)
	}
	for _, d := range []string{ws, lib, scratch} {
		git(d, "init", "-q", "-b", "main", d)
	}
	mustWrite(t, filepath.Join(lib, "Makefile"), "all:\n\t@echo reviewed build\n")
	mustWrite(t, filepath.Join(lib, "build.sh"), "echo reviewed\n")
	git(lib, "add", ".")
	git(lib, "commit", "-qm", "lib")
	git(ws, "submodule", "add", "-q", lib, "lib")
	git(ws, "commit", "-qm", "add lib")
	git(ws, "submodule", "deinit", "-q", "-f", "lib") // .git/modules/lib stays, not checked out
	mod := filepath.Join(ws, ".git/modules/lib")
	id := func(spec string) string { return strings.TrimSpace(git(mod, "rev-parse", spec)) }
	mk, sh := id("HEAD:Makefile"), id("HEAD:build.sh")
	s := Snapshot(resolveWS(t, ws), Limits{})

	// The box: the Makefile's loose object rewritten, a pack filing another blob under
	// build.sh's id.
	pack := forgeObjects(t, filepath.Join(mod, "objects"), scratch, mk, sh)
	// Here, in a copy, the host's git submodule update checks out the box's content.
	cp := filepath.Join(t.TempDir(), "ws")
	if out, err := exec.Command("cp", "-a", ws, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	git(cp, "submodule", "update", "-q", "--init")
	for f, want := range map[string]string{"Makefile": "PWNED", "build.sh": "pwned"} {
		if b, _ := os.ReadFile(filepath.Join(cp, "lib", f)); !strings.Contains(string(b), want) {
			t.Fatalf("the host's git submodule update checked out lib/%s as %q here, not the box's content", f, b)
		}
	}

	got := map[string]Transition{}
	for _, tr := range s.VerifyExec() {
		got[strings.TrimPrefix(tr.Path, ws+"/")] = tr
	}
	for _, p := range []string{".git/modules/lib/objects/" + mk[:2] + "/" + mk[2:], ".git/modules/lib/objects/pack/pack-" + pack + ".pack",
		".git/modules/lib/objects/pack/pack-" + pack + ".idx"} {
		if tr := got[p]; !tr.Alert || !strings.Contains(tr.Detail, "moved aside to") {
			t.Errorf("%s: transition %+v, want an alert saying it was moved aside", p, tr)
		}
		delete(got, p)
	}
	if len(got) != 0 {
		t.Errorf("unexpected transitions: %+v", got)
	}
	out := git(ws, "submodule", "update", "-q", "--init")
	if b, _ := os.ReadFile(filepath.Join(ws, "lib/Makefile")); strings.Contains(string(b), "PWNED") || !strings.Contains(out, "exit status") {
		t.Errorf("git submodule update after the check: %q, lib/Makefile %q; want git's refusal of the missing object", out, b)
	}
	if out := git(mod, "show", "HEAD:build.sh"); out != "echo reviewed\n" {
		t.Errorf("git show HEAD:build.sh in the submodule after the check: %q", out)
	}
	if again := s.VerifyExec(); len(again) != 0 {
		t.Errorf("reported again: %+v", again)
	}
}

// TestForgedAmongManyAtExit: the check at exit reuses its hashes and readers from one object
// or file to the next (objectHasher); among 400 files committed during the launch (as a box's
// file-heavy work leaves them), the three loose objects the box then rewrote are the three
// moved aside, and the three files it edited behind stat data the index claims unchanged are
// the three reported; nothing else is (a reader or hash carried over wrongly would fail the
// objects and files after a forged one).
func TestForgedAmongManyAtExit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", "-b", "main", ws)
	s := Snapshot(resolveWS(t, ws), Limits{})
	for i := 0; i < 400; i++ {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("d%d/f%d.txt", i%40, i)), fmt.Sprintf("line %d needle\n", i))
	}
	git("add", "-A")
	git("-c", "user.name=box", "-c", "user.email=box@example.org", "commit", "-qm", "work")
	want := map[string]string{}
	for _, f := range []string{"d3/f3.txt", "d17/f217.txt", "d39/f399.txt"} {
		id := strings.TrimSpace(git("rev-parse", "HEAD:"+f))
		loose := filepath.Join(ws, ".git/objects", id[:2], id[2:])
		os.Chmod(loose, 0o644)
		if err := os.WriteFile(loose, deflate(t, "blob 6\x00PWNED\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		want[".git/objects/"+id[:2]+"/"+id[2:]] = "moved aside to"
	}
	for _, f := range []string{"d5/f5.txt", "d20/f220.txt", "d38/f398.txt"} {
		p := filepath.Join(ws, f)
		b, _ := os.ReadFile(p)
		mustWrite(t, p, strings.Replace(string(b), "needle", "NEEDLE", 1)) // the same size
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		forgeIndexStat(t, filepath.Join(ws, ".git/index"), f, p)
		want[f] = "claimed it unchanged"
	}
	got := map[string]string{}
	for _, tr := range s.VerifyExit() {
		got[strings.TrimPrefix(tr.Path, ws+"/")] = tr.Detail
	}
	for p, w := range want {
		if !strings.Contains(got[p], w) {
			t.Errorf("%s: transition %q, want one saying %q", p, got[p], w)
		}
		delete(got, p)
	}
	if len(got) != 0 {
		t.Errorf("transitions beyond the forged ones: %v", got)
	}
}

// TestLooseObjectsInBatches: the loose objects of one fan-out folder are read and checked by
// batches of looseBatch (review 30b: a folder's millions of names were held at once); among
// more than a batch of valid objects the launch wrote in objects/00, the three forged ones,
// wherever the folder's order puts them, are the three moved aside.
func TestLooseObjectsInBatches(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	gd := filepath.Join(ws, ".git")
	dir := filepath.Join(gd, "objects", "00")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &State{Workspace: ws, Started: time.Now()}
	forged := map[string]bool{}
	n := 0
	for i := 0; n < looseBatch+100; i++ {
		c := strconv.Itoa(i)
		body := fmt.Sprintf("blob %d\x00%s", len(c), c)
		sum := sha1.Sum([]byte(body))
		if sum[0] != 0 {
			continue // an object of another fan-out folder
		}
		n++
		p := filepath.Join(dir, hex.EncodeToString(sum[1:]))
		if n%1500 == 7 {
			forged[p] = true
			body = "blob 6\x00PWNED\n"
		}
		if err := os.WriteFile(p, deflate(t, body), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for _, tr := range s.verifyObjects([]string{gd}, s.since()) {
		got[tr.Path] = true
	}
	for p := range forged {
		if !got[p] {
			t.Errorf("the forged object %s was not moved aside", p)
		}
	}
	if len(got) != len(forged) || len(forged) != 3 {
		t.Errorf("moved aside: %d, want the %d forged (3)", len(got), len(forged))
	}
}
