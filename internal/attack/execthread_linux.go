package attack

import (
	"encoding/binary"
	"runtime"
)

// ExecThreadProgram returns a minimal static x86-64 Linux executable (nil on other
// architectures) to run as a box's program itself, not through the probe: the instant it
// starts it sends SIGABRT to every thread id below its own pid in PID 1's thread group,
// tgkill(1, tid, SIGABRT), 20000 times over, then exits 0.
//
// It does nothing and exits 0 unless its parent is PID 1 (never run it as root outside a box:
// there PID 1 is the host's init).
//
// It aimed at the exec stage's restricted thread of an earlier design, in which box-init started the program from one of its
// own threads after putting that thread into the program's Landlock domain (and seccomp
// filter, and empty capability sets); until that thread has exited, the program is in the
// same domain as one thread of PID 1, so the Landlock signal scope lets it signal that
// thread, and a SIGABRT (or SEGV, BUS, ILL, TRAP, SYS) makes the Go runtime of box-init crash:
// the whole box dies and the launch is recorded as a box that "ended before its program
// started". A Go probe starts too slowly to find the thread still there; a program of a few
// instructions does, most of the time. The box holds when every launch of it ends with the
// program's own exit code, 0.
//
// The code (position independent, no data):
//
//	_start: mov $110, %eax         # getppid
//	        syscall
//	        cmp $1, %rax
//	        jne 4f                 # not a box's program: exit
//	        mov $39, %eax          # getpid
//	        syscall
//	        mov %rax, %r12
//	        mov $20000, %r13d      # rounds
//	1:      mov $2, %r14d          # tid
//	2:      cmp %r12, %r14
//	        jge 3f
//	        mov $234, %eax         # tgkill(1, tid, SIGABRT)
//	        mov $1, %edi
//	        mov %r14, %rsi
//	        mov $6, %edx
//	        syscall
//	        inc %r14
//	        jmp 2b
//	3:      dec %r13
//	        jnz 1b
//	4:      mov $60, %eax          # exit(0)
//	        xor %edi, %edi
//	        syscall
func ExecThreadProgram() []byte {
	if runtime.GOARCH != "amd64" {
		return nil
	}
	code := []byte{
		0xb8, 0x6e, 0x00, 0x00, 0x00, // mov $110, %eax
		0x0f, 0x05, // syscall
		0x48, 0x83, 0xf8, 0x01, // cmp $1, %rax
		0x75, 0x39, // jne 4f
		0xb8, 0x27, 0x00, 0x00, 0x00, // mov $39, %eax
		0x0f, 0x05, // syscall
		0x49, 0x89, 0xc4, // mov %rax, %r12
		0x41, 0xbd, 0x20, 0x4e, 0x00, 0x00, // mov $20000, %r13d
		0x41, 0xbe, 0x02, 0x00, 0x00, 0x00, // 1: mov $2, %r14d
		0x4d, 0x39, 0xe6, // 2: cmp %r12, %r14
		0x7d, 0x19, // jge 3f
		0xb8, 0xea, 0x00, 0x00, 0x00, // mov $234, %eax
		0xbf, 0x01, 0x00, 0x00, 0x00, // mov $1, %edi
		0x4c, 0x89, 0xf6, // mov %r14, %rsi
		0xba, 0x06, 0x00, 0x00, 0x00, // mov $6, %edx
		0x0f, 0x05, // syscall
		0x49, 0xff, 0xc6, // inc %r14
		0xeb, 0xe2, // jmp 2b
		0x49, 0xff, 0xcd, // 3: dec %r13
		0x75, 0xd7, // jnz 1b
		0xb8, 0x3c, 0x00, 0x00, 0x00, // 4: mov $60, %eax
		0x31, 0xff, // xor %edi, %edi
		0x0f, 0x05, // syscall
	}
	return minimalELF(code)
}

// minimalELF wraps position-independent x86-64 code in an ELF executable of one loadable,
// readable and executable segment whose entry point is the code's first byte.
func minimalELF(code []byte) []byte {
	const (
		base      = 0x400000
		ehdrSize  = 64
		phdrSize  = 56
		headerLen = ehdrSize + phdrSize
	)
	total := uint64(headerLen + len(code))
	le := binary.LittleEndian
	b := make([]byte, 0, total)
	// ELF header.
	b = append(b, 0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */, 0 /* System V */)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, 2)    // ET_EXEC
	b = le.AppendUint16(b, 0x3e) // EM_X86_64
	b = le.AppendUint32(b, 1)    // EV_CURRENT
	b = le.AppendUint64(b, base+headerLen)
	b = le.AppendUint64(b, ehdrSize) // program headers
	b = le.AppendUint64(b, 0)        // no section headers
	b = le.AppendUint32(b, 0)        // flags
	b = le.AppendUint16(b, ehdrSize)
	b = le.AppendUint16(b, phdrSize)
	b = le.AppendUint16(b, 1) // one program header
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, 0)
	// Program header: the whole file, loaded at base.
	b = le.AppendUint32(b, 1) // PT_LOAD
	b = le.AppendUint32(b, 5) // PF_R|PF_X
	b = le.AppendUint64(b, 0)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, base)
	b = le.AppendUint64(b, total)
	b = le.AppendUint64(b, total)
	b = le.AppendUint64(b, 0x1000)
	return append(b, code...)
}
