// Package fds handles the descriptors a process hands across an exec: bytes sealed in a memfd
// for a child to read back (a box's spec, the bwrap engine's request), and the descriptors a
// process inherited without being meant to, which it closes before it runs anything else.
package fds

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Sealed returns a memfd named name holding b, sealed against any change (close-on-exec).
func Sealed(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd for %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	return f, nil
}

// ReadSpec reads the whole of the memfd at fd holding a spec (Sealed), from offset 0 whatever
// the shared offset; more than 16 MiB is refused.
func ReadSpec(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if st.Size <= 0 || st.Size > 16<<20 {
		return nil, fmt.Errorf("read spec: size %d", st.Size)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, fmt.Errorf("read spec: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("read spec: short read")
		}
		off += n
	}
	return b, nil
}

// CloseInherited closes every descriptor from lowest up that survived the execve into this
// process, i.e. that is not close-on-exec; descriptors the Go runtime opened since (cgroup
// files, the poller) are close-on-exec and stay.
func CloseInherited(lowest int) error {
	open, err := Open()
	if err != nil {
		return err
	}
	for _, fd := range open {
		if fd < lowest {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
	return nil
}

// Open lists the descriptors open in this process (from /proc/self/fd, without the one used
// to read it), in the order the kernel lists them.
func Open() ([]int, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return fds, nil
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd != dir {
				fds = append(fds, fd)
			}
		}
	}
}

// Rights returns the descriptors the SCM_RIGHTS messages in oob carried (none for a control
// message that cannot be parsed); the caller owns them.
func Rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var got []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			got = append(got, r...)
		}
	}
	return got
}
