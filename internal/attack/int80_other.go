//go:build !amd64

package attack

const haveInt80 = false

func int80(nr, a1, a2, a3 uintptr) int64 { return -38 } // ENOSYS
