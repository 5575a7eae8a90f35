// Package landlock builds and enforces the Landlock ruleset of a box's program: read, write
// and device rights on the box's own paths, the abstract-socket and signal scopes of the
// kernel's ABI, and nothing on the network (the network namespace is the network boundary).
package landlock

import (
	"errors"
	"fmt"

	golandlock "github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock rights granted by the policy's lists.
const (
	llRead      = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llReadWrite = llRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate
	llDev    = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSReadDir | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	llROFile = ll.AccessFSReadFile
	llRWFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// llFileRights are the rights a rule on a non-directory may carry.
	llFileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// llMaxABI is the newest ABI whose rights this package handles: ABI 9's pathname unix socket
	// right would block connect() to the relay sockets without rules this package does not write.
	llMaxABI = 7
)

// landlockConfigs are go-landlock's configs by ABI.
var landlockConfigs = []golandlock.Config{golandlock.V1, golandlock.V1, golandlock.V2, golandlock.V3, golandlock.V4, golandlock.V5, golandlock.V6, golandlock.V7}

// Policy is a program's filesystem policy: the rights on each list's paths (missing paths are
// skipped), and the oldest Landlock ABI the kernel may have.
type Policy struct {
	MinABI int
	RO     []string // read and execute directories and files
	RW     []string // read, write, create and remove beneath
	Dev    []string // device nodes: read, write, ioctl
	ROFile []string // read a file
	RWFile []string // read and write a file
}

// Ruleset builds (without enforcing) the ruleset of policy l and returns its descriptor
// (close-on-exec) and the flags RestrictSelf needs. It fails closed: a kernel without Landlock,
// or below the policy's minimum ABI, is an error, never a silent downgrade.
func Ruleset(l Policy) (int, uint32, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return -1, 0, fmt.Errorf("not available (%v); agentbox needs Landlock ABI %d or newer (enable CONFIG_SECURITY_LANDLOCK and lsm=landlock)", err, l.MinABI)
	}
	if abi < l.MinABI {
		return -1, 0, fmt.Errorf("kernel has ABI %d, agentbox needs %d or newer", abi, l.MinABI)
	}
	use := min(abi, llMaxABI)
	base := landlockConfigs[use]
	// No network rights: the network namespace is the network boundary, and Landlock's port
	// rules would match every address.
	cfg := golandlock.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	handled := uint64(cfg.HandledAccessFS)

	var rules []golandlock.Rule
	addRules := func(paths []string, rights uint64) error {
		for _, p := range paths {
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // not in this box (an optional mount that was skipped)
				}
				return fmt.Errorf("stat %s: %w", p, err)
			}
			r := rights & handled
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				r &= llFileRights
			}
			if r != 0 {
				rules = append(rules, golandlock.PathAccess(golandlock.AccessFSSet(r), p))
			}
		}
		return nil
	}
	for _, g := range []struct {
		paths  []string
		rights uint64
	}{
		// Listing directories reveals only names of what the mounts already show.
		{[]string{"/"}, ll.AccessFSReadDir},
		{l.RO, llRead},
		{l.RW, llReadWrite},
		{l.Dev, llDev},
		{l.ROFile, llROFile},
		{l.RWFile, llRWFile},
	} {
		if err := addRules(g.paths, g.rights); err != nil {
			return -1, 0, err
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, err
	}
	if fd < 0 {
		return -1, 0, errors.New("no ruleset created")
	}
	return fd, flags, nil
}

// RestrictSelf enforces the ruleset fd (Ruleset) on the calling thread; with no_new_privs set, it
// holds for every process the thread execs or starts from then on.
func RestrictSelf(fd int, flags uint32) error { return ll.LandlockRestrictSelf(fd, flags) }

// RestrictProcess enforces policy l on every thread of this process, and on what it starts
// from then on (no_new_privs is set on every thread first): for a helper process that handles
// input it does not trust and must be confined as a whole, a Go program's threads included.
func RestrictProcess(l Policy) error {
	fd, flags, err := Ruleset(l)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return ll.AllThreadsLandlockRestrictSelf(fd, flags)
}
