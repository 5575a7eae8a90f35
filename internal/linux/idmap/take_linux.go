package idmap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

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
// slot (BoxUID) of pid's that no live process holds as its effective uid or gid — a process of
// an earlier box of the same uid, still ending after the kernel gave its shim's pid to this
// one — and that this process has not taken for another box. Since a pid is one live
// process's, no other starting process can take pid's slots, and a box's processes hold their
// uid as every id and cannot change them (their user namespace maps one), the uid is shared
// with nothing live (docs/security.md, "Root running agentbox").
//
// It refuses, naming the file, line and fix, while an account in /etc/passwd or /etc/group,
// or a range in /etc/subuid or /etc/subgid, lies in the box uid range; and, naming processes,
// when every slot is held.
func Take(pid int) (*Lease, error) {
	if err := checkAccounts(accountFiles); err != nil {
		return nil, err
	}
	held, err := heldSlots(pid)
	if err != nil {
		return nil, err
	}
	taken.Lock()
	defer taken.Unlock()
	for k := range Slots {
		uid := BoxUID(pid, k)
		if held[uid] == 0 && !taken.uids[uid] {
			taken.uids[uid] = true
			return &Lease{UID: uid}, nil
		}
	}
	by := "this process's other boxes"
	for k := range Slots {
		if p := held[BoxUID(pid, k)]; p != 0 {
			by = fmt.Sprintf("uid %d by process %d, …; see ps -u %d", BoxUID(pid, k), p, BoxUID(pid, k))
			break
		}
	}
	return nil, fmt.Errorf("%w: all %d box uids of process %d are held (%s): processes of earlier boxes are still ending; end them or retry the launch",
		ErrBoxUIDTaken, Slots, pid, by)
}

// heldSlots returns, for each of pid's box uids that a live process holds as its effective uid
// or gid, that process's pid. It reads the owner of each /proc/N, which the kernel keeps as
// the process's effective uid and gid whether or not it is dumpable (the files inside show as
// root's when it is not), zombies included: one stat per process, where reading each status
// costs tens of microseconds.
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
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(d.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // ended meanwhile
		}
		for _, id := range []int{int(st.Uid), int(st.Gid)} {
			if IsBoxUID(id) && (id-BoxUIDBase)%PIDs == pid%PIDs {
				held[id] = p
			}
		}
	}
	return held, nil
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
