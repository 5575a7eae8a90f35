package mount

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine/spec"
)

// StagedFile is the host's staged copy of a protected file, opened where the box's init cannot
// see it (the bwrap engine's monitor opens it on the host): the copy, read-write, and its
// folder (O_PATH), where the marker of a copy cut at its bound is made.
type StagedFile struct {
	File *os.File
	Dir  int
}

// Adopt takes over a box filesystem that another program built from s (bwrap), from a mount
// namespace of the calling process's own, unshared from that program's once it was built so
// that the caller may mount in it: it records the workspace's binds and the masks, as Build
// does, for Watch and the Keeper to keep for the box's life, and puts each staged copy (the
// Staged binds of s, in order; staged[i] is the host file of the i-th) alone on a tmpfs bounded
// at changes.MaxFile, bound over its target, as Build does. A masked path that exists but was
// not masked (it appeared after the other program looked) is masked now. A workspace bind that
// is missing is an error unless its step is optional and nothing is at its target. Adopt takes
// the descriptors of staged, also on error.
func Adopt(s *spec.Spec, staged []StagedFile) (*Root, error) {
	b := &Root{root: -1, stage: -1, ours: map[uint64]bool{}}
	defer func() {
		for _, sf := range staged {
			if sf.File != nil {
				sf.File.Close()
				unix.Close(sf.Dir)
			}
		}
	}()
	for _, m := range s.Mounts {
		var err error
		switch {
		case m.Kind == spec.KindBind && m.Staged:
			if len(staged) == 0 {
				return nil, fmt.Errorf("staged copy of %s: its host file was not passed", m.Target)
			}
			sf := staged[0]
			staged = staged[1:]
			err = b.adoptStaged(m, sf)
		case m.Kind == spec.KindBind && m.Beneath != "":
			err = b.adoptKept(m)
		case m.Kind == spec.KindMask:
			if t := filepath.Clean(m.Target); t == "/proc" || strings.HasPrefix(t, "/proc/") {
				continue
			}
			err = b.adoptKept(m)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Target, err)
		}
	}
	if len(staged) > 0 {
		return nil, fmt.Errorf("%d staged copies passed beyond the spec's", len(staged))
	}
	return b, nil
}

// adoptStaged puts the staged copy sf on a tmpfs of its own and binds it, or with m.Folder (where
// the other program made an empty tmpfs for it) a symlink to it, over m.Target (where the other
// program bound the host's copy itself), as bindStaged does.
func (b *Root) adoptStaged(m spec.Mount, sf StagedFile) error {
	target, err := openInBox(m.Target)
	if err != nil {
		sf.File.Close()
		unix.Close(sf.Dir)
		return err
	}
	defer unix.Close(target)
	folder := -1
	if m.Folder != "" {
		if folder, err = openInBox(m.Folder); err != nil {
			sf.File.Close()
			unix.Close(sf.Dir)
			return fmt.Errorf("staged copy's folder %s: %w", m.Folder, err)
		}
		defer unix.Close(folder)
	}
	mnt, err := b.copyOnTmpfs(sf.File, sf.Dir, filepath.Base(m.Source), m.Target)
	if err != nil {
		return err
	}
	defer unix.Close(mnt)
	tree, err := stagedTree(mnt, folder, m)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := moveOnto(tree, target); err != nil {
		return err
	}
	id, err := mountID(tree)
	if err != nil {
		return err
	}
	b.kept = append(b.kept, keptMount{target: m.Target, readOnly: true, id: id, protected: true, beneath: b.workspaceOf(m.Target)})
	return nil
}

// adoptKept records a bind of the workspace or a mask the other program made; a mask it did
// not make (the path appeared after it looked) is made now.
func (b *Root) adoptKept(m spec.Mount) error {
	mask := m.Kind == spec.KindMask
	fd, err := openInBox(m.Target)
	if err != nil {
		if errors.Is(err, unix.ENOENT) && (mask || m.Optional) {
			return nil // absent: nothing was bound or masked there
		}
		return err
	}
	defer unix.Close(fd)
	id, dir, root, err := mountRoot(fd)
	if err != nil {
		return err
	}
	switch {
	case !root && !mask:
		return errors.New("not bound")
	case !root:
		if id, err = maskOnto(fd, dir, -1); err != nil {
			return err
		}
	}
	k := keptMount{target: m.Target, mask: mask, dir: dir, id: id}
	if !mask {
		k.readOnly, k.protected, k.beneath = m.ReadOnly, m.ReadOnly, m.Beneath
	}
	b.kept = append(b.kept, k)
	return nil
}

// mountRoot returns the mount id of fd, whether it is a folder, and whether it is the root of
// its mount (a mount point).
func mountRoot(fd int) (id uint64, dir, root bool, err error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID|unix.STATX_TYPE, &st); err != nil {
		return 0, false, false, fmt.Errorf("statx: %w", err)
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return 0, false, false, errors.New("statx: the kernel does not say whether a path is a mount point")
	}
	return st.Mnt_id, st.Mode&unix.S_IFMT == unix.S_IFDIR, st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}
