package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/enginetest"
)

// indexForger is the box's tool for the attacks below (python3, index version 2, SHA-1): it
// rewrites .git/index as the attack names and recomputes the checksum.
//
//	untr NAME: drops NAME from the one folder of the untracked cache (UNTR) that lists it
//	tree HEADINDEX: puts the cache tree (TREE) of HEADINDEX in place of the index's
//	oid NAME HEX: gives the entry NAME the object id HEX
//	ieot FORGED: keeps the index's entries in sequence and adds, inside an extension git's
//	  sequential reader skips (a second EOIE), those of FORGED, which an offset table (IEOT)
//	  and a valid EOIE give git's threaded reader instead
const indexForger = `
import hashlib, os, struct, sys

def split(b):
    n = struct.unpack(">I", b[8:12])[0]
    off, ents = 12, []
    for _ in range(n):
        nul = b.index(b"\0", off + 62)
        end = off + ((nul - off + 8) & ~7)
        ents.append(b[off:end])
        off = end
    exts, x = {}, off
    while x + 8 <= len(b) - 20:
        size = struct.unpack(">I", b[x+4:x+8])[0]
        exts[b[x:x+4]] = b[x:x+8+size]
        x += 8 + size
    return b[:12], ents, exts

def ext(sig, payload):
    return sig + struct.pack(">I", len(payload)) + payload

idx = os.environ.get("GIT_INDEX_FILE", ".git/index")
head, ents, exts = split(open(idx, "rb").read())
body = head + b"".join(ents)
if sys.argv[1] == "untr":
    u = exts[b"UNTR"][8:]
    name = sys.argv[2].encode() + b"\0"
    i = u.index(b"\0" + name) + 1
    s = u.rindex(b"\0", 0, i - 1) + 1  # the folder's name starts after the NUL before it
    assert u[s - 2] >= 1, "the folder lists no untracked file"
    u = u[:s - 2] + bytes([u[s - 2] - 1]) + u[s - 1:i] + u[i + len(name):]
    exts[b"UNTR"] = ext(b"UNTR", u)
    body += b"".join(exts.values())
elif sys.argv[1] == "tree":
    exts[b"TREE"] = split(open(sys.argv[2], "rb").read())[2][b"TREE"]
    body += b"".join(exts.values())
elif sys.argv[1] == "oid":
    name, oid = sys.argv[2].encode(), bytes.fromhex(sys.argv[3])
    ents = [e[:40] + oid + e[60:] if e[62:62+len(name)+1] == name + b"\0" else e for e in ents]
    body = head + b"".join(ents) + b"".join(exts.values())
elif sys.argv[1] == "ieot":
    _, forged, _ = split(open(sys.argv[2], "rb").read())
    start = len(body)
    hidden = ext(b"EOIE", b"".join(forged))
    half = len(forged) // 2
    o1 = start + 8
    o2 = o1 + sum(len(e) for e in forged[:half])
    ieot = ext(b"IEOT", struct.pack(">IIIII", 1, o1, half, o2, len(forged) - half))
    eoie = ext(b"EOIE", struct.pack(">I", start) + hashlib.sha1(hidden[:8] + ieot[:8]).digest())
    body += hidden + ieot + eoie
open(idx, "wb").write(body + hashlib.sha1(body).digest())
`

// indexAttack is one attack on what the host's git reads of the index, run in a real box.
type indexAttack struct {
	name string
	// setup makes the workspace (a repository with one commit, made by the host).
	setup func(t *testing.T, ws string)
	// script is what the box runs ($FORGE runs indexForger).
	script string
	// status is the host's git status command, and hidden what the box hid from it.
	status []string
	hidden string
	// ext is the extension the check names in its alert ("": none expected).
	ext string
	// racy: the host's git shows the change before the check as well.
	racy bool
	// tree is the folders the alert on a forged cache tree names ("": none expected).
	tree string
}

// TestAttackIndexExtensions: git trusts index extensions the check did not read. A forged
// untracked cache (UNTR) hides a new file from the host's git status (review 14, F1); an
// offset table (IEOT with EOIE) gives git's threaded reader (3 CPUs or more and 30,000
// entries, or index.threads) other entries than the ones in sequence, which the check reads
// (F9); a cache tree (TREE) copied from HEAD's index hides a staged change from git status and
// git diff --cached (a folder's: git status compares the top's entries itself). Each is done by a real box; the host's git must show the box's change
// after the check (which removes the extensions under git's lock), and hid it before.
func TestAttackIndexExtensions(t *testing.T) {
	t.Parallel()
	needGit(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	makefile := func(t *testing.T, ws string) {
		git(t, ws, "init", "-q", "-b", "main")
		write(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed\n")
		write(t, filepath.Join(ws, "pkg/main.go"), "package main\n\nfunc main() { println(\"hello\") }\n")
		write(t, filepath.Join(ws, "go.mod"), "module x\n\ngo 1.20\n")
		git(t, ws, "add", "-A")
		git(t, ws, "commit", "-qm", "init")
	}
	for _, c := range []indexAttack{{
		name:  "untracked-cache",
		setup: makefile,
		script: `git update-index --force-untracked-cache
printf 'package main\n\nfunc init() { println("BOX CODE RAN") }\n' > pkg/zz.go
sleep 1.1
GIT_FORCE_UNTRACKED_CACHE=1 git status --porcelain
$FORGE untr zz.go`,
		status: []string{"status", "--porcelain"},
		hidden: "?? pkg/zz.go",
		ext:    "UNTR",
	}, {
		name:  "offset-table",
		setup: makefile,
		script: `sleep 1.1
printf 'all:\n\t@echo BOXCODE\n' > Makefile
cp .git/index /tmp/forged.idx
GIT_INDEX_FILE=/tmp/forged.idx git add Makefile
# the forged entry: the box's file's stat data, the reviewed blob's id
GIT_INDEX_FILE=/tmp/forged.idx $FORGE oid Makefile $(git rev-parse HEAD:Makefile)
sleep 1.1
$FORGE ieot /tmp/forged.idx`,
		status: []string{"-c", "index.threads=4", "status", "--porcelain"},
		hidden: " M Makefile",
		ext:    "IEOT",
	}, {
		name:  "cache-tree",
		setup: makefile,
		script: `git write-tree >/dev/null
cp .git/index /tmp/head.idx
printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' > pkg/main.go
git add pkg/main.go
$FORGE tree /tmp/head.idx`,
		status: []string{"status", "--porcelain"},
		hidden: "pkg/main.go", // staged (and, its stat data cleared as git's own write does, compared)
		tree:   "/, /pkg/",    // HEAD's trees, for entries that hold the box's pkg/main.go
	}, {
		// The entry's stat data is the box's file's, its id the reviewed blob's, and the index
		// older than the file: git takes the entry for racily clean and compares the content
		// (git status shows the change, so the check leaves it). The index the check writes
		// (it removes the cache tree) is newer: unless it clears such entries' stat data as
		// git's own write does, git then trusts the forged stat data.
		name:  "racy-entry",
		setup: makefile,
		racy:  true,
		script: `sleep 1.1
printf 'all:\n\t@echo BOXCODE\n' > Makefile
git add Makefile
$FORGE oid Makefile $(git rev-parse HEAD:Makefile)
touch -d @$(( $(stat -c %Y Makefile) - 5 )) .git/index
sleep 1.1 # the check's index is a second newer than the file`,
		status: []string{"status", "--porcelain"},
		hidden: " M Makefile",
	}} {
		t.Run(c.name, func(t *testing.T) {
			script := "set -e\nFORGE='python3 /tmp/forge.py'\ncat > /tmp/forge.py <<'FORGER'\n" + indexForger + "FORGER\n" + c.script +
				"\necho in-box:; git --no-optional-locks " + strings.Join(c.status, " ")
			pb, r := newProtectedBox(t, func(ws string) { c.setup(t, ws) }, script, enginetest.Options{})
			defer pb.release(t)
			if r.Exit != 0 {
				t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
			}
			// --no-optional-locks: this git must not write the index it read (with the offset
			// table, the forged entries in sequence, which the check reads too).
			if out := git(t, pb.ws, append([]string{"--no-optional-locks"}, c.status...)...); strings.Contains(out, strings.TrimSpace(c.hidden)) != c.racy {
				t.Fatalf("the box's change is not hidden from (racy: not shown by) the host's git %s here:\n%s\nbox: %s%s", strings.Join(c.status, " "), out, r.Stdout, r.Stderr)
			}
			alerted := false
			for _, tr := range pb.state.VerifyExit() {
				switch {
				case c.ext != "" && tr.Path == filepath.Join(pb.ws, ".git/index") && tr.Alert && strings.Contains(tr.Detail, c.ext+": ") && strings.Contains(tr.Detail, "they were removed"):
					alerted = true
				case c.tree != "" && tr.Path == filepath.Join(pb.ws, ".git/index") && tr.Alert && strings.Contains(tr.Detail, "cache tree named, for "+c.tree+", trees") && strings.Contains(tr.Detail, "it was removed"):
					alerted = true
				default:
					t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
				}
			}
			if (c.ext != "" || c.tree != "") && !alerted {
				t.Errorf("no alert naming %s%s on the index", c.ext, c.tree)
			}
			if out := git(t, pb.ws, c.status...); !strings.Contains(out, c.hidden) {
				t.Errorf("after the check, the host's git %s does not show %q:\n%s", strings.Join(c.status, " "), c.hidden, out)
			}
			if out, err := exec.Command("git", "-C", pb.ws, "fsck", "--no-dangling").CombinedOutput(); err != nil {
				t.Errorf("git fsck after the check: %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(pb.ws, ".git/index.lock")); err == nil {
				t.Error("the check left index.lock")
			}
		})
	}
}

// TestAttackNestedRepositoryIndex: the index and object checks read every repository the
// workspace scan finds, not only those a gitlink leads to (review 14, F2). Before, a clone the
// top repository ignores (lib/ in .gitignore), or one of several clones in a workspace that is
// no repository, had none of them: a box that edited lib/Makefile and flagged it
// skip-worktree, forged an entry's stat data, or rewrote a committed file's loose object, hid
// the change from the host's git -C lib status (and git show). Each is done by a real box; the
// host's git must show the change after the check, and hid it before.
func TestAttackNestedRepositoryIndex(t *testing.T) {
	t.Parallel()
	needGit(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	clone := func(t *testing.T, dir string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, dir, "init", "-q", "-b", "main")
		write(t, filepath.Join(dir, "Makefile"), "all:\n\t@echo reviewed\n")
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-qm", "lib")
	}
	for _, c := range []struct {
		name string
		// setup makes the workspace; repo is the nested repository attacked.
		setup func(t *testing.T, ws string)
		repo  string
		// script is what the box runs in repo.
		script string
		// show is the host's git command in repo, hidden what the box hid from it (want, for
		// an object, what it showed before the check and must not after).
		show   []string
		hidden string
		object bool
		// alert is what the check's alert on the attacked file says.
		alert string
	}{{
		name: "ignored-clone-skip-worktree",
		setup: func(t *testing.T, ws string) {
			git(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, ".gitignore"), "lib/\n")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-qm", "top")
			clone(t, filepath.Join(ws, "lib"))
		},
		repo: "lib",
		script: `printf 'all:\n\t@echo BOXCODE1\n' > Makefile
git update-index --skip-worktree Makefile`,
		show:   []string{"status", "--porcelain"},
		hidden: " M Makefile",
		alert:  "skip-worktree",
	}, {
		name: "clones-without-top-forged-stat",
		setup: func(t *testing.T, ws string) {
			clone(t, filepath.Join(ws, "a"))
			clone(t, filepath.Join(ws, "b"))
		},
		repo: "b",
		script: `printf 'all:\n\t@echo BOXCODE1\n' > Makefile
sleep 1.1
git add Makefile
$FORGE oid Makefile $(git rev-parse HEAD:Makefile)`,
		show:   []string{"status", "--porcelain"},
		hidden: " M Makefile",
		alert:  "stat data was cleared",
	}, {
		name: "ignored-clone-object",
		setup: func(t *testing.T, ws string) {
			git(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, ".gitignore"), "vendor/\n")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-qm", "top")
			clone(t, filepath.Join(ws, "vendor/x"))
		},
		repo: "vendor/x",
		script: `m=$(git rev-parse HEAD:Makefile); e=$(printf 'all:\n\t@echo BOXCODE1\n' | git hash-object -w --stdin)
o=.git/objects/$(echo $m | cut -c1-2)/$(echo $m | cut -c3-)
chmod u+w $o && cp .git/objects/$(echo $e | cut -c1-2)/$(echo $e | cut -c3-) $o`,
		show:   []string{"show", "HEAD:Makefile"},
		hidden: "BOXCODE1",
		object: true,
		alert:  "moved aside to",
	}} {
		t.Run(c.name, func(t *testing.T) {
			script := "set -e\nFORGE='python3 /tmp/forge.py'\ncat > /tmp/forge.py <<'FORGER'\n" + indexForger + "FORGER\ncd " + c.repo + "\n" + c.script
			pb, r := newProtectedBox(t, func(ws string) { c.setup(t, ws) }, script, enginetest.Options{})
			defer pb.release(t)
			if r.Exit != 0 {
				t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
			}
			repo := filepath.Join(pb.ws, c.repo)
			show := func() (string, error) {
				cmd := exec.Command("git", append([]string{"--no-optional-locks"}, c.show...)...)
				cmd.Dir = repo
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, _ := show(); strings.Contains(out, strings.TrimSpace(c.hidden)) == !c.object {
				t.Fatalf("the box's change does not get past the host's git %s here:\n%s", strings.Join(c.show, " "), out)
			}
			alerted := false
			for _, tr := range pb.state.VerifyExit() {
				switch {
				case within(tr.Path, repo) && tr.Alert && strings.Contains(tr.Detail, c.alert):
					alerted = true
				case tr.Alert:
					t.Errorf("unexpected alert %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
				}
			}
			if !alerted {
				t.Errorf("no alert in %s saying %q", c.repo, c.alert)
			}
			if out, _ := show(); strings.Contains(out, strings.TrimSpace(c.hidden)) != !c.object {
				t.Errorf("after the check, the host's git %s in %s: %q", strings.Join(c.show, " "), c.repo, out)
			}
		})
	}
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// TestAttackWorktreeIndexes: the index checks read every index the host's git reads where the
// box can write it. A linked worktree outside the workspace (git worktree add ../wt on the
// host) has its index in the workspace's common dir (.git/worktrees/wt/index): a box that
// gave its entry for pkg/main.go a blob of its own, keeping the entry's stat data (which
// matches the host's file) and the cache tree of HEAD, hid the staged change from the host's
// git status in ../wt, whose next commit of any file in pkg/ commits the box's code. A
// repository whose core.worktree names another folder of the workspace (meta/ with
// core.worktree ../../src) has its index entries at src/: a box that edited src/Makefile and
// flagged it skip-worktree hid the edit from the host's git -C meta status, while make -C src
// runs it; the check looked for the files at meta/ and took the flagged one for a sparse
// checkout's. Each is done by a real box; the host's git must show the change after the check,
// and hid it before.
func TestAttackWorktreeIndexes(t *testing.T) {
	t.Parallel()
	needGit(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	outside := filepath.Join(t.TempDir(), "wt")
	linked := func(wt func(ws string) string) func(t *testing.T, ws string) {
		return func(t *testing.T, ws string) {
			git(t, ws, "init", "-q", "-b", "main")
			write(t, filepath.Join(ws, "pkg/main.go"), "package main\n\nfunc main() { println(\"hello\") }\n")
			git(t, ws, "add", "-A")
			git(t, ws, "commit", "-qm", "init")
			git(t, ws, "worktree", "add", "-q", "-b", "wt", wt(ws))
		}
	}
	forgeLinked := `sleep 1.1 # the index newer than the host's file: git trusts the entry's stat data
export GIT_INDEX_FILE=.git/worktrees/wt/index
git write-tree >/dev/null
e=$(printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' | git hash-object -w --stdin)
$FORGE oid pkg/main.go $e`
	inside := func(ws string) string { return filepath.Join(ws, ".worktrees", "wt") }
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, ws string)
		// dir is where the host runs git status (its porcelain line hidden before the check).
		dir    func(ws string) string
		script string
		hidden string
		// refused says the box cannot write the index at all (Read-only file system): the
		// git directory of a linked worktree outside the workspace is bound read-only whole.
		refused bool
	}{{
		name:    "linked-worktree-outside",
		setup:   linked(func(string) string { return outside }),
		dir:     func(string) string { return outside },
		script:  forgeLinked,
		hidden:  "pkg/main.go",
		refused: true,
	}, {
		name:   "linked-worktree-inside",
		setup:  linked(inside),
		dir:    inside,
		script: forgeLinked,
		hidden: "pkg/main.go", // staged (and, its stat data cleared as git's own write does, compared)
	}, {
		name: "core-worktree-in-workspace",
		setup: func(t *testing.T, ws string) {
			meta := filepath.Join(ws, "meta")
			write(t, filepath.Join(ws, "src/Makefile"), "all:\n\t@echo reviewed\n")
			git(t, ws, "init", "-q", "-b", "main", meta)
			git(t, meta, "config", "core.worktree", "../../src")
			git(t, meta, "add", "-A")
			git(t, meta, "commit", "-qm", "init")
		},
		dir: func(ws string) string { return filepath.Join(ws, "meta") },
		script: `printf 'all:\n\t@echo BOXCODE\n' > src/Makefile
git -C meta update-index --skip-worktree Makefile`,
		hidden: " M Makefile",
	}} {
		t.Run(c.name, func(t *testing.T) {
			script := "set -e\nFORGE='python3 /tmp/forge.py'\ncat > /tmp/forge.py <<'FORGER'\n" + indexForger + "FORGER\n" + c.script
			pb, r := newProtectedBox(t, func(ws string) { c.setup(t, ws) }, script, enginetest.Options{})
			defer pb.release(t)
			if c.refused {
				if r.Exit == 0 || !strings.Contains(string(r.Stderr), "Read-only file system") {
					t.Fatalf("the box wrote the index of a linked worktree outside the workspace: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
				}
				if out := git(t, c.dir(pb.ws), "status", "--porcelain"); out != "" {
					t.Fatalf("the host's git status in the linked worktree: %q", out)
				}
				return
			}
			if r.Exit != 0 {
				t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
			}
			dir := c.dir(pb.ws)
			if out := git(t, dir, "--no-optional-locks", "status", "--porcelain"); strings.Contains(out, c.hidden) {
				t.Fatalf("the box's change is not hidden from the host's git status here:\n%s", out)
			}
			pb.state.VerifyExit()
			if out := git(t, dir, "status", "--porcelain"); !strings.Contains(out, c.hidden) {
				t.Errorf("after the check, the host's git status in %s does not show %q:\n%s", dir, c.hidden, out)
			}
			if _, err := os.Stat(filepath.Join(pb.ws, ".git/worktrees/wt/index.lock")); err == nil {
				t.Error("the check left index.lock")
			}
		})
	}
}

// TestAttackIndexLockLeft guards review 15, F8: a box that flags its edit of the Makefile
// skip-worktree and leaves git's lock index.lock had the check at exit keep the flag (it took
// the lock for a git at work), and the edit stayed hidden from the host's git status for
// good, even once the user removed the lock as git says to, while make ran the box's file. The
// check at exit now writes the index beside the lock: the host's git status shows the edit
// with the lock still there and after the user removes it.
func TestAttackIndexLockLeft(t *testing.T) {
	t.Parallel()
	needGit(t)
	script := `set -e
printf 'all:\n\t@echo BOXCODE\n' > Makefile
git update-index --skip-worktree Makefile
: > .git/index.lock`
	pb, r := newProtectedBox(t, makefileRepo(t), script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	if out := git(t, pb.ws, "status", "--porcelain"); out != "" {
		t.Fatalf("the box's edit is not hidden from the host's git status here:\n%s", out)
	}
	alerted := false
	for _, tr := range pb.state.VerifyExit() {
		if tr.Path == filepath.Join(pb.ws, "Makefile") && tr.Alert && strings.Contains(tr.Detail, "skip-worktree") {
			alerted = true
		}
	}
	if !alerted {
		t.Error("no alert on the Makefile")
	}
	if out := git(t, pb.ws, "status", "--porcelain"); !strings.Contains(out, " M Makefile") {
		t.Errorf("after the check, with the box's lock still there, the host's git status: %q", out)
	}
	if err := os.Remove(filepath.Join(pb.ws, ".git/index.lock")); err != nil {
		t.Fatalf("the box's lock: %v", err)
	}
	if out := git(t, pb.ws, "status", "--porcelain"); !strings.Contains(out, " M Makefile") {
		t.Errorf("once the user removed the lock, the host's git status: %q", out)
	}
	if out := git(t, pb.ws, "diff", "--stat"); !strings.Contains(out, "Makefile") {
		t.Errorf("the host's git diff --stat: %q", out)
	}
	if out, err := exec.Command("git", "-C", pb.ws, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Errorf("git fsck after the check: %v\n%s", err, out)
	}
}

// TestAttackIndexPadded guards review 15, F15: a box that flags its edit of the Makefile
// skip-worktree and pads the index past 256 MiB with one valid resolve-undo record (REUC, a
// 257 MiB path; git reads it without a word) had the check read no part of it: the edit stayed
// hidden from the host's git status. The check now reads the entries and walks the extensions
// by their lengths: the flag is cleared and the record copied through.
func TestAttackIndexPadded(t *testing.T) {
	t.Parallel()
	needGit(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index padding")
	}
	script := `set -e
printf 'all:\n\t@echo BOXCODE\n' > Makefile
git update-index --skip-worktree Makefile
python3 - <<'PAD'
import hashlib, struct
b = open(".git/index", "rb").read()[:-20]
path = b"a" * (257 << 20)
tail = b"\x00100644\x000\x000\x00" + bytes(20)
h = hashlib.sha1(b)
with open(".git/index", "wb") as f:
    for part in (b, b"REUC" + struct.pack(">I", len(path) + len(tail)), path, tail):
        f.write(part)
        if part is not b:
            h.update(part)
    f.write(h.digest())
PAD`
	pb, r := newProtectedBox(t, makefileRepo(t), script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	index := filepath.Join(pb.ws, ".git/index")
	if fi, err := os.Stat(index); err != nil || fi.Size() <= 256<<20 {
		t.Fatalf("the box's index: %v, %d bytes (want more than 256 MiB)", err, fi.Size())
	}
	if out := git(t, pb.ws, "--no-optional-locks", "status", "--porcelain"); out != "" {
		t.Fatalf("the box's edit is not hidden from the host's git status here:\n%s", out)
	}
	alerted := false
	for _, tr := range pb.state.VerifyExit() {
		switch {
		case tr.Path == filepath.Join(pb.ws, "Makefile") && tr.Alert && strings.Contains(tr.Detail, "the flag was cleared"):
			alerted = true
		case tr.Path == index && !strings.Contains(tr.Detail, "could not"):
		default:
			t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
		}
	}
	if !alerted {
		t.Error("no alert saying the Makefile's flag was cleared")
	}
	if out := git(t, pb.ws, "status", "--porcelain"); !strings.Contains(out, " M Makefile") {
		t.Errorf("after the check, the host's git status: %q", out)
	}
	if fi, err := os.Stat(index); err != nil || fi.Size() <= 256<<20 {
		t.Errorf("the resolve-undo record was not copied through: %v", err)
	}
}

// TestAttackSplitIndex guards review 15, F2: a box that splits the index (git update-index
// --split-index) before it flags its edit of the Makefile skip-worktree had the check report
// the index as not checked and keep the flag: the host's git status and git diff stayed empty
// while make ran the box's Makefile. The check reads the split index as git merges it and
// writes it back whole, the flag cleared.
func TestAttackSplitIndex(t *testing.T) {
	needGit(t)
	for _, c := range []struct{ name, script string }{{
		// The flag in the index, on an entry that replaces a shared one.
		name: "flag-in-index",
		script: `set -e
git update-index --split-index
printf 'all:\n\t@echo BOXCODE\n' > Makefile
git update-index --skip-worktree Makefile`,
	}, {
		// The flag in the shared index, which holds every entry once split.
		name: "flag-in-shared-index",
		script: `set -e
printf 'all:\n\t@echo BOXCODE\n' > Makefile
git update-index --skip-worktree Makefile
git update-index --split-index`,
	}} {
		t.Run(c.name, func(t *testing.T) { attackSplitIndex(t, c.script) })
	}
}

func attackSplitIndex(t *testing.T, script string) {
	pb, r := newProtectedBox(t, makefileRepo(t), script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	if names, _ := filepath.Glob(filepath.Join(pb.ws, ".git/sharedindex.*")); len(names) == 0 {
		t.Fatal("the box's index is not split")
	}
	if out := git(t, pb.ws, "--no-optional-locks", "status", "--porcelain"); out != "" {
		t.Fatalf("the box's edit is not hidden from the host's git status here:\n%s", out)
	}
	alerted := false
	for _, tr := range pb.state.VerifyExit() {
		switch {
		case tr.Path == filepath.Join(pb.ws, "Makefile") && tr.Alert && strings.Contains(tr.Detail, "the flag was cleared"):
			alerted = true
		default:
			t.Errorf("unexpected transition %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
		}
	}
	if !alerted {
		t.Error("no alert saying the Makefile's flag was cleared")
	}
	if out := git(t, pb.ws, "status", "--porcelain"); !strings.Contains(out, " M Makefile") {
		t.Errorf("after the check, the host's git status: %q", out)
	}
	if out := git(t, pb.ws, "diff", "--stat"); !strings.Contains(out, "Makefile") {
		t.Errorf("after the check, the host's git diff --stat: %q", out)
	}
	if out := git(t, pb.ws, "ls-files", "-v", "Makefile"); out != "H Makefile\n" {
		t.Errorf("git ls-files -v Makefile: %q, want it unflagged", out)
	}
	if out, err := exec.Command("git", "-C", pb.ws, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Errorf("git fsck after the check: %v\n%s", err, out)
	}
}

// makefileRepo returns the set-up of a workspace that is a repository whose one commit holds a
// Makefile (and a README), as the host made it.
func makefileRepo(t *testing.T) func(ws string) {
	return func(ws string) {
		git(t, ws, "init", "-q", "-b", "main")
		write(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed\n")
		write(t, filepath.Join(ws, "README"), "readme\n")
		git(t, ws, "add", "-A")
		git(t, ws, "commit", "-qm", "init")
	}
}

// TestAttackFlagOnRemovedFileInBox guards review 19, F5 in a real box: a box that removes the
// tracked Makefile and flags it skip-worktree had the check at exit leave the flag (taken for
// a sparse checkout's), so that the Makefile of a later launch was hidden from the host's git
// status. The check at exit clears it: the host's git status shows the deletion, and a
// Makefile written afterwards shows as a change.
func TestAttackFlagOnRemovedFileInBox(t *testing.T) {
	t.Parallel()
	needGit(t)
	script := `set -e
rm Makefile
git update-index --skip-worktree Makefile`
	pb, r := newProtectedBox(t, makefileRepo(t), script, enginetest.Options{})
	defer pb.release(t)
	if r.Exit != 0 {
		t.Fatalf("box: exit %d\nstdout %s\nstderr %s", r.Exit, r.Stdout, r.Stderr)
	}
	if out := git(t, pb.ws, "status", "--porcelain"); out != "" {
		t.Fatalf("the box's deletion is not hidden from the host's git status here:\n%s", out)
	}
	alerted := false
	for _, tr := range pb.state.VerifyExit() {
		if tr.Path == filepath.Join(pb.ws, "Makefile") && tr.Alert && strings.Contains(tr.Detail, "the flag was cleared") {
			alerted = true
		}
	}
	if !alerted {
		t.Error("no alert on the Makefile at exit")
	}
	if out := git(t, pb.ws, "status", "--porcelain"); out != " D Makefile\n" {
		t.Errorf("after the check at exit, the host's git status: %q, want the deletion", out)
	}
	// What a later launch (or anyone) writes there is shown.
	write(t, filepath.Join(pb.ws, "Makefile"), "all:\n\t@echo BOXCODE\n")
	if out := git(t, pb.ws, "status", "--porcelain"); out != " M Makefile\n" {
		t.Errorf("a Makefile written afterwards: the host's git status %q", out)
	}
	if out, err := exec.Command("git", "-C", pb.ws, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Errorf("git fsck after the check: %v\n%s", err, out)
	}
}
