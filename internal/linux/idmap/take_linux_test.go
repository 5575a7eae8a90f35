package idmap_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/idmap"
)

// noAccounts points Take at account files that hold none of the box uid range for the test,
// and returns their folder.
func noAccounts(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{
		"passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/sbin/nologin\nlast:x:1879048191:1879048191::/:/bin/sh\n",
		"group":  "root:x:0:\n\n# a comment\n+nis\n",
		"subuid": "abuser:100000:65536\nbelow:1879048128:64\n",
		"subgid": "abuser:100000:65536\nabove:2143289344:65536\n",
	}
	var paths []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	t.Cleanup(idmap.SetAccountFiles(paths))
	return dir
}

// TestTakeRefusesAccountsInRange: an account, a group or a subordinate id range that reaches
// into the box uid range refuses the launch, naming the file, the line, the entry and the
// fix; entries next to the range do not. As root, Take itself refuses.
func TestTakeRefusesAccountsInRange(t *testing.T) {
	for _, tc := range []struct{ file, line, want string }{
		{"passwd", "agent:x:1879048292:100::/:/bin/sh", `line 4: "agent" holds ids 1879048292`},
		{"group", "boxes:x:2143289343:", `line 5: "boxes" holds ids 2143289343`},
		{"subuid", "wide:1879000000:100000", `line 3: "wide" holds ids 1879000000–1879099999`},
		{"subgid", "all:1:4294967294", `line 3: "all" holds ids 1–4294967294`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := noAccounts(t)
			if err := idmap.CheckAccounts(); err != nil {
				t.Fatalf("the accounts next to the range refused: %v", err)
			}
			p := filepath.Join(dir, tc.file)
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, tc.line)
			f.Close()
			for _, take := range []bool{false, os.Geteuid() == 0} {
				err := idmap.CheckAccounts()
				if take {
					var lease *idmap.Lease
					if lease, err = idmap.Take(os.Getpid()); err == nil {
						lease.Release()
						t.Fatalf("%s in %s: a box uid was taken (%d)", tc.line, tc.file, lease.UID)
					}
				}
				if err == nil {
					t.Fatalf("%s in %s: not refused", tc.line, tc.file)
				}
				msg := err.Error()
				if !errors.Is(err, idmap.ErrBoxUIDTaken) || !strings.Contains(msg, p+" "+tc.want) || !strings.Contains(msg, "give it ids outside that range") {
					t.Errorf("the refusal does not name the file, line, entry and fix: %v", err)
				}
			}
		})
	}
}

// TestTakeRefusesOtherSourceAccounts: an account or a group of another source than the files
// (here systemd's user records, a drop-in in /run/userdb that nss-systemd serves, as LDAP or
// sssd would serve theirs) holding the box uid Take would give refuses the launch, naming the
// database, the sources, the entry and the fix. Before, only the files were read and the uid
// was taken.
func TestTakeRefusesOtherSourceAccounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only host root takes box uids (and writes /run/userdb)")
	}
	srcs, err := idmap.OtherSources("/etc/nsswitch.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(srcs["passwd"], "systemd") || !slices.Contains(srcs["group"], "systemd") {
		t.Skipf("the host's nsswitch.conf does not name systemd for passwd and group (%v): no drop-in account to make", srcs)
	}
	noAccounts(t)
	pid := os.Getpid()
	uid := idmap.BoxUID(pid, 0)
	if _, err := os.Stat("/run/userdb"); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir("/run/userdb", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/userdb") }) // made here: removed once empty
	}
	for _, tc := range []struct{ db, ext, record string }{
		{"passwd", "user", fmt.Sprintf(`{"userName":"agentbox-test-%d","uid":%d,"gid":%d,"homeDirectory":"/nonexistent","shell":"/usr/sbin/nologin"}`, pid, uid, uid)},
		{"group", "group", fmt.Sprintf(`{"groupName":"agentbox-test-%d","gid":%d}`, pid, uid)},
	} {
		t.Run(tc.db, func(t *testing.T) {
			name := fmt.Sprintf("/run/userdb/agentbox-test-%d.%s", pid, tc.ext)
			byID := fmt.Sprintf("/run/userdb/%d.%s", uid, tc.ext)
			if err := os.WriteFile(name, []byte(tc.record), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(name) })
			if err := os.Symlink(filepath.Base(name), byID); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(byID) })
			if out, err := exec.Command("getent", tc.db, fmt.Sprint(uid)).Output(); err != nil {
				t.Skipf("nss-systemd does not serve /run/userdb here (getent %s %d: %v)", tc.db, uid, err)
			} else if strings.Contains(readFile(t, "/etc/"+tc.db), fmt.Sprint(uid)) {
				t.Fatalf("the account is in /etc/%s, not only another source: %s", tc.db, out)
			}
			lease, err := idmap.Take(pid)
			if err == nil {
				lease.Release()
				t.Fatalf("took %d, which a %s entry of systemd's user records holds", lease.UID, tc.db)
			}
			want := fmt.Sprintf("%s (sources systemd in /etc/nsswitch.conf): \"agentbox-test-%d:", tc.db, pid)
			if msg := err.Error(); !errors.Is(err, idmap.ErrBoxUIDTaken) || !strings.Contains(msg, want) || !strings.Contains(msg, "give it ids outside that range") {
				t.Errorf("the refusal does not name the database, sources, entry and fix (%q): %v", want, err)
			}
		})
	}
	lease, err := idmap.Take(pid)
	if err != nil {
		t.Fatalf("with the records gone: %v", err)
	}
	lease.Release()
}

// TestTakeRefusesWhenSourcesCannotBeAsked: with nsswitch.conf naming a source other than the
// files and no getent to ask it, a root launch is refused, naming the file, the source and
// the fix; with the files alone (or no nsswitch.conf) nothing is asked.
func TestTakeRefusesWhenSourcesCannotBeAsked(t *testing.T) {
	noAccounts(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nsswitch.conf")
	if err := os.WriteFile(conf, []byte("# comment\npasswd:  files [NOTFOUND=return] ldap # directory\ngroup: files\nhosts: files dns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srcs, err := idmap.OtherSources(conf)
	if err != nil || !slices.Equal(srcs["passwd"], []string{"ldap"}) || len(srcs["group"]) != 0 || len(srcs) != 1 {
		t.Fatalf("otherSources = %v, %v; want passwd: ldap only", srcs, err)
	}
	if os.Geteuid() != 0 {
		return // Take itself is host root's
	}
	restore := idmap.SetNSS(conf, []string{filepath.Join(dir, "no-getent")})
	lease, err := idmap.Take(os.Getpid())
	restore()
	if err == nil {
		lease.Release()
		t.Fatal("took a box uid without asking the ldap source")
	}
	if msg := err.Error(); !errors.Is(err, idmap.ErrBoxUIDTaken) || !strings.Contains(msg, conf+" names ldap for passwd") || !strings.Contains(msg, "install getent") {
		t.Errorf("the refusal does not name the file, the source and the fix: %v", err)
	}
	for _, text := range []string{"passwd: files\ngroup: files\n", ""} {
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if text == "" {
			os.Remove(conf)
		}
		restore := idmap.SetNSS(conf, []string{filepath.Join(dir, "no-getent")})
		lease, err := idmap.Take(os.Getpid())
		restore()
		if err != nil {
			t.Fatalf("nsswitch.conf %q: %v", text, err)
		}
		lease.Release()
	}
}

func readFile(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTakeSkipsLiveHolders: a box uid that a live process holds — as an earlier box's
// would, whose shim had the same pid — is not taken, whether the process has it as its uid or
// only as its gid, or is not dumpable (the files in its /proc entry then show as root's); nor
// one this process has taken and not released; a released one is taken again. Before Take,
// the one box uid of a pid was always its first slot, the first holder's.
func TestTakeSkipsLiveHolders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only host root starts processes of other uids (and takes box uids)")
	}
	noAccounts(t)
	pid := os.Getpid()
	as := func(uid, gid int) *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
	holders := []*exec.Cmd{
		exec.Command("/bin/sleep", "1000"),
		exec.Command("/bin/sleep", "1000"),
		exec.Command("/usr/bin/python3", "-c", "import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print('ready', flush=True); time.sleep(1000)"),
	}
	holders[0].SysProcAttr = as(idmap.BoxUID(pid, 0), idmap.BoxUID(pid, 0))
	holders[1].SysProcAttr = as(65534, idmap.BoxUID(pid, 1))
	holders[2].SysProcAttr = as(idmap.BoxUID(pid, 2), idmap.BoxUID(pid, 2))
	ready, err := holders[2].StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range holders {
		if err := cmd.Start(); err != nil {
			t.Fatalf("%v: %v", cmd.Args, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	if _, err := ready.Read(make([]byte, 5)); err != nil {
		t.Fatalf("the non-dumpable holder: %v", err)
	}
	if fi, err := os.Stat(fmt.Sprintf("/proc/%d/environ", holders[2].Process.Pid)); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the non-dumpable holder's /proc files should show as root's: %v %v", fi, err)
	}
	a, err := idmap.Take(pid)
	if err != nil {
		t.Fatal(err)
	}
	b, err := idmap.Take(pid)
	if err != nil {
		t.Fatal(err)
	}
	if a.UID != idmap.BoxUID(pid, 3) || b.UID != idmap.BoxUID(pid, 4) {
		t.Errorf("took %d and %d, want slots 3 and 4 (%d, %d): slots 0–2 are held by live processes", a.UID, b.UID, idmap.BoxUID(pid, 3), idmap.BoxUID(pid, 4))
	}
	a.Release()
	a.Release()
	c, err := idmap.Take(pid)
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != a.UID {
		t.Errorf("took %d after %d was released, want it again", c.UID, a.UID)
	}
	b.Release()
	c.Release()
}

// TestTakeSkipsNonEffectiveHolders: a box uid that a live process holds only as its real,
// saved or filesystem uid, or its real, saved or filesystem gid — a root process that set it
// and took back root as its effective id, whose /proc entry then shows as root's — is not
// taken either: such a process signals the box's processes (the kernel matches the sender's
// real or effective uid against the target's real or saved one) or reads their files (with
// its filesystem ids) as one whose effective id it is. Before, only the effective ids (the
// owner of /proc/N) were looked at, and Take gave slot 0, held by the first of them.
func TestTakeSkipsNonEffectiveHolders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only host root starts processes of other ids (and takes box uids)")
	}
	noAccounts(t)
	pid := os.Getpid()
	holds := []string{
		"os.setresuid(%d, 0, 0)", // real uid
		"os.setresuid(0, 0, %d)", // saved uid
		"libc.setfsuid(%d)",      // filesystem uid
		"os.setresgid(%d, 0, 0)", // real gid
		"os.setresgid(0, 0, %d)", // saved gid
		"libc.setfsgid(%d)",      // filesystem gid
	}
	for k, hold := range holds {
		code := "import ctypes, os, time\nlibc = ctypes.CDLL(None)\n" + fmt.Sprintf(hold, idmap.BoxUID(pid, k)) +
			"\nprint('ready', flush=True)\ntime.sleep(1000)\n"
		cmd := exec.Command("/usr/bin/python3", "-c", code)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if _, err := out.Read(make([]byte, 5)); err != nil {
			t.Fatalf("holder %q did not start: %v", hold, err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d", cmd.Process.Pid), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
			t.Fatalf("holder %q: its /proc entry should show its effective ids, root's: %+v %v", hold, st, err)
		}
	}
	take := func(t *testing.T) {
		lease, err := idmap.Take(pid)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release()
		if want := idmap.BoxUID(pid, len(holds)); lease.UID != want {
			t.Errorf("took %d, want slot %d (%d): slots 0–%d are held as real, saved or filesystem ids", lease.UID, len(holds), want, len(holds)-1)
		}
	}
	t.Run("pidfd", take)
	t.Run("status", func(t *testing.T) { // a kernel without PIDFD_GET_INFO
		defer idmap.UseStatusIDs()()
		take(t)
	})
}

// TestProcessIDsAsStatus: for every live process, the ids PIDFD_GET_INFO gives are those of
// its /proc/PID/status, in the order Take reads them.
func TestProcessIDsAsStatus(t *testing.T) {
	names, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(filepath.Base(name))
		if err != nil {
			continue
		}
		pidfd, status, err := idmap.ProcessIDs(pid)
		if errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		if pidfd != status {
			t.Errorf("process %d: PIDFD_GET_INFO gives %v, its status %v", pid, pidfd, status)
		}
		n++
	}
	if n < 2 {
		t.Fatalf("compared %d processes, want this one and its parent at least", n)
	}
}

// TestTakenUIDSharesNothingLive: a process of a root-run box, running as the uid Take gives
// (in a user namespace that maps only its uid 0 to it, as the box's), can neither signal a
// live process left from an earlier box whose shim had the same pid nor read the 0600 file
// that process left. Mapped to the uid such a box had before Take (0x70000000 + pid), the same
// process does both: the check that the attempt is real, and what happened before. (ptrace
// from a box's user namespace into another needs CAP_SYS_PTRACE in the target's, which no
// box holds, whatever the uids; the conformance test RootBoxUIDNotShared tries it the other
// way, from the leftover's uid into the box.)
func TestTakenUIDSharesNothingLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only boxes started by host root are remapped")
	}
	noAccounts(t)
	old := idmap.BoxUIDBase + os.Getpid()
	var err error
	cred := &syscall.Credential{Uid: uint32(old), Gid: uint32(old), Groups: []uint32{}}
	leftover := exec.Command("/bin/sleep", "1000")
	leftover.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leftover.Process.Kill(); leftover.Wait() })
	dir, err := os.MkdirTemp("", "agentbox-leftover-") // in /tmp, which every uid may search
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "left")
	if err := os.WriteFile(secret, []byte("LEFTOVER\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, old, old); err != nil {
		t.Fatal(err)
	}
	try := func(host int) string {
		return shAsBoxRoot(host, fmt.Sprintf("if kill -0 %d; then echo SIGNALLED; fi; if cat %s; then echo READ; fi", leftover.Process.Pid, secret))
	}
	if out := try(old); !strings.Contains(out, "SIGNALLED") || !strings.Contains(out, "READ") {
		t.Fatalf("mapped to the leftover's uid %d, the process should signal and read as it does: %q", old, out)
	}
	lease, err := idmap.Take(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	if lease.UID == old {
		t.Fatalf("took uid %d, which the leftover process %d holds", old, leftover.Process.Pid)
	}
	if out := try(lease.UID); strings.Contains(out, "SIGNALLED") || strings.Contains(out, "READ") {
		t.Errorf("mapped to the taken uid %d, the process reached the leftover of uid %d: %q", lease.UID, old, out)
	}
}

// BenchmarkTake is what taking a box uid adds to a root launch: the four account files read and
// every process's status scanned.
func BenchmarkTake(b *testing.B) {
	for b.Loop() {
		lease, err := idmap.Take(os.Getpid())
		if err != nil {
			b.Fatal(err)
		}
		lease.Release()
	}
}

// TestTakeConcurrent: boxes a process starts at once (the conformance suite's, from one test
// process) take distinct box uids, each of them the process's own.
func TestTakeConcurrent(t *testing.T) {
	noAccounts(t)
	const n = 8
	leases := make(chan *idmap.Lease, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			l, err := idmap.Take(os.Getpid())
			if err != nil {
				errs <- err
				return
			}
			leases <- l
		}()
	}
	seen := map[int]bool{}
	for range n {
		select {
		case err := <-errs:
			t.Fatal(err)
		case l := <-leases:
			if seen[l.UID] || !idmap.IsBoxUID(l.UID) || (l.UID-idmap.BoxUIDBase)%idmap.PIDs != os.Getpid() {
				t.Errorf("took %d twice, or not one of this process's box uids", l.UID)
			}
			seen[l.UID] = true
			defer l.Release()
		}
	}
}

// TestTakeRefusesWhenAllHeld: with every slot of the process's taken, Take refuses with the
// class and says why, and takes again once one is released.
func TestTakeRefusesWhenAllHeld(t *testing.T) {
	noAccounts(t)
	var leases []*idmap.Lease
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	for {
		l, err := idmap.Take(os.Getpid())
		if err != nil {
			if !errors.Is(err, idmap.ErrBoxUIDTaken) || !strings.Contains(err.Error(), "are held") {
				t.Fatalf("after %d leases: %v", len(leases), err)
			}
			break
		}
		if leases = append(leases, l); len(leases) > idmap.Slots {
			t.Fatalf("took %d box uids, more than the %d slots", len(leases), idmap.Slots)
		}
	}
	if len(leases) > idmap.Slots || len(leases) == 0 {
		t.Fatalf("took %d of %d slots before the refusal", len(leases), idmap.Slots)
	}
	leases[0].Release()
	l, err := idmap.Take(os.Getpid())
	if err != nil || l.UID != leases[0].UID {
		t.Fatalf("after a release: %v, %v (want %d again)", l, err, leases[0].UID)
	}
	leases[0] = l
}
