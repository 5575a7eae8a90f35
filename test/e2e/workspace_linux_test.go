//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/linux/idmap"
)

// TestAttackHostSocketInWorkspace guards issue 21, finding 2: with the user's tmux server
// listening inside the workspace, a box ran `tmux -S … send-keys` and the command ran on the
// host. A workspace holding a host program's unix socket is refused, with the socket named,
// and nothing reaches the tmux server.
func TestAttackHostSocketInWorkspace(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed: install the tmux package")
	}
	e := NewEnv(t)
	sock := filepath.Join(e.Work, "tmux-sock")
	marker := filepath.Join(e.Root, "ran-on-host")
	srv := exec.Command(tmux, "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "victim", "sh")
	srv.Env = e.Vars
	if out, err := srv.CombinedOutput(); err != nil {
		t.Fatalf("start tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })

	r := e.Run("", "run", "sh", "--", "-c", "tmux -S "+sock+" send-keys -t victim 'touch "+marker+"' Enter")
	if r.Code != 125 || !strings.Contains(r.Stderr, "contains the unix socket "+sock) {
		t.Errorf("exit %d, want 125 naming the socket:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Give a command that did reach the server the time to run.
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the box drove the host's tmux server: the command ran on the host")
	}

	// A folder beside it, without the socket, is a workspace as before.
	sub := filepath.Join(e.Work, "project")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "run", "--workspace", sub, "true"); r.Code != 0 {
		t.Errorf("workspace %s: exit %d\n%s", sub, r.Code, r.Stderr)
	}
}

// TestAttackSystemWorkspace guards issue 21, findings 2 and 3: a shared temporary folder or a
// system folder is refused as a workspace, for root as for an ordinary user (as root,
// --workspace /etc was accepted and writable).
func TestAttackSystemWorkspace(t *testing.T) {
	e := NewEnv(t)
	for _, ws := range []string{"/tmp", "/var/tmp", "/dev/shm", "/etc", "/etc/ssh", "/usr/local", "/var/lib"} {
		t.Run(ws, func(t *testing.T) {
			if _, err := os.Stat(ws); err != nil {
				t.Skipf("%s: %v", ws, err)
			}
			r := e.Run("", "run", "--workspace", ws, "sh", "--", "-c", "touch "+ws+"/agentbox-attack-planted; echo box ran")
			os.Remove(ws + "/agentbox-attack-planted")
			if r.Code != 125 || !strings.Contains(r.Stderr, "workspace "+ws+" is a") || strings.Contains(r.Stdout, "box ran") {
				t.Errorf("exit %d, want 125 refusing %s:\n%s%s", r.Code, ws, r.Stdout, r.Stderr)
			}
		})
	}
}

// TestAttackRootOnlyHostFiles guards issue 21, finding 3: a box started by root read the
// host's root-only files under the system folders it sees (/etc/ssh/ssh_host_*_key,
// /etc/ssl/private, and, beyond the /etc a root daemon used to walk for masks, a root-owned
// 0600 file in /opt or /usr), with both engines. A box reads nothing there an ordinary user
// could not: the files planted in /opt and /usr are read back, and every entry of /etc and /opt
// without read permission for others that the box can read (find -readable, the kernel's own
// answer) is a leak. As an ordinary user the kernel already refuses; the test checks the same
// outcome.
func TestAttackRootOnlyHostFiles(t *testing.T) {
	var targets []string
	for _, p := range []string{"/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_rsa_key", "/etc/ssl/private", "/etc/shadow"} {
		if _, err := os.Lstat(p); err == nil {
			targets = append(targets, p)
		}
	}
	if os.Geteuid() == 0 {
		// Root-only files where no mask list reached: a 0600 file in /opt and in /usr/local,
		// and a 0700 folder in /opt with an ordinary file inside.
		for _, dir := range []string{"/opt", "/usr/local/share"} {
			targets = append(targets, enginetest.RootOnlyFile(t, dir))
		}
		folder, err := os.MkdirTemp("/opt", "agentbox-attack-rootonly-dir-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(folder) })
		if err := os.WriteFile(filepath.Join(folder, "inside"), []byte("INSIDE\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, folder, filepath.Join(folder, "inside"))
	}
	if len(targets) == 0 {
		t.Skip("no root-only file here to try (/etc/ssh host keys, /etc/ssl/private)")
	}
	for _, eng := range []string{"native", "bwrap"} {
		t.Run(eng, func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && eng == "bwrap" {
				t.Skip("bubblewrap is not installed")
			}
			e := NewEnv(t)
			cfg := filepath.Join(e.Config, "agentbox", "config.yaml")
			os.MkdirAll(filepath.Dir(cfg), 0o700)
			if err := os.WriteFile(cfg, []byte("engine: "+eng+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// The host id the box's uid maps to (the first line of its uid_map): the caller's
			// for an ordinary user, a box uid of its own for root (never host root).
			script := "id -u; awk 'NR == 1 { print \"MAP\", $2 }' /proc/self/uid_map; for p in " + strings.Join(targets, " ") + "; do if [ -d $p ]; then ls -A $p 2>/dev/null | sed \"s|^|LEAK $p/|\"; elif [ -n \"$(head -c 64 $p 2>/dev/null)\" ]; then echo \"LEAK $p\"; fi; done" +
				// Every entry without read permission for others that the box can read anyway
				// (a folder it can list), in the system folders a box sees that are small
				// enough to walk at each run (/usr is 150,000 entries; the files planted
				// above stand for it).
				"; find /etc /opt -xdev ! -type l ! -perm -o=r -readable 2>/dev/null | sed 's/^/LEAK /'; echo done"
			if eng == "native" {
				// Each path is mounted once: a root-only path masked twice (/etc/shadow is also
				// one of the fixed masks) made box-init mask the lower mask again at every
				// change of the mount table, without end (spec.TestMaskedOnce).
				script += "; awk '{print $5}' /proc/self/mountinfo | sort | uniq -d | sed 's/^/TWICE /'"
			}
			r := e.Run("", "run", "sh", "--", "-c", script)
			if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(r.Stdout, "LEAK") {
				t.Errorf("the box (uid %s) read root-only host files:\n%s", strings.SplitN(r.Stdout, "\n", 2)[0], r.Stdout)
			}
			if strings.Contains(r.Stdout, "TWICE") {
				t.Errorf("paths mounted more than once in the box:\n%s", r.Stdout)
			}
			host := -1
			if i := strings.Index(r.Stdout, "MAP "); i < 0 {
				t.Fatalf("no uid map in the box's output:\n%s", r.Stdout)
			} else if _, err := fmt.Sscanf(r.Stdout[i:], "MAP %d", &host); err != nil {
				t.Fatalf("no uid map in the box's output: %v\n%s", err, r.Stdout)
			}
			// Run by an ordinary user, bwrap makes a user namespace of its own inside the
			// shim's, and uid_map names ids of the namespace above (0 there), not the host's:
			// only native's map is the host's then. An ordinary user cannot map another
			// host id anyway.
			if os.Geteuid() == 0 && !idmap.IsBoxUID(host) || os.Geteuid() != 0 && eng == "native" && host != os.Geteuid() {
				t.Errorf("the box's uid is host uid %d (the caller is %d; a box started by root runs as a box uid)", host, os.Geteuid())
			}
		})
	}
}

// TestRunAsCallerEndToEnd is a whole `agentbox run` as people use it, with both engines, as
// root and as an ordinary user: the daemon started by the CLI, git in the box committing to
// the workspace's repository, the program's exit code passed through. Afterwards what the box
// wrote in the workspace — files, folders, git's objects, refs and index — is the caller's on
// the host (root's for root, whose box ran as a box uid of its own), so the host's git works
// on it without ownership complaints and sees the box's commit.
func TestRunAsCallerEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, eng := range []string{"native", "bwrap"} {
		t.Run(eng, func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && eng == "bwrap" {
				t.Skip("bubblewrap is not installed")
			}
			e := NewEnv(t)
			writeConfig(t, e, "engine: "+eng+"\n")
			if out, err := hostTool(e, e.Work, "sh", "-c", "git init -q -b main . && echo host > HOST && git add HOST && git -c user.name=h -c user.email=h@example.org commit -qm host"); err != nil {
				t.Fatalf("host git: %v\n%s", err, out)
			}
			r := e.Box(boxGit + `set -e
mkdir -p sub/deep && echo box > sub/deep/BOX && echo 'edited' >> HOST
git add -A && git commit -q -m "from the box"
git log --oneline | wc -l | sed 's/^ */COMMITS /'
echo "UID $(id -u)"
exit 3`)
			if r.Code != 3 || !strings.Contains(r.Stdout, "COMMITS 2") {
				t.Fatalf("exit %d, want the program's 3 after two commits:\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			if want := fmt.Sprintf("UID %d\n", os.Geteuid()); !strings.Contains(r.Stdout, want) {
				t.Errorf("the program's uid in the box: %q, want %q", r.Stdout, want)
			}
			uid, gid := os.Geteuid(), os.Getegid()
			var foreign []string
			walked := 0
			filepath.Walk(e.Work, func(p string, fi os.FileInfo, err error) error {
				if err != nil {
					foreign = append(foreign, fmt.Sprintf("%s: %v", p, err))
					return nil
				}
				walked++
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
					foreign = append(foreign, fmt.Sprintf("%s: %d:%d", p, st.Uid, st.Gid))
				}
				return nil
			})
			if walked < 20 || len(foreign) > 0 {
				t.Errorf("%d entries of the workspace walked; not the caller's (%d:%d):\n%s", walked, uid, gid, strings.Join(foreign, "\n"))
			}
			out, err := hostTool(e, e.Work, "sh", "-c", "git status --porcelain && git log --format=%s && cat sub/deep/BOX && git fsck --no-progress 2>&1")
			if err != nil || out != "from the box\nhost\nbox\n" {
				t.Errorf("the host's git on the box's work: %v\n%q", err, out)
			}
		})
	}
}
