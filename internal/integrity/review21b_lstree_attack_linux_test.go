package integrity_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lsTreeWatch follows, in /proc, the daemon's git ls-tree processes that read the object store
// beneath ws (their environment's GIT_OBJECT_DIRECTORY), and records the largest peak resident
// memory (VmHWM, in kB) one of them reached, until stop is closed.
func lsTreeWatch(ws string, stop <-chan struct{}) (peak func() (kB int, seen int)) {
	var mu sync.Mutex
	maxKB, pids := 0, map[string]bool{}
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ents, _ := os.ReadDir("/proc")
			for _, d := range ents {
				pid := d.Name()
				if pid[0] < '0' || pid[0] > '9' {
					continue
				}
				cl, err := os.ReadFile("/proc/" + pid + "/cmdline")
				if err != nil || !bytes.Contains(cl, []byte("ls-tree\x00-r\x00-t\x00-z")) {
					continue
				}
				env, err := os.ReadFile("/proc/" + pid + "/environ")
				if err != nil || !bytes.Contains(env, []byte("GIT_OBJECT_DIRECTORY="+ws)) {
					continue
				}
				st, err := os.ReadFile("/proc/" + pid + "/status")
				if err != nil {
					continue
				}
				for _, l := range strings.Split(string(st), "\n") {
					if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
						kB, _ := strconv.Atoi(f[1])
						mu.Lock()
						pids[pid] = true
						maxKB = max(maxKB, kB)
						mu.Unlock()
					}
				}
			}
		}
	}()
	return func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return maxKB, len(pids)
	}
}

// TestAttackLsTreeInflateBomb (review 21b): a cache tree that differs from the entries' is
// read with the host's git ls-tree (tree21, integrity.lsTree), run by the daemon on the host,
// as the user, outside the box's cgroup and limits, on the workspace's object store. lsTree
// bounds what git prints (maxIndexBytes) and its time (30 s), not what git reads: git reads
// a loose tree object whole into memory at the size its header says. The box writes a valid
// loose tree object (its name its hash: the object check at exit passes it) of 2 GiB of
// zeros, which deflates to about 2 MiB, and names it as the top's tree in its index's cache
// tree (entry and folder counts kept); its git event makes the daemon's check list that tree.
// git allocates and fills 2 GiB on the host for 2 MiB the box wrote; a box that writes
// 32 MiB makes the host's git take 32 GiB (the host's OOM killer then picks among the user's
// processes), again at each index write. Want: no git ls-tree of the daemon on the box's
// store reaches 512 MiB resident. It fails on main at 1bc81cd.
func TestAttackLsTreeInflateBomb(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's plant")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	stop := make(chan struct{})
	peak := lsTreeWatch(filepath.Join(e.work, ".git", "objects"), stop)
	defer close(stop)
	out := e.boxPlantDuring(`set -e
git write-tree >/dev/null
cat > /tmp/bomb.py <<'BOMB'
import hashlib, os, zlib
n = 2 << 30
hdr = b"tree %d\0" % n
h, c = hashlib.sha1(hdr), zlib.compressobj(9)
z = [c.compress(hdr)]
mb = bytes(1 << 20)
for _ in range(n >> 20):
    h.update(mb)
    z.append(c.compress(mb))
z.append(c.flush())
oid = h.hexdigest()
os.makedirs(".git/objects/" + oid[:2], exist_ok=True)
with open(".git/objects/%s/%s" % (oid[:2], oid[2:]), "wb") as f:
    f.write(b"".join(z))
b = open(".git/index", "rb").read()[:-20]
i = b.index(b"TREE", 12 + 62)
nl = b.index(b"\n", i + 8)
b = b[:nl + 1] + bytes.fromhex(oid) + b[nl + 21:]
open(".git/index", "wb").write(b + hashlib.sha1(b).digest())
print("bomb", oid, sum(map(len, z)), "bytes")
BOMB
python3 /tmp/bomb.py
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`
echo planted`, func() {
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if kB, _ := peak(); kB > 1<<20 {
				break
			}
			if strings.Contains(e.daemonLog(), "cache tree") {
				break
			}
		}
		time.Sleep(2 * time.Second)
	})
	kB, n := peak()
	t.Logf("daemon's git ls-tree processes on the box's store: %d, largest peak resident %d MiB\nthe launch said:\n%s", n, kB>>10, out)
	if !strings.Contains(out, "planted") || !strings.Contains(out, "bomb ") {
		t.Fatalf("the plant did not complete (the test would prove nothing):\n%s", out)
	}
	// Under the address-space bound git fails at once, often between two looks at /proc: then
	// the daemon's log shows that the check ran and took the tree for one it cannot read.
	if n == 0 && !strings.Contains(e.daemonLog(), "cache tree") {
		t.Fatalf("no git ls-tree of the daemon on the box's store was seen, and no cache tree reported (the test proves nothing)\ndaemon log:\n%s", e.daemonLog())
	}
	if kB > 512<<10 {
		t.Errorf("the daemon's git ls-tree, run on the host on the box's object store, reached %d MiB resident for a tree object the box wrote in a few MiB: the box's memory limit does not bound it", kB>>10)
	}
}

// TestAttackCacheTreeNamesCommit (review 21b): a cache tree's folder whose id differs from
// the entries' tree is taken as honest when `git ls-tree -r -t ID`, its modes as git reads
// them, hashes to the entries' tree (tree21, integrity.sameAsRead). git ls-tree peels what it
// is given: the id of a commit (or a tag) lists that commit's tree. So the box writes a commit
// whose tree is the reviewed pkg tree (git commit-tree HEAD:pkg) and names that commit as the
// tree of pkg in its index's cache tree, the top's node invalid (as after any git add of a
// file at the top). The check lists the commit, finds the reviewed tree, and keeps the cache
// tree; git status and git diff --cached show nothing. The user's next git commit -a of a
// README edit rebuilds the top from the entries and takes pkg's node as it is (git checks
// that the object exists, not its type): the commit's tree names a commit object as the
// folder pkg. The user's history is corrupt: git fsck fails, git show HEAD:pkg/main.go and a
// checkout of that commit fail, a push to a server that checks objects is refused. Before
// tree21 any cache tree id other than the entries' was removed. Want: the user's commit's pkg
// is a tree. It fails on main at 1bc81cd.
func TestAttackCacheTreeNamesCommit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's plant")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	var status, cached, kind, fsck string
	out := e.boxPlantDuring(`set -e
git write-tree >/dev/null
c=$(`+boxGit+` commit-tree HEAD:pkg -m pkg)
python3 - "$c" <<'PY'
import hashlib, sys
c = bytes.fromhex(sys.argv[1])
b = open(".git/index", "rb").read()[:-20]
i = b.index(b"TREE", 12 + 62)
size = int.from_bytes(b[i + 4:i + 8], "big")
p = b[i + 8:i + 8 + size]
nl = p.index(b"\n")  # the top: "\0ENTRIES SUBTREES\n" and its id
subs = p[1:nl].split(b" ")[1]
rest = p[nl + 1 + 20:]  # pkg: "pkg\0ENTRIES SUBTREES\n" and its id
nl2 = rest.index(b"\n")
p = b"\0-1 " + subs + b"\n" + rest[:nl2 + 1] + c + rest[nl2 + 1 + 20:]
b = b[:i] + b"TREE" + len(p).to_bytes(4, "big") + p + b[i + 8 + size:]
open(".git/index", "wb").write(b + hashlib.sha1(b).digest())
print("named commit", sys.argv[1], "as the tree of pkg")
PY
echo "box's git status: [$(git --no-optional-locks status --porcelain --untracked-files=no)]"
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`
echo planted`, func() {
		e.awaitPeriodicChecks(2)
		status = git(t, e.work, "status", "--porcelain", "--untracked-files=no")
		cached = git(t, e.work, "diff", "--cached", "--stat")
		write(t, filepath.Join(e.work, "README"), "the user's own edit\n")
		if o, err := exec.Command("git", "-C", e.work, "-c", "user.name=user", "-c", "user.email=user@example.com", "commit", "-qam", "user: readme").CombinedOutput(); err != nil {
			kind = "commit failed: " + string(o)
			return
		}
		o, _ := exec.Command("git", "-C", e.work, "cat-file", "-t", "HEAD:pkg").CombinedOutput()
		kind = strings.TrimSpace(string(o))
		o, _ = exec.Command("git", "-C", e.work, "fsck", "--no-dangling").CombinedOutput()
		fsck = string(o)
	})
	t.Logf("host git status %q, git diff --cached %q; the type of HEAD:pkg after the user's commit: %q; git fsck:\n%s\nthe launch said:\n%s", status, cached, kind, fsck, out)
	if !strings.Contains(out, "planted") || !strings.Contains(out, "named commit") || !strings.Contains(out, "box's git status: []") {
		t.Fatalf("the plant did not complete (the test would prove nothing):\n%s", out)
	}
	if strings.HasPrefix(kind, "commit failed") {
		t.Fatalf("the user's git commit failed (the test proves nothing): %s", kind)
	}
	if kind == "commit" {
		t.Errorf("the user's git commit -a of a README edit while the box ran wrote a tree whose pkg is a commit object the box named in its cache tree (git status %q and git diff --cached %q showed nothing); git fsck:\n%s", status, cached, fsck)
	}
}
