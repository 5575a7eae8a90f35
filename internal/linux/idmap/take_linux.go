package idmap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrBoxUIDTaken is the class of Take's refusals: an account or live processes hold the ids a
// root-run box would run as.
var ErrBoxUIDTaken = errors.New("box uid taken")

// accountFiles are the account databases Take reads: an id there, or in a range there, that
// lies in the box uid range refuses every root launch.
var accountFiles = []string{"/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid"}

// taken holds the box uids this process has taken and not yet released (Lease.Release): from
// Take until a process of the uid runs, where the next Take's look at /proc sees it.
var taken = struct {
	sync.Mutex
	uids map[int]bool
}{uids: map[int]bool{}}

// A Lease is a box uid taken by this process for one box (Take).
type Lease struct {
	// UID is the host uid and gid of the box.
	UID  int
	once sync.Once
}

// Release gives the lease back once a process of the box runs as its uid (or the box never
// will): from then on the box's processes hold the uid for as long as any lives. Release may be
// called more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		taken.Lock()
		delete(taken.uids, l.UID)
		taken.Unlock()
	})
}

// Take returns the box uid a box that the process pid starts as host root runs as: the first
// slot (BoxUID) of pid's that no live process holds as any of its uids or gids — a process of
// an earlier box of the same uid, still ending after the kernel gave its shim's pid to this
// one — and that this process has not taken for another box. Since a pid is one live
// process's, no other starting process can take pid's slots, and a box's processes hold their
// uid as every id and cannot change them (their user namespace maps one), the uid is shared
// with nothing live (docs/security.md, "Root running agentbox").
//
// It refuses, naming the file, line and fix, while an account in /etc/passwd or /etc/group,
// or a range in /etc/subuid or /etc/subgid, lies in the box uid range; naming the account and
// its source, when /etc/nsswitch.conf names other sources of accounts (LDAP, sssd, systemd's
// user records) and one of them has an account or group of the uid taken; and, naming
// processes, when every slot is held.
func Take(pid int) (*Lease, error) {
	if err := checkAccounts(accountFiles); err != nil {
		return nil, err
	}
	held, err := heldSlots(pid)
	if err != nil {
		return nil, err
	}
	lease := take(pid, held)
	if lease == nil {
		return nil, allHeld(pid, held)
	}
	if err := checkOtherSources(nsswitchFile, lease.UID); err != nil {
		lease.Release()
		return nil, err
	}
	return lease, nil
}

// take marks and returns the first of pid's box uids that neither a process in held nor this
// process holds, or nil.
func take(pid int, held map[int]int) *Lease {
	taken.Lock()
	defer taken.Unlock()
	for k := range Slots {
		uid := BoxUID(pid, k)
		if held[uid] == 0 && !taken.uids[uid] {
			taken.uids[uid] = true
			return &Lease{UID: uid}
		}
	}
	return nil
}

// allHeld is Take's refusal when every slot of pid's is held.
func allHeld(pid int, held map[int]int) error {
	by := "this process's other boxes"
	for k := range Slots {
		if p := held[BoxUID(pid, k)]; p != 0 {
			by = fmt.Sprintf("uid %d by process %d, …; see ps -u %d", BoxUID(pid, k), p, BoxUID(pid, k))
			break
		}
	}
	return fmt.Errorf("%w: all %d box uids of process %d are held (%s): processes of earlier boxes are still ending; end them or retry the launch",
		ErrBoxUIDTaken, Slots, pid, by)
}

// heldSlots returns, for each of pid's box uids that a live process holds as any of its ids —
// real, effective, saved or filesystem uid or gid — that process's pid. The owner of each
// /proc/N (one stat, zombies included) is the process's effective uid and gid whether or not
// it is dumpable; the other six come from the process's pidfd (PIDFD_GET_INFO, Linux 6.13),
// or, on older kernels, from its /proc/N/status, which costs tens of microseconds a process
// where the pidfd costs about two (docs/benchmarks.md, "Taking a box uid"). A process that
// keeps a box uid as its real, saved or filesystem id only (a privileged program that set it
// and then took back root, say) can send the box's processes signals or read their files as
// well as one whose effective id it is.
func heldSlots(pid int) (map[int]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("box uid: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("box uid: list processes: %w", err)
	}
	held := map[int]int{}
	mark := func(p int, ids ...uint32) {
		for _, id := range ids {
			if IsBoxUID(int(id)) && (int(id)-BoxUIDBase)%PIDs == pid%PIDs {
				held[int(id)] = p
			}
		}
	}
	read := processIDs
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // ended meanwhile
		}
		mark(p, st.Uid, st.Gid)
		ids, err := read(p)
		if errors.Is(err, errNoPidfdInfo) {
			read = statusIDs
			ids, err = read(p)
		}
		if err != nil {
			if errors.Is(err, unix.ESRCH) || errors.Is(err, os.ErrNotExist) {
				continue // ended meanwhile: its effective ids were looked at above
			}
			return nil, fmt.Errorf("box uid: the ids of process %d: %w", p, err)
		}
		mark(p, ids[:]...)
	}
	return held, nil
}

// processIDs reads a process's ids for heldSlots: pidfdIDs, and statusIDs where it says
// errNoPidfdInfo.
var processIDs = pidfdIDs

// errNoPidfdInfo is pidfdIDs' answer on a kernel without PIDFD_GET_INFO.
var errNoPidfdInfo = errors.New("no PIDFD_GET_INFO")

// pidfdIDs returns the real, effective, saved and filesystem uids and gids of the process pid,
// from a pidfd of it.
func pidfdIDs(pid int) ([8]uint32, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return [8]uint32{}, errNoPidfdInfo
		}
		if errors.Is(err, unix.EINVAL) {
			// Not a process's first thread: the process ended, and a thread took its pid.
			return [8]uint32{}, unix.ESRCH
		}
		return [8]uint32{}, err
	}
	defer unix.Close(fd)
	in := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PIDFD_GET_INFO, uintptr(unsafe.Pointer(&in))); e != 0 {
		if e == unix.ENOTTY || e == unix.EINVAL {
			return [8]uint32{}, errNoPidfdInfo
		}
		return [8]uint32{}, e
	}
	if in.Mask&unix.PIDFD_INFO_CREDS == 0 {
		return [8]uint32{}, errNoPidfdInfo
	}
	return [8]uint32{in.Ruid, in.Euid, in.Suid, in.Fsuid, in.Rgid, in.Egid, in.Sgid, in.Fsgid}, nil
}

// statusIDs is pidfdIDs from /proc/PID/status (its Uid: and Gid: lines), for kernels without
// PIDFD_GET_INFO.
func statusIDs(pid int) ([8]uint32, error) {
	var ids [8]uint32
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ids, err
	}
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		at := -1
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			at, line = 0, rest
		} else if rest, ok := strings.CutPrefix(line, "Gid:"); ok {
			at, line = 4, rest
		}
		if at < 0 {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			return ids, fmt.Errorf("/proc/%d/status: %q is not four ids", pid, line)
		}
		for i, v := range f {
			id, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return ids, fmt.Errorf("/proc/%d/status: %w", pid, err)
			}
			ids[at+i] = uint32(id)
		}
		found++
	}
	if found != 2 {
		return ids, fmt.Errorf("/proc/%d/status: no Uid: and Gid: lines", pid)
	}
	return ids, nil
}

// checkAccounts refuses when an account, group or subordinate id range in files lies, even in
// part, in the box uid range: a box would share its uid with it.
func checkAccounts(files []string) error {
	for _, name := range files {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("box uid: %w", err)
		}
		err = scanAccounts(f, name)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// scanAccounts checks one account file: passwd and group lines carry an id in their third
// field, subuid and subgid lines a first id and a count in their second and third.
func scanAccounts(f *os.File, name string) error {
	sub := strings.HasSuffix(name, "/subuid") || strings.HasSuffix(name, "/subgid")
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ":")
		var first, count uint64 = 0, 1
		var err error
		switch {
		case sub && len(fields) >= 3:
			first, err = strconv.ParseUint(fields[1], 10, 32)
			if err == nil {
				count, err = strconv.ParseUint(fields[2], 10, 32)
			}
		case !sub && len(fields) >= 3:
			first, err = strconv.ParseUint(fields[2], 10, 32)
		default:
			continue // not an entry (NIS "+" lines and the like)
		}
		if err != nil || count == 0 {
			continue
		}
		if first < BoxUIDEnd && first+count > BoxUIDBase {
			ids := strconv.FormatUint(first, 10)
			if count > 1 {
				ids = fmt.Sprintf("%d–%d", first, first+count-1)
			}
			return fmt.Errorf("%w: %s line %d: %q holds ids %s, in the range root-run boxes run as (%d–%d, %#x–%#x), so a box would share them; give it ids outside that range, or run agentbox as an ordinary user",
				ErrBoxUIDTaken, name, line, fields[0], ids, BoxUIDBase, BoxUIDEnd-1, BoxUIDBase, BoxUIDEnd-1)
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("box uid: read %s: %w", name, err)
	}
	return nil
}

// nsswitchFile is where the sources of accounts are named (nsswitch.conf(5)).
var nsswitchFile = "/etc/nsswitch.conf"

// getentPaths are where getent(1) is looked for: it asks the C library's NSS, which a program
// without cgo cannot load, for accounts of sources other than the files.
var getentPaths = []string{"/usr/bin/getent", "/bin/getent"}

// getentTimeout bounds one look-up: a directory server that does not answer refuses the
// launch rather than holding it.
const getentTimeout = 10 * time.Second

// otherSources returns the sources of the databases passwd and group that nsswitch names
// besides the files Take reads itself (checkAccounts): ldap, sss, systemd, nis, compat's NIS
// entries, …. A missing file names none (the C library then reads the files).
func otherSources(nsswitch string) (map[string][]string, error) {
	b, err := os.ReadFile(nsswitch)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("box uid: %w", err)
	}
	out := map[string][]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		db, rest, ok := strings.Cut(line, ":")
		db = strings.TrimSpace(db)
		if !ok || db != "passwd" && db != "group" {
			continue
		}
		for _, src := range strings.Fields(rest) {
			if src != "files" && !strings.HasPrefix(src, "[") {
				out[db] = append(out[db], src)
			}
		}
	}
	return out, nil
}

// checkOtherSources refuses when a source of accounts other than the files (otherSources) has
// an account of uid uid or a group of gid uid, asking getent for each: the keyed look-up
// every source answers, where listing the whole range would need an enumeration that sssd
// and LDAP servers commonly refuse or truncate. It also refuses when it cannot tell (no
// getent, a look-up that fails or times out), naming the source.
func checkOtherSources(nsswitch string, uid int) error {
	srcs, err := otherSources(nsswitch)
	if err != nil || len(srcs) == 0 {
		return err
	}
	getent := ""
	for _, p := range getentPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			getent = p
			break
		}
	}
	dbs := []string{"passwd", "group"}
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		if len(srcs[db]) == 0 {
			continue
		}
		named := strings.Join(srcs[db], " ")
		if getent == "" {
			return fmt.Errorf("%w: %s names %s for %s, and no getent (%s) was found to ask them whether an account holds uid %d, which a root-run box would run as; install getent (libc-bin) or run agentbox as an ordinary user",
				ErrBoxUIDTaken, nsswitch, named, db, strings.Join(getentPaths, ", "), uid)
		}
		wg.Go(func() { errs[i] = askSource(getent, db, named, nsswitch, uid) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// askSource refuses when getent finds an entry of id uid in the database db (passwd or group)
// whose other sources are named, or cannot tell.
func askSource(getent, db, named, nsswitch string, uid int) error {
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, getent, db, strconv.Itoa(uid)).Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		entry, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%w: %s (sources %s in %s): %q holds id %d, in the range root-run boxes run as (%d–%d, %#x–%#x), so a box would share it; give it ids outside that range, or run agentbox as an ordinary user",
			ErrBoxUIDTaken, db, named, nsswitch, entry, uid, BoxUIDBase, BoxUIDEnd-1, BoxUIDBase, BoxUIDEnd-1)
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return nil // in no source
	default:
		return fmt.Errorf("%w: could not ask %s (sources %s in %s) whether an account holds uid %d, which a root-run box would run as: %s %s %d: %v; fix the source or run agentbox as an ordinary user",
			ErrBoxUIDTaken, db, named, nsswitch, uid, getent, db, uid, err)
	}
}
