package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// x32SyscallBit marks x32 system calls, which share AUDIT_ARCH_X86_64 with native ones.
const x32SyscallBit = 0x40000000

// Offsets in struct seccomp_data.
const (
	seccompNrOff   = 0
	seccompArchOff = 4
	seccompArgsOff = 16
)

// retEPERM and retENOSYS are the filter's denials: the call fails, the program goes on.
var (
	retEPERM  = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	retENOSYS = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
)

// deniedSyscalls fail with EPERM: debugging other processes, mounts and namespaces, keyrings,
// bpf, perf, userfaultfd, kernel images and modules, and a few privileged leftovers.
var deniedSyscalls = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
	"mount", "umount2", "pivot_root", "mount_setattr", "open_tree", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "unshare", "setns",
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"acct", "swapon", "swapoff", "reboot", "open_by_handle_at", "quotactl", "syslog",
}

// enosysSyscalls fail with ENOSYS, so libc falls back to the filterable older call (clone3's
// and openat2's flags live in a struct the filter cannot read; io_uring bypasses it).
var enosysSyscalls = []string{"clone3", "openat2", "io_uring_setup"}

// nsCloneFlags are the namespace flags clone(2) may not use.
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// setidBits are S_ISUID|S_ISGID.
const setidBits = 0o6000

// oTmpfile is __O_TMPFILE without O_DIRECTORY.
const oTmpfile = unix.O_TMPFILE &^ unix.O_DIRECTORY

// Program assembles the filter for the running architecture.
//
// go-seccomp-bpf assembles the syscall groups. Its own preamble lets a foreign architecture
// through to the default action (allow, for a deny list) and compares 64-bit arguments, so
// the program starts with a preamble of its own that returns EPERM for any foreign architecture
// (i386 on x86_64) and for x32 calls (AUDIT_ARCH_X86_64 with bit 30 of the number set),
// compares only the low 32 bits of ioctl's command, as the kernel does, and decides openat.
//
// The order is for speed: since Linux 5.11 the kernel runs no filter at all for a call that
// the filter allows whatever its arguments (the action cache), so of a program's hot calls only
// those whose arguments the filter reads run it on every call: openat above all, then ioctl,
// clone, socket and the chmod family. openat and ioctl are decided in the preamble, ahead of the
// library's linear chain of denied calls, which the rest still walk (docs/benchmarks.md, "Work
// in the box", the nineteenth session).
func Program() ([]bpf.Instruction, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	has := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if _, ok := info.SyscallNames[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	var conds []seccompbpf.NameWithConditions
	add := func(name string, cs ...seccompbpf.Condition) {
		if _, ok := info.SyscallNames[name]; ok {
			conds = append(conds, seccompbpf.NameWithConditions{Name: name, Conditions: cs})
		}
	}
	bits := func(arg uint32, v uint64) seccompbpf.Condition {
		return seccompbpf.Condition{Argument: arg, Operation: seccompbpf.BitsSet, Value: v}
	}
	ne := func(arg uint32, v uint64) seccompbpf.Condition {
		return seccompbpf.Condition{Argument: arg, Operation: seccompbpf.NotEqual, Value: v}
	}
	eq := func(arg uint32, v uint64) seccompbpf.Condition {
		return seccompbpf.Condition{Argument: arg, Operation: seccompbpf.Equal, Value: v}
	}
	add("clone", bits(0, nsCloneFlags))
	// Setting setuid/setgid bits: the chmod family, and the mode of calls that create files.
	add("chmod", bits(1, setidBits))
	add("fchmod", bits(1, setidBits))
	add("fchmodat", bits(2, setidBits))
	add("fchmodat2", bits(2, setidBits))
	add("creat", bits(1, setidBits))
	add("mknod", bits(1, setidBits))
	add("mknodat", bits(2, setidBits))
	// openat, the hottest call the filter must look into, is decided by the preamble below.
	for _, flag := range []uint64{unix.O_CREAT, oTmpfile} {
		add("open", bits(1, flag), bits(2, setidBits))
	}
	// Socket families: unix, inet, inet6, and netlink for NETLINK_ROUTE only. A family with
	// high bits set differs from all four and is denied.
	for _, call := range []string{"socket", "socketpair"} {
		add(call, ne(0, unix.AF_UNIX), ne(0, unix.AF_INET), ne(0, unix.AF_INET6), ne(0, unix.AF_NETLINK))
		add(call, eq(0, unix.AF_NETLINK), ne(2, unix.NETLINK_ROUTE))
	}
	policy := seccompbpf.Policy{
		DefaultAction: seccompbpf.ActionAllow,
		Syscalls: []seccompbpf.SyscallGroup{
			{Names: has(deniedSyscalls...), NamesWithCondtions: conds, Action: seccompbpf.ActionErrno},
			{Names: has(enosysSyscalls...), Action: seccompbpf.ActionErrno | seccompbpf.Action(unix.ENOSYS)},
		},
	}
	for _, must := range []string{"ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "clone3", "openat2", "io_uring_setup", "ioctl", "openat"} {
		if _, ok := info.SyscallNames[must]; !ok {
			return nil, fmt.Errorf("seccomp: %s has no %s", info.Name, must)
		}
	}
	lib, err := policy.Assemble()
	if err != nil {
		return nil, err
	}

	argLo := func(n uint32) uint32 {
		off := seccompArgsOff + 8*n
		if nativeBigEndian() {
			off += 4
		}
		return off
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArchOff, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: retEPERM}, // a foreign architecture
		bpf.LoadAbsolute{Off: seccompNrOff, Size: 4},
	}
	if info.ID == arch.X86_64.ID {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: retEPERM}, // x32
		)
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.SyscallNames["ioctl"]), SkipFalse: 5},
		bpf.LoadAbsolute{Off: argLo(1), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCSTI, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.TIOCLINUX, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(unix.SECCOMP_RET_ALLOW)}, // any other ioctl: the library lists none
		bpf.RetConstant{Val: retEPERM},                       // TIOCSTI, TIOCLINUX whatever the high bits
		// openat: a setuid or setgid mode for a file it creates (O_CREAT, or O_TMPFILE's bit
		// without O_DIRECTORY) is refused; every other openat is allowed here, in 9–11
		// instructions rather than after the library's chain of denied calls (68–72). The
		// mode and the flags are compared in their low 32 bits, where the kernel reads them.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.SyscallNames["openat"]), SkipFalse: 6},
		bpf.LoadAbsolute{Off: argLo(2), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.O_CREAT | oTmpfile, SkipFalse: 2},
		bpf.LoadAbsolute{Off: argLo(3), Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: setidBits, SkipTrue: 1},
		bpf.RetConstant{Val: uint32(unix.SECCOMP_RET_ALLOW)},
		bpf.RetConstant{Val: retEPERM},
	)
	return append(prog, lib...), nil
}

func nativeBigEndian() bool {
	switch runtime.GOARCH {
	case "ppc64", "s390x", "mips", "mips64":
		return true
	}
	return false
}

// Load installs the program on the calling thread, or on every thread of the process
// with flags SECCOMP_FILTER_FLAG_TSYNC (no_new_privs must already be set).
func Load(prog []bpf.Instruction, flags uintptr) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("assemble seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("load seccomp filter: %w", errno)
	}
	return nil
}
