// Package mount builds a box's filesystem and keeps it: a fresh tmpfs root filled with
// fd-based mounts (every source opened, every target resolved beneath the new root without
// following a symlink), pivoted into, and — for the box's life — the protected binds and masks
// bound again when the host replaces what they cover (Keeper).
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

// rootCandidates are host directories the box's new root may be attached over while it is
// built; the first that exists and holds no bind source is used (the attach point hides what
// is beneath it, in the box's private mount namespace only).
var rootCandidates = []string{"/mnt", "/media", "/srv", "/tmp", "/var/tmp", "/opt", "/home"}

// Root builds the box's filesystem with fd-based mounts: every source is opened, every
// target resolved beneath the new root without following symlinks, and mounts are moved onto
// the opened target, so a path swapped during set-up cannot redirect a mount.
type Root struct {
	root int // O_PATH fd of the new root tmpfs (attached at attachPoint)
	// ours holds the mount ids of the tmpfs mounts box-init made: only there may it create a
	// missing mount point (never on the host, through a bind).
	ours map[uint64]bool
	// readOnlyLater are tmpfs mounts (fds) made read-only once the box is built.
	readOnlyLater []int
	stage         int // detached tmpfs holding the empty file masks are bound from
	attachPoint   string
	// kept are the binds inside the workspace (those with Beneath) and the masks: box-init
	// keeps them in place for the box's life (see keepMounts).
	kept []keptMount
	// staged are the staged copies the box writes, each on a tmpfs of its own (onTmpfs).
	staged []*stagedCopy
}

// Build makes the mount namespace private, attaches a fresh tmpfs as the new root and applies
// the spec's mounts to it. It does not pivot (Pivot).
func Build(s *spec.Spec) (*Root, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make / private: %w", err)
	}
	b := &Root{ours: map[uint64]bool{}, root: -1, stage: -1}
	ap, err := attachPoint(s)
	if err != nil {
		return nil, err
	}
	b.attachPoint = ap
	rootMnt, err := newMount("tmpfs", "mode=0755", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("root tmpfs: %w", err)
	}
	if err := unix.MoveMount(rootMnt, "", unix.AT_FDCWD, ap, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return nil, fmt.Errorf("attach root tmpfs at %s: %w", ap, err)
	}
	b.root = rootMnt
	if err := b.own(rootMnt); err != nil {
		return nil, err
	}
	if b.stage, err = newStage(); err != nil {
		return nil, err
	}

	for _, m := range s.Mounts {
		if err := b.apply(m); err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind, m.Target, err)
		}
	}
	return b, nil
}

// attachPoint picks the host directory the new root is attached over.
func attachPoint(s *spec.Spec) (string, error) {
	var sources []string
	for _, m := range s.Mounts {
		if m.Kind == spec.KindBind || m.Kind == spec.KindOverlay {
			sources = append(sources, m.Source, m.Beneath)
		}
	}
next:
	for _, c := range rootCandidates {
		for _, src := range sources {
			if src == c || strings.HasPrefix(src, c+"/") {
				continue next
			}
		}
		if fi, err := os.Lstat(c); err == nil && fi.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("no directory to build the root on: every one of %v holds a bind source", rootCandidates)
}

func (b *Root) own(mntfd int) error {
	id, err := mountID(mntfd)
	if err != nil {
		return err
	}
	b.ours[id] = true
	return nil
}

// newMount creates a detached mount of a new filesystem (tmpfs, proc, devpts).
func newMount(fstype, options string, attrs int) (int, error) {
	fs, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fs)
	for _, o := range strings.Split(options, ",") {
		if o == "" {
			continue
		}
		k, v, hasValue := strings.Cut(o, "=")
		if hasValue {
			err = unix.FsconfigSetString(fs, k, v)
		} else {
			err = unix.FsconfigSetFlag(fs, k)
		}
		if err != nil {
			return -1, fmt.Errorf("%s option %s: %w", fstype, o, err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("create %s: %w", fstype, err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	return mnt, nil
}

func mountID(fd int) (uint64, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st); err != nil {
		return 0, fmt.Errorf("statx: %w", err)
	}
	return st.Mnt_id, nil
}

// apply performs one spec mount.
func (b *Root) apply(m spec.Mount) error {
	switch m.Kind {
	case spec.KindBind:
		return b.bind(m)
	case spec.KindTmpfs, spec.KindProc, spec.KindDevpts:
		fstype := m.Kind
		attrs := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
		switch m.Kind {
		case spec.KindProc:
			attrs |= unix.MOUNT_ATTR_NOEXEC
		case spec.KindDevpts:
			attrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC // its nodes are the ttys
		}
		options := m.Options
		if m.Kind == spec.KindProc {
			options = procOptions(options)
		}
		mnt, err := newMount(fstype, options, attrs)
		if err != nil {
			return err
		}
		if err := b.mountOn(mnt, m.Target, true, true); err != nil {
			unix.Close(mnt)
			return err
		}
		if m.Kind == spec.KindTmpfs {
			if err := b.own(mnt); err != nil {
				return err
			}
			if m.ReadOnly {
				b.readOnlyLater = append(b.readOnlyLater, mnt)
				return nil
			}
		}
		unix.Close(mnt)
		return nil
	case spec.KindMask:
		return b.mask(m)
	case spec.KindOverlay:
		return b.overlay(m)
	case spec.KindReadOnly:
		fd, err := b.resolve(m.Target)
		if err != nil {
			if m.Optional && errors.Is(err, unix.ENOENT) {
				return nil
			}
			return err
		}
		defer unix.Close(fd)
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("open_tree: %w", err)
		}
		defer unix.Close(tree)
		if err := setAttr(tree, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return err
		}
		return moveOnto(tree, fd)
	case spec.KindSymlink:
		parent, name, err := b.parent(m.Target, true)
		if err != nil {
			return err
		}
		defer unix.Close(parent)
		if err := b.mayCreate(parent); err != nil {
			return err
		}
		if err := unix.Symlinkat(m.Source, parent, name); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown mount kind", spec.ErrInvalid)
}

// procHidePID is the option every procfs of the box is mounted with, whatever the spec says:
// a process the caller may not ptrace (PTRACE_MODE_READ) is invisible under /proc, whatever
// the mount's gid. box-init is non-dumpable, and the kernel makes the root of the box's user
// namespace the owner of a non-dumpable process's /proc entries; run by root that root is the
// program's own uid (the uid map is 0→0), so without this the program could list the 0500
// fd directories of box-init and of each of its threads (/proc/1/fd, /proc/1/task/<tid>/fd,
// /proc/<tid>/fd — threads the Go runtime starts at any time, which no mask made once could
// cover). The program's own processes stay visible: they share its uid, credentials and
// Landlock domain. Kernel 5.8 or later (the engine needs 5.12 for mount_setattr anyway).
const procHidePID = "hidepid=ptraceable"

// procOptions returns a procfs's options with procHidePID last, so that it wins.
func procOptions(spec string) string {
	if spec == "" {
		return procHidePID
	}
	return spec + "," + procHidePID
}

// bind binds the host's Source at Target.
func (b *Root) bind(m spec.Mount) error {
	if m.Staged {
		return b.bindStaged(m)
	}
	src, err := OpenSource(m.Source, m.Beneath)
	if err != nil {
		if m.Optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		if m.Beneath != "" && errors.Is(err, unix.EXDEV) {
			return fmt.Errorf("open source %s: a symlink there leads out of %s, and a box never follows one: put the file itself there (%w)", m.Source, m.Beneath, err)
		}
		return fmt.Errorf("open source %s: %w", m.Source, err)
	}
	defer unix.Close(src)
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return fmt.Errorf("stat source %s: %w", m.Source, err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	// A directory reached through a symlink at the same path (/lib → usr/lib on merged-/usr
	// systems) is reproduced as the symlink, so the box sees the host's layout.
	if isDir && m.Beneath == "" && m.Source == m.Target {
		if link, err := os.Readlink(m.Source); err == nil {
			return b.apply(spec.Mount{Kind: spec.KindSymlink, Source: link, Target: m.Target})
		}
	}
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", m.Source, err)
	}
	defer unix.Close(tree)
	attrs := uint64(unix.MOUNT_ATTR_NOSUID)
	if !m.Device {
		attrs |= unix.MOUNT_ATTR_NODEV
	}
	if m.ReadOnly {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	// Recursive, so that a read-only bind's submounts are read-only too (a remount with MS_REC
	// would change only the top mount); flags locked on the host's mounts are kept.
	if err := setAttr(tree, attrs); err != nil {
		return err
	}
	if err := b.mountOn(tree, m.Target, isDir, true); err != nil {
		return err
	}
	if m.Beneath != "" {
		id, err := mountID(tree)
		if err != nil {
			return err
		}
		b.kept = append(b.kept, keptMount{target: m.Target, readOnly: m.ReadOnly, dir: isDir, id: id,
			protected: m.ReadOnly, beneath: m.Beneath})
	}
	return nil
}

// bindStaged puts a copy of the staged copy m.Source on a tmpfs bounded at changes.MaxFile and
// binds it over m.Target, or with m.Folder mounts the tmpfs there and binds over m.Target a
// symlink to the copy (stagedTree). The bind is
// kept as a protected one: a staged copy lost to the host's replacement of the file is not
// bound again, the host's new file is bound read-only (the box's copy was made from the old
// one).
func (b *Root) bindStaged(m spec.Mount) error {
	mnt, err := b.onTmpfs(m.Source, m.Target)
	if err != nil {
		return err
	}
	// The detached tmpfs is held open until it is attached: closing it unmounts it.
	defer unix.Close(mnt)
	folder := -1
	if m.Folder != "" {
		if folder, err = b.resolve(m.Folder); err != nil {
			return fmt.Errorf("staged copy's folder: %w", err)
		}
		defer unix.Close(folder)
	}
	tree, err := stagedTree(mnt, folder, m)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	if err := b.mountOn(tree, m.Target, false, true); err != nil {
		return err
	}
	id, err := mountID(tree)
	if err != nil {
		return err
	}
	b.kept = append(b.kept, keptMount{target: m.Target, readOnly: true, id: id, protected: true, beneath: b.workspaceOf(m.Target)})
	return nil
}

// workspaceOf returns the workspace of a staged copy's target (whose bind names none: its source
// lies outside the workspace). plan.ProtectMounts binds every folder between a protected path
// and its workspace onto itself, parents first, each naming the workspace: the target's folder
// is one of them, or else the workspace itself.
func (b *Root) workspaceOf(target string) string {
	dir := filepath.Dir(filepath.Clean(target))
	for _, k := range b.kept {
		if !k.mask && k.target == dir && k.beneath != "" {
			return k.beneath
		}
	}
	return dir
}

// overlay mounts at Target an overlay of the host folder Source (the lower layer, which the
// overlay never writes) and Upper (opened beneath Beneath, as Work is: a box that could write
// there cannot point them elsewhere with a symlink). The layers are handed to the kernel as the
// descriptors opened here (fsconfig FSCONFIG_SET_FD, Linux 6.13), never as paths looked up
// again. Mounted in the box's user namespace, the overlay keeps its own metadata in user.*
// extended attributes (userxattr), and nothing is indexed (index=off), so that two boxes may
// share the layers. A kernel that takes no layer by descriptor gets what the bwrap engine gets
// (overlayFallback).
func (b *Root) overlay(m spec.Mount) error {
	lower, err := openFlags(m.Source, m.SourceBeneath, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if m.Optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open lower layer %s: %w", m.Source, err)
	}
	defer unix.Close(lower)
	var layers []int
	for _, p := range []string{m.Upper, m.Work} {
		fd, err := openFlags(p, m.Beneath, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return fmt.Errorf("open %s beneath %s: %w", p, m.Beneath, err)
		}
		defer unix.Close(fd)
		layers = append(layers, fd)
	}
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetFd(fs, "lowerdir+", lower); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EBADF) {
			return b.overlayFallback(m)
		}
		return fmt.Errorf("overlay lower layer %s: %w", m.Source, err)
	}
	for i, key := range []string{"upperdir", "workdir"} {
		if err := unix.FsconfigSetFd(fs, key, layers[i]); err != nil {
			return fmt.Errorf("overlay %s: %w", key, err)
		}
	}
	if err := unix.FsconfigSetString(fs, "index", "off"); err != nil {
		return fmt.Errorf("overlay option index: %w", err)
	}
	if err := unix.FsconfigSetFlag(fs, "userxattr"); err != nil {
		return fmt.Errorf("overlay option userxattr: %w", err)
	}
	if m.Volatile {
		if err := unix.FsconfigSetFlag(fs, "volatile"); err != nil {
			return fmt.Errorf("overlay option volatile: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("create overlay of %s and %s: %w", m.Source, m.Upper, err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	defer unix.Close(mnt)
	return b.mountOn(mnt, m.Target, true, true)
}

// overlayFallback binds at an overlay's Target, for a kernel that cannot build it, Upper alone
// (the box cache without the host's folder below it), or with LowerFallback the host's folder,
// Source, read-only.
func (b *Root) overlayFallback(m spec.Mount) error {
	if m.LowerFallback {
		return b.bind(spec.Mount{Kind: spec.KindBind, Source: m.Source, Target: m.Target, ReadOnly: true, Optional: m.Optional})
	}
	return b.bind(spec.Mount{Kind: spec.KindBind, Source: m.Upper, Target: m.Target, Beneath: m.Beneath})
}

// OpenSource opens the source of a bind as an O_PATH descriptor. With beneath set, source is
// resolved beneath that directory with RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS, so that a symlink
// cannot lead the bind out of it.
func OpenSource(source, beneath string) (int, error) { return openFlags(source, beneath, unix.O_PATH) }

// openFlags is OpenSource with the open flags flags (O_CLOEXEC is added).
func openFlags(source, beneath string, flags int) (int, error) {
	m := spec.Mount{Kind: spec.KindBind, Source: source, Beneath: beneath}
	if m.Beneath == "" {
		return unix.Openat2(unix.AT_FDCWD, m.Source, &unix.OpenHow{
			Flags:   uint64(flags) | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_MAGICLINKS,
		})
	}
	rel, err := filepath.Rel(m.Beneath, m.Source)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return -1, fmt.Errorf("%w: %s is not beneath %s", spec.ErrInvalid, m.Source, m.Beneath)
	}
	base, err := unix.Openat2(unix.AT_FDCWD, m.Beneath, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", m.Beneath, err)
	}
	defer unix.Close(base)
	return unix.Openat2(base, rel, &unix.OpenHow{
		Flags:   uint64(flags) | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mask hides Target under an empty read-only directory (a read-only tmpfs) or file. A mask
// outside /proc is kept for the box's life (keepMounts): the host replacing the file (a login
// or token refresh writing by rename) would otherwise remove it.
func (b *Root) mask(m spec.Mount) error {
	fd, err := b.resolve(m.Target)
	if err != nil {
		if m.Optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	id, err := maskOnto(fd, dir, b.stage)
	if err != nil {
		return err
	}
	if t := filepath.Clean(m.Target); t != "/proc" && !strings.HasPrefix(t, "/proc/") {
		b.kept = append(b.kept, keptMount{target: m.Target, mask: true, dir: dir, id: id})
	}
	return nil
}

// newStage makes a detached tmpfs holding an empty file, "empty", that file masks are cloned
// from.
func newStage() (int, error) {
	stage, err := newMount("tmpfs", "mode=0700,size=4k", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("staging tmpfs: %w", err)
	}
	fd, err := unix.Openat(stage, "empty", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		unix.Close(stage)
		return -1, fmt.Errorf("staging file: %w", err)
	}
	unix.Close(fd)
	return stage, nil
}

// maskOnto puts an empty read-only directory (a new tmpfs) or file (a clone of stage's
// "empty"; a stage of its own when stage is -1) over fd and returns the new mount's id.
func maskOnto(fd int, dir bool, stage int) (uint64, error) {
	var tree int
	var err error
	if !dir && stage < 0 {
		if stage, err = newStage(); err != nil {
			return 0, err
		}
		defer unix.Close(stage)
	}
	if dir {
		tree, err = newMount("tmpfs", "mode=0555,size=4k", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		if err != nil {
			return 0, err
		}
	} else {
		tree, err = unix.OpenTree(stage, "empty", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return 0, fmt.Errorf("open_tree empty file: %w", err)
		}
		if err := setAttr(tree, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
			unix.Close(tree)
			return 0, err
		}
	}
	defer unix.Close(tree)
	if err := moveOnto(tree, fd); err != nil {
		return 0, err
	}
	return mountID(tree)
}

func setAttr(tree int, attrs uint64) error {
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attrs}); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	return nil
}

func moveOnto(tree, target int) error {
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mountOn moves the detached mount tree onto target in the new root, creating the mount point
// (a directory when dir, else an empty file) inside box-init's own tmpfs mounts when missing.
func (b *Root) mountOn(tree int, target string, dir, create bool) error {
	fd, err := b.resolve(target)
	if errors.Is(err, unix.ENOENT) && create {
		fd, err = b.create(target, dir)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat mount point: %w", err)
	}
	if isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR; isDir != dir {
		return fmt.Errorf("mount point is a %s, source is a %s", kindName(isDir), kindName(dir))
	}
	return moveOnto(tree, fd)
}

func kindName(dir bool) string {
	if dir {
		return "directory"
	}
	return "file"
}

var resolveInBox = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// resolve opens an in-box path beneath the new root without following any symlink.
func (b *Root) resolve(target string) (int, error) {
	rel := strings.TrimPrefix(filepath.Clean(target), "/")
	fd, err := unix.Openat2(b.root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(resolveInBox)})
	if err != nil {
		return -1, fmt.Errorf("resolve %s: %w", target, err)
	}
	return fd, nil
}

// parent opens target's parent directory, creating missing directories when mkdir is set.
func (b *Root) parent(target string, mkdir bool) (int, string, error) {
	clean := filepath.Clean(target)
	dir, name := filepath.Dir(clean), filepath.Base(clean)
	fd, err := unix.Openat(b.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	for _, c := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat2(fd, c, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(resolveInBox)})
		if errors.Is(err, unix.ENOENT) && mkdir {
			if err = b.mayCreate(fd); err == nil {
				if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
					next, err = unix.Openat2(fd, c, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(resolveInBox)})
				}
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", fmt.Errorf("directory %s of %s: %w", c, target, err)
		}
		fd = next
	}
	return fd, name, nil
}

// create makes a missing mount point and opens it.
func (b *Root) create(target string, dir bool) (int, error) {
	parent, name, err := b.parent(target, true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	if err := b.mayCreate(parent); err != nil {
		return -1, err
	}
	if dir {
		if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("mkdir %s: %w", target, err)
		}
	} else {
		f, err := unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("create %s: %w", target, err)
		}
		if err == nil {
			unix.Close(f)
		}
	}
	fd, err := unix.Openat2(parent, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(resolveInBox)})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", target, err)
	}
	return fd, nil
}

// mayCreate refuses to create anything in a directory that is not on one of box-init's own
// tmpfs mounts: a missing mount point inside a bind would be created on the host.
func (b *Root) mayCreate(dirfd int) error {
	id, err := mountID(dirfd)
	if err != nil {
		return err
	}
	if !b.ours[id] {
		return errors.New("mount point is missing and its directory is not on a box tmpfs (refusing to create it on the host)")
	}
	return nil
}

// Pivot makes the new root the box's root, detaches the host's tree and makes the root (and the
// tmpfs mounts marked read-only) read-only.
func (b *Root) Pivot() error {
	if err := unix.Fchdir(b.root); err != nil {
		return fmt.Errorf("pivot_root: chdir new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach host root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	for _, fd := range append([]int{b.root}, b.readOnlyLater...) {
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make tmpfs read-only: %w", err)
		}
		unix.Close(fd)
	}
	unix.Close(b.stage)
	b.root, b.readOnlyLater, b.stage = -1, nil, -1
	return nil
}
