package ns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// cloneFlags are the clone(2) flags of the namespaces by their names under /proc/<pid>/ns.
var cloneFlags = map[string]uintptr{
	"user":   unix.CLONE_NEWUSER,
	"mnt":    unix.CLONE_NEWNS,
	"pid":    unix.CLONE_NEWPID,
	"net":    unix.CLONE_NEWNET,
	"ipc":    unix.CLONE_NEWIPC,
	"uts":    unix.CLONE_NEWUTS,
	"cgroup": unix.CLONE_NEWCGROUP,
}

// CloneFlags returns the clone(2) flags that create the named namespaces ("user", "mnt", …), or
// an error naming the first name it does not know.
func CloneFlags(names []string) (uintptr, error) {
	var flags uintptr
	for _, n := range names {
		f, ok := cloneFlags[n]
		if !ok {
			return 0, fmt.Errorf("namespace %q", n)
		}
		flags |= f
	}
	return flags, nil
}

// LoopbackUp sets IFF_UP on lo, which a new network namespace has down.
func LoopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}
