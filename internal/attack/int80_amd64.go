package attack

// haveInt80 says whether this architecture can make i386 system calls with int 0x80.
const haveInt80 = true

// int80 makes an i386 system call through int 0x80 and returns its raw result (a negative
// errno on failure). Implemented in int80_amd64.s.
func int80(nr, a1, a2, a3 uintptr) int64
