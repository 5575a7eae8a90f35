package boxhelper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// imageMinFD is the lowest descriptor number an Image takes: far above the few descriptors a
// child's ExtraFiles are moved to (fork/exec dup2s them onto 3, 4, … and shuffles them through
// the numbers just above), so that no child's set-up closes or replaces it before the exec
// that names it.
const imageMinFD = 100

// Image is a sealed in-memory copy of the box helper: a memfd that can no longer be written,
// shrunk, grown or re-sealed. The daemon starts shims from it for its whole life, as runc
// starts from a sealed copy of itself (CVE-2019-5736): whatever later happens to the helper's
// file on disk — a box that can write its directory replacing or rewriting it, an upgrade —
// what runs is what was checked. A daemon started later takes a new copy.
type Image struct {
	// Path is the helper file the image was copied from.
	Path string
	// Digest is the SHA-256 of the image's content, hex.
	Digest string
	f      *os.File
	fd     int
}

// Load finds the box helper of the agentbox binary exe as OpenBinary does, copies the file it
// opened into a sealed Image, and checks the build info of the copy (not of the file, which
// could be rewritten in between): what the checks accepted is exactly what the Image runs.
func Load(exe string) (*Image, error) {
	var img *Image
	f, _, err := openBinary(exe, HelperName, func(f *os.File, path string) error {
		m, err := Seal(f, path)
		if err != nil {
			return err
		}
		if err := checkBuild(m.f, path); err != nil {
			m.Close()
			return err
		}
		img = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Close()
	return img, nil
}

// Seal copies r, from its start, into a sealed memfd: an Image whose Path is path.
func Seal(r io.ReaderAt, path string) (*Image, error) {
	fd, err := memfdExec(HelperName)
	if err != nil {
		return nil, fmt.Errorf("box helper: sealed copy: memfd: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "memfd:"+HelperName)
	defer mf.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(mf, h), io.NewSectionReader(r, 0, 1<<62)); err != nil {
		return nil, fmt.Errorf("box helper: sealed copy of %s: %w", path, err)
	}
	// Read and execute for everyone, as the installed helper is, so that a process whose uid
	// does not map to the copy's owner (in a box's user namespace) can still execute it.
	if err := unix.Fchmod(fd, 0o555); err != nil {
		return nil, fmt.Errorf("box helper: sealed copy: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("box helper: seal the copy: %w", err)
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, imageMinFD)
	if err != nil {
		return nil, fmt.Errorf("box helper: sealed copy: %w", err)
	}
	return &Image{Path: path, Digest: hex.EncodeToString(h.Sum(nil)), f: os.NewFile(uintptr(high), "memfd:"+HelperName), fd: high}, nil
}

// memfdExec creates a memfd that may be executed: MFD_EXEC where the kernel knows it (Linux
// 6.3+, where vm.memfd_noexec=1 would otherwise make it non-executable), plain otherwise.
func memfdExec(name string) (int, error) {
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, flags)
	}
	return fd, err
}

// ExecPath is the path that executes the image: /proc/self/fd/N, which names the memfd in the
// daemon and, until their exec, in the children it forks (the descriptor is close-on-exec, so
// no program started keeps it).
func (m *Image) ExecPath() string { return "/proc/self/fd/" + strconv.Itoa(m.fd) }

// Close releases the image; nothing may be started from it after.
func (m *Image) Close() error { return m.f.Close() }
