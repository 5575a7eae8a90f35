package seccomp

import (
	"encoding/binary"
	"runtime"
	"testing"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData encodes a struct seccomp_data for x/net/bpf's VM, which loads 32-bit words
// big-endian; the kernel loads them in native order, so each word is written as the VM reads
// it, in the little-endian layout the filter's offsets assume (low word of an argument first).
func seccompData(nr uint32, auditArch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[seccompNrOff:], nr)
	binary.BigEndian.PutUint32(b[seccompArchOff:], auditArch)
	for i, a := range args {
		off := seccompArgsOff + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32))
	}
	return b
}

const (
	auditArchI386  = 0x40000003
	retAllow       = uint32(unix.SECCOMP_RET_ALLOW)
	clonePlainFork = uint64(unix.SIGCHLD)
)

// amd64Filter skips on other architectures (the tables are amd64's) and returns the filter and
// a VM running it.
func amd64Filter(t *testing.T) ([]bpf.Instruction, *bpf.VM) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("decision table written for amd64, not %s", runtime.GOARCH)
	}
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return prog, vm
}

// amd64Nr is a system call's number on amd64.
func amd64Nr(name string) uint32 { return uint32(arch.X86_64.SyscallNames[name]) }

func TestSeccompFilterDecisions(t *testing.T) {
	_, vm := amd64Filter(t)
	x86 := uint32(arch.X86_64.ID)
	nr := amd64Nr
	for _, tc := range []struct {
		name string
		data []byte
		want uint32
	}{
		{"I386Getpid", seccompData(20, auditArchI386), retEPERM},
		{"I386AnyNumber", seccompData(0, auditArchI386), retEPERM},
		{"X32Getpid", seccompData(x32SyscallBit|nr("getpid"), x86), retEPERM},
		{"X32Ioctl", seccompData(x32SyscallBit|514, x86, 0, unix.TIOCSTI), retEPERM},
		{"Getpid", seccompData(nr("getpid"), x86), retAllow},
		{"IoctlTIOCSTI", seccompData(nr("ioctl"), x86, 0, unix.TIOCSTI), retEPERM},
		{"IoctlTIOCSTIHighBits", seccompData(nr("ioctl"), x86, 0, 0xdead_0000_0000_0000|unix.TIOCSTI), retEPERM},
		{"IoctlTIOCLINUXHighBits", seccompData(nr("ioctl"), x86, 0, 1<<32|unix.TIOCLINUX), retEPERM},
		{"IoctlTCGETS", seccompData(nr("ioctl"), x86, 0, unix.TCGETS), retAllow},
		{"IoctlTIOCSWINSZ", seccompData(nr("ioctl"), x86, 0, unix.TIOCSWINSZ), retAllow},
		{"Ptrace", seccompData(nr("ptrace"), x86), retEPERM},
		{"Mount", seccompData(nr("mount"), x86), retEPERM},
		{"Unshare", seccompData(nr("unshare"), x86), retEPERM},
		{"CloneFork", seccompData(nr("clone"), x86, clonePlainFork), retAllow},
		{"CloneThread", seccompData(nr("clone"), x86, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), retAllow},
		{"CloneNewUser", seccompData(nr("clone"), x86, unix.CLONE_NEWUSER|clonePlainFork), retEPERM},
		{"CloneNewNet", seccompData(nr("clone"), x86, unix.CLONE_NEWNET), retEPERM},
		{"Clone3", seccompData(nr("clone3"), x86), retENOSYS},
		{"Openat2", seccompData(nr("openat2"), x86), retENOSYS},
		{"IoUringSetup", seccompData(nr("io_uring_setup"), x86), retENOSYS},
		{"Chmod0755", seccompData(nr("chmod"), x86, 0, 0o755), retAllow},
		{"ChmodSetuid", seccompData(nr("chmod"), x86, 0, 0o4755), retEPERM},
		{"FchmodSetgid", seccompData(nr("fchmod"), x86, 3, 0o2755), retEPERM},
		{"FchmodatSetuid", seccompData(nr("fchmodat"), x86, 0, 0, 0o4700), retEPERM},
		{"Fchmodat2Setuid", seccompData(nr("fchmodat2"), x86, 0, 0, 0o4700, 0), retEPERM},
		{"OpenatCreate0644", seccompData(nr("openat"), x86, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), retAllow},
		{"OpenatCreateSetuid", seccompData(nr("openat"), x86, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o4755), retEPERM},
		{"OpenatTmpfileSetgid", seccompData(nr("openat"), x86, 0, 0, unix.O_TMPFILE|unix.O_RDWR, 0o2755), retEPERM},
		{"OpenatReadIgnoresMode", seccompData(nr("openat"), x86, 0, 0, unix.O_RDONLY, 0o4755), retAllow},
		{"OpenCreateSetuid", seccompData(nr("open"), x86, 0, unix.O_CREAT, 0o4755), retEPERM},
		{"CreatSetuid", seccompData(nr("creat"), x86, 0, 0o4755), retEPERM},
		{"MknodatSetuid", seccompData(nr("mknodat"), x86, 0, 0, unix.S_IFIFO|0o4644, 0), retEPERM},
		{"MknodatFifo", seccompData(nr("mknodat"), x86, 0, 0, unix.S_IFIFO|0o644, 0), retAllow},
		{"SocketUnix", seccompData(nr("socket"), x86, unix.AF_UNIX, unix.SOCK_STREAM), retAllow},
		{"SocketInet", seccompData(nr("socket"), x86, unix.AF_INET, unix.SOCK_STREAM), retAllow},
		{"SocketInet6", seccompData(nr("socket"), x86, unix.AF_INET6, unix.SOCK_DGRAM), retAllow},
		{"SocketNetlinkRoute", seccompData(nr("socket"), x86, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE), retAllow},
		{"SocketNetlinkAudit", seccompData(nr("socket"), x86, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT), retEPERM},
		{"SocketPacket", seccompData(nr("socket"), x86, unix.AF_PACKET, unix.SOCK_RAW), retEPERM},
		{"SocketVsock", seccompData(nr("socket"), x86, unix.AF_VSOCK, unix.SOCK_STREAM), retEPERM},
		{"SocketUnixHighBits", seccompData(nr("socket"), x86, 1<<32|unix.AF_UNIX, unix.SOCK_STREAM), retEPERM},
		{"SocketpairPacket", seccompData(nr("socketpair"), x86, unix.AF_PACKET, unix.SOCK_RAW), retEPERM},
		{"Keyctl", seccompData(nr("keyctl"), x86), retEPERM},
		{"Bpf", seccompData(nr("bpf"), x86), retEPERM},
		{"PerfEventOpen", seccompData(nr("perf_event_open"), x86), retEPERM},
		{"Userfaultfd", seccompData(nr("userfaultfd"), x86), retEPERM},
		{"PidfdGetfd", seccompData(nr("pidfd_getfd"), x86), retEPERM},
		{"ProcessVmReadv", seccompData(nr("process_vm_readv"), x86), retEPERM},
		{"FinitModule", seccompData(nr("finit_module"), x86), retEPERM},
		{"KexecFileLoad", seccompData(nr("kexec_file_load"), x86), retEPERM},
		{"Setns", seccompData(nr("setns"), x86), retEPERM},
		{"OpenTree", seccompData(nr("open_tree"), x86), retEPERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vm.Run(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != tc.want {
				t.Errorf("filter returned %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestSeccompLibraryPassesForeignArch guards the preamble: go-seccomp-bpf alone sends a
// foreign architecture (i386 via int 0x80) to the default action, which for a deny list is
// allow. If this starts failing, the library changed and the preamble may be revisited.
func TestSeccompLibraryPassesForeignArch(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("amd64 only")
	}
	p := seccompbpf.Policy{DefaultAction: seccompbpf.ActionAllow, Syscalls: []seccompbpf.SyscallGroup{{Names: []string{"ptrace"}, Action: seccompbpf.ActionErrno}}}
	prog, err := p.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	got, err := vm.Run(seccompData(26 /* ptrace on i386 */, auditArchI386))
	if err != nil {
		t.Fatal(err)
	}
	if uint32(got) != retAllow {
		t.Errorf("library alone returned %#x for i386 ptrace; expected allow (the gap the preamble closes)", got)
	}
	// And it returns ENOSYS, not allow, for x32.
	got, _ = vm.Run(seccompData(x32SyscallBit|uint32(arch.X86_64.SyscallNames["ptrace"]), uint32(arch.X86_64.ID)))
	if uint32(got) == retAllow {
		t.Errorf("library alone allows x32 ptrace")
	}
}

// steps runs a cBPF seccomp program on one call, as the kernel would, and returns its action
// and the number of instructions it executed. It knows the instructions Program emits (loads of
// seccomp_data words, conditional and unconditional jumps, returns) and fails on any other.
func steps(t *testing.T, prog []bpf.Instruction, data []byte) (ret uint32, n int) {
	t.Helper()
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	var a uint32
	for pc := 0; pc < len(raw); pc++ {
		n++
		in := raw[pc]
		switch in.Op {
		case 0x20: // ld [k]
			a = uint32(data[in.K])<<24 | uint32(data[in.K+1])<<16 | uint32(data[in.K+2])<<8 | uint32(data[in.K+3])
		case 0x06: // ret #k
			return in.K, n
		case 0x05: // ja k
			pc += int(in.K)
		case 0x15, 0x25, 0x35, 0x45: // jeq, jgt, jge, jset
			var c bool
			switch in.Op {
			case 0x15:
				c = a == in.K
			case 0x25:
				c = a > in.K
			case 0x35:
				c = a >= in.K
			case 0x45:
				c = a&in.K != 0
			}
			if c {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		default:
			t.Fatalf("instruction %d: op %#x not emulated", pc, in.Op)
		}
	}
	t.Fatal("fell off the end of the program")
	return 0, n
}

// TestSeccompOpenatDecidedEarly guards the filter's layout for speed (issue #23): openat, the
// hottest call whose arguments the filter reads, is decided in the preamble, not after the
// library's chain of denied calls; the emulated decisions match the x/net/bpf VM's.
func TestSeccompOpenatDecidedEarly(t *testing.T) {
	prog, vm := amd64Filter(t)
	x86 := uint32(arch.X86_64.ID)
	nr := amd64Nr
	for _, tc := range []struct {
		name      string
		data      []byte
		maxSteps  int
		wantAllow bool
	}{
		{"OpenatRead", seccompData(nr("openat"), x86, 0, 0, unix.O_RDONLY|unix.O_CLOEXEC, 0), 9, true},
		{"OpenatCreate0644", seccompData(nr("openat"), x86, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o644), 11, true},
		{"OpenatCreateSetuid", seccompData(nr("openat"), x86, 0, 0, unix.O_CREAT|unix.O_WRONLY, 0o4755), 11, false},
		{"OpenatTmpfileSetgid", seccompData(nr("openat"), x86, 0, 0, unix.O_TMPFILE|unix.O_RDWR, 0o2700), 11, false},
		{"OpenatDirectory", seccompData(nr("openat"), x86, 0, 0, unix.O_DIRECTORY|unix.O_RDONLY, 0o4755), 9, true},
		{"IoctlTCGETS", seccompData(nr("ioctl"), x86, 0, unix.TCGETS), 9, true},
	} {
		got, n := steps(t, prog, tc.data)
		want, err := vm.Run(tc.data)
		if err != nil {
			t.Fatal(err)
		}
		if got != uint32(want) {
			t.Errorf("%s: emulated %#x, the VM %#x", tc.name, got, want)
		}
		if (got == retAllow) != tc.wantAllow {
			t.Errorf("%s: filter returned %#x, want allow=%v", tc.name, got, tc.wantAllow)
		}
		if n > tc.maxSteps {
			t.Errorf("%s: %d instructions executed, want at most %d (openat and ioctl are decided in the preamble)", tc.name, n, tc.maxSteps)
		}
		t.Logf("%s: %d instructions", tc.name, n)
	}
}
