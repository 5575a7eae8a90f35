// Package spec is the box spec: what both Linux engines hand their in-box init and its exec
// stage (internal/engine/execstage), rendered from a launch plan (Build), pinned by golden
// files and checked when it is read back (Parse). Paths in it are in-box paths, except bind
// sources, which are host paths.
package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// Version is the version of the box spec this agentbox renders and accepts. A box-init of
// another version refuses the spec instead of guessing.
const Version = 1

// SeccompProfile is the name of the seccomp profile the exec stage applies to the program.
const SeccompProfile = "agentbox-v1"

// baseNamespaces are every box's namespaces; under egress: deny it also gets "net".
var baseNamespaces = []string{"user", "mnt", "pid", "ipc", "uts", "cgroup"}

// DenyNamespaces are the namespaces of a box under egress: deny, the default.
func DenyNamespaces() []string { return append(slices.Clone(baseNamespaces), "net") }

// Spec is everything a box's init and its exec stage need, in-box paths only (except bind
// sources, which are host paths): the native engine's request, and part of the bwrap engine's.
// It is rendered by Build and Render and pinned by golden files.
type Spec struct {
	Version  int      `json:"version"`
	ID       string   `json:"id"`
	Program  string   `json:"program"`
	Args     []string `json:"args"`
	Cwd      string   `json:"cwd"`
	Env      []string `json:"env"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	Hostname string   `json:"hostname"`
	// Console is "tty" or "pipe".
	Console plan.Console `json:"console"`
	// Namespaces lists the namespaces the box gets (always user, mnt, pid, ipc, uts, cgroup; net
	// unless egress is allowed).
	Namespaces []string `json:"namespaces"`
	// Mounts are applied in order on a fresh read-only tmpfs root.
	Mounts   []Mount  `json:"mounts"`
	Landlock Landlock `json:"landlock"`
	// Seccomp names the seccomp profile (SeccompProfile); the exec stage refuses unknown names.
	Seccomp string  `json:"seccomp"`
	Network Network `json:"network"`
	// MaxProcs is the program's RLIMIT_NPROC (plan.Plan.MaxProcs); box-exec sets it before the
	// exec.
	MaxProcs int `json:"maxProcs"`
	// Guards are the workspace's absent protected paths: box-init moves what appears at one
	// into ChangesDir (a host path, opened before the root is built) for the box's life.
	Guards     []plan.Guard `json:"guards,omitempty"`
	ChangesDir string       `json:"changesDir,omitempty"`
}

// Mount kinds of the spec.
const (
	KindBind     = "bind"     // bind Source at Target (recursive)
	KindTmpfs    = "tmpfs"    // a new tmpfs with Options
	KindProc     = "proc"     // a new procfs of the box's pid namespace
	KindDevpts   = "devpts"   // a new devpts instance with Options
	KindMask     = "mask"     // an empty read-only file or directory over Target
	KindReadOnly = "readonly" // Target (already in the box) bound over itself read-only
	KindSymlink  = "symlink"  // a symlink at Target pointing at Source
	KindOverlay  = "overlay"  // an overlay at Target: Source read-only below, Upper written (Work its work folder)
)

// Mount is one step of building the box's filesystem.
type Mount struct {
	Kind   string `json:"kind"`
	Source string `json:"source,omitempty"`
	Target string `json:"target"`
	// ReadOnly makes a bind read-only recursively, and a tmpfs read-only once the box is built.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Optional skips the step when Source (or, for mask and readonly, Target) does not exist.
	Optional bool `json:"optional,omitempty"`
	// Beneath is a host directory Source must resolve beneath (no symlink may lead out of it).
	Beneath string `json:"beneath,omitempty"`
	// Options are the filesystem options of a tmpfs or devpts ("mode=0755").
	Options string `json:"options,omitempty"`
	// Device keeps device nodes usable on a bind (otherwise every bind is nodev).
	Device bool `json:"device,omitempty"`
	// Staged marks a bind of a protected file's staged copy (plan.Mount.Staged): box-init puts
	// a copy of Source alone on a tmpfs of its own, binds it (or, with Folder, a symlink to it)
	// at Target, keeps that bind, and binds the host's file read-only should the host replace
	// the file at Target.
	Staged bool `json:"staged,omitempty"`
	// Folder, for a staged file in a git directory (InGitDir), is the in-box folder of its copy
	// (beneath StagedDir), a mount point the spec makes (a read-only tmpfs step just before the
	// bind), which box-init covers with the copy's tmpfs, and binds at Target a symlink to
	// Folder/copy instead of the copy itself. The program may create and rename files there
	// (Landlock), so that git's lock-and-rename beside the copy succeeds. Empty: the copy
	// itself is bound over Target.
	Folder string `json:"folder,omitempty"`
	// Upper and Work are an overlay's writable layer and work folder, both beneath Beneath.
	Upper string `json:"upper,omitempty"`
	Work  string `json:"work,omitempty"`
	// LowerFallback makes an engine that cannot build the overlay bind Source read-only at
	// Target instead of Upper (plan.Mount.LowerFallback).
	LowerFallback bool `json:"lowerFallback,omitempty"`
	// SourceBeneath is a host directory an overlay's Source must resolve beneath
	// (plan.Mount.SourceBeneath).
	SourceBeneath string `json:"sourceBeneath,omitempty"`
	// Volatile mounts the overlay volatile: its upper layer is never synced
	// (plan.Mount.Volatile).
	Volatile bool `json:"volatile,omitempty"`
}

// Landlock is the program's filesystem policy; paths are in-box paths.
type Landlock struct {
	MinABI int      `json:"minABI"`
	RO     []string `json:"ro,omitempty"`
	RW     []string `json:"rw,omitempty"`
	Dev    []string `json:"dev,omitempty"`
	ROFile []string `json:"roFile,omitempty"`
	RWFile []string `json:"rwFile,omitempty"`
}

// Network is the box's network.
type Network struct {
	Egress plan.Egress `json:"egress"`
	// Loopback says box-init brings lo up (own network namespace only).
	Loopback bool           `json:"loopback"`
	Forwards []plan.Forward `json:"forwards,omitempty"`
}

// ErrInvalid is returned for a spec that cannot be built (wrapped by engine.ErrBoxSetup at an
// engine's Start).
var ErrInvalid = errors.New("invalid box spec")

// procMasked are hidden under an empty read-only file or directory (runc's list).
var procMasked = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats",
}

// procReadOnly are bound read-only over themselves, so that even a box run by root cannot write
// host sysctls such as kernel.core_pattern.
var procReadOnly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// StagedDir is the in-box folder holding the folders of the staged copies of protected files in
// git directories (Mount.Folder): the n-th such copy is StagedDir/n/copy, and the protected path
// is a symlink to it.
const StagedDir = "/run/agentbox-staged"

// InGitDir reports whether the in-box path p lies in a git directory (a folder named .git on
// its way: .git/config, .git/modules/SUB/config), whose files git never tracks. A staged file
// there is given to the box as a symlink to its copy (Mount.Folder), so that git's
// lock-and-rename of its config works; a staged file of the work tree is not: git, which
// compares the work tree by lstat, would see a symlink where it tracks a file (git status
// "typechange", git stash and reset --hard failing to unlink it, git add -A committing the link).
func InGitDir(p string) bool {
	return strings.Contains(filepath.Dir(filepath.Clean(p))+"/", "/.git/")
}

// devNodes are the host device nodes bound into the box's /dev.
var devNodes = []string{"/dev/full", "/dev/null", "/dev/random", "/dev/tty", "/dev/urandom", "/dev/zero"}

// Build turns a plan into the box spec.
func Build(p *plan.Plan) (*Spec, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: nil plan", ErrInvalid)
	}
	for _, path := range []string{p.Program, p.Cwd} {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("%w: %q is not an absolute path", ErrInvalid, path)
		}
	}
	if p.Console != plan.ConsoleTTY && p.Console != plan.ConsolePipe {
		return nil, fmt.Errorf("%w: console %q", ErrInvalid, p.Console)
	}
	ns := slices.Clone(baseNamespaces)
	net := Network{Egress: p.Network.Egress, Forwards: append([]plan.Forward(nil), p.Network.Forwards...)}
	switch p.Network.Egress {
	case plan.EgressDeny:
		ns = append(ns, "net") // DenyNamespaces
		net.Loopback = true
	case plan.EgressAllow:
		// The box shares the host network: fixed in-box ports would be host ports, shared with
		// every other box and user, so forwards need the box's own network namespace.
		if len(p.Network.Forwards) > 0 {
			return nil, fmt.Errorf("%w: loopback forwards need egress %q", ErrInvalid, plan.EgressDeny)
		}
	default:
		return nil, fmt.Errorf("%w: egress %q", ErrInvalid, p.Network.Egress)
	}
	for _, f := range p.Network.Forwards {
		if f.Port <= 0 || f.Port > 65535 || !filepath.IsAbs(f.Socket) {
			return nil, fmt.Errorf("%w: forward %d → %q", ErrInvalid, f.Port, f.Socket)
		}
	}

	var mounts []Mount
	// The engine's own basics first: /proc and /dev, then what the plan asks for.
	mounts = append(mounts, Mount{Kind: KindProc, Target: "/proc"})
	for _, m := range procMasked {
		mounts = append(mounts, Mount{Kind: KindMask, Target: m, Optional: true})
	}
	for _, m := range procReadOnly {
		mounts = append(mounts, Mount{Kind: KindReadOnly, Target: m, Optional: true})
	}
	mounts = append(mounts, Mount{Kind: KindTmpfs, Target: "/dev", Options: "mode=0755,size=64k", ReadOnly: true})
	for _, d := range devNodes {
		mounts = append(mounts, Mount{Kind: KindBind, Source: d, Target: d, Device: true})
	}
	mounts = append(mounts,
		Mount{Kind: KindDevpts, Target: "/dev/pts", Options: "newinstance,ptmxmode=0666,mode=0620"},
		Mount{Kind: KindSymlink, Source: "pts/ptmx", Target: "/dev/ptmx"},
		Mount{Kind: KindSymlink, Source: "/proc/self/fd", Target: "/dev/fd"},
		Mount{Kind: KindSymlink, Source: "/proc/self/fd/0", Target: "/dev/stdin"},
		Mount{Kind: KindSymlink, Source: "/proc/self/fd/1", Target: "/dev/stdout"},
		Mount{Kind: KindSymlink, Source: "/proc/self/fd/2", Target: "/dev/stderr"},
		Mount{Kind: KindTmpfs, Target: "/dev/shm", Options: "mode=1777," + sizeOption(p.ShmMiB) + "," + inodeOption(p.ShmMiB)},
	)
	if p.ShmMiB <= 0 {
		return nil, fmt.Errorf("%w: /dev/shm has no size", ErrInvalid)
	}
	if p.MaxProcs <= 0 {
		return nil, fmt.Errorf("%w: no process limit", ErrInvalid)
	}
	staged := 0
	for _, m := range parentsFirst(p.Mounts) {
		switch m.Kind {
		case plan.MountBind:
			folder := ""
			if m.Staged && InGitDir(m.Target) {
				// The copy's folder: a mount point of the box's own (an empty read-only tmpfs
				// in both engines), covered by the copy's tmpfs.
				folder = StagedDir + "/" + strconv.Itoa(staged)
				staged++
				mounts = append(mounts, Mount{Kind: KindTmpfs, Target: folder, Options: "mode=0755,size=1m", ReadOnly: true})
			}
			mounts = append(mounts, Mount{Kind: KindBind, Source: m.Source, Target: m.Target,
				ReadOnly: m.ReadOnly, Optional: m.Optional, Beneath: m.Beneath, Staged: m.Staged, Folder: folder})
		case plan.MountTmpfs:
			mode := "0755"
			if m.Target == "/tmp" {
				mode = "1777"
			}
			if m.SizeMiB <= 0 {
				return nil, fmt.Errorf("%w: tmpfs at %s has no size", ErrInvalid, m.Target)
			}
			mounts = append(mounts, Mount{Kind: KindTmpfs, Target: m.Target, Options: "mode=" + mode + "," + sizeOption(m.SizeMiB) + "," + inodeOption(m.SizeMiB), ReadOnly: m.ReadOnly})
		case plan.MountMask:
			if i := masked(mounts, m.Target); i >= 0 {
				mounts[i].Optional = mounts[i].Optional && m.Optional
				continue
			}
			mounts = append(mounts, Mount{Kind: KindMask, Target: m.Target, Optional: m.Optional})
		case plan.MountSymlink:
			if m.Source == "" || strings.ContainsRune(m.Source, 0) || m.ReadOnly || m.Optional {
				return nil, fmt.Errorf("%w: symlink at %s: %q is not a link's content (nor read-only or optional)", ErrInvalid, m.Target, m.Source)
			}
			if !onTmpfs(p.Mounts, m.Target) {
				return nil, fmt.Errorf("%w: symlink at %s: its folder is not one of the box's own tmpfs mounts (a link there would be made in a host folder)", ErrInvalid, m.Target)
			}
			mounts = append(mounts, Mount{Kind: KindSymlink, Source: m.Source, Target: m.Target})
		case plan.MountOverlay:
			for _, p := range []string{m.Source, m.Upper, m.Work, m.Beneath} {
				if !filepath.IsAbs(p) || filepath.Clean(p) != p {
					return nil, fmt.Errorf("%w: overlay at %s: %q is not a clean absolute path", ErrInvalid, m.Target, p)
				}
			}
			if m.SourceBeneath != "" && (filepath.Clean(m.SourceBeneath) != m.SourceBeneath || !beneath(m.Source, m.SourceBeneath)) {
				return nil, fmt.Errorf("%w: overlay at %s: its lower layer %s must lie beneath %s", ErrInvalid, m.Target, m.Source, m.SourceBeneath)
			}
			if !beneath(m.Upper, m.Beneath) || !beneath(m.Work, m.Beneath) {
				return nil, fmt.Errorf("%w: overlay at %s: its layers %s and %s must lie beneath %s", ErrInvalid, m.Target, m.Upper, m.Work, m.Beneath)
			}
			mounts = append(mounts, Mount{Kind: KindOverlay, Source: m.Source, Upper: m.Upper, Work: m.Work,
				Target: m.Target, Optional: m.Optional, Beneath: m.Beneath, LowerFallback: m.LowerFallback, SourceBeneath: m.SourceBeneath, Volatile: m.Volatile})
		default:
			return nil, fmt.Errorf("%w: mount kind %q at %s", ErrInvalid, m.Kind, m.Target)
		}
	}
	for _, m := range mounts {
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) != m.Target || m.Target == "/" {
			return nil, fmt.Errorf("%w: mount target %q", ErrInvalid, m.Target)
		}
		if m.Kind == KindBind && !filepath.IsAbs(m.Source) {
			return nil, fmt.Errorf("%w: bind source %q", ErrInvalid, m.Source)
		}
	}

	ll := p.Landlock
	if ll.MinABI < 1 {
		return nil, fmt.Errorf("%w: landlock minimum ABI %d", ErrInvalid, ll.MinABI)
	}
	rw := append(clone(ll.RW), "/dev/shm") // the engine's /dev/shm is writable like /tmp
	if staged > 0 {
		rw = append(rw, StagedDir)
	}
	return &Spec{
		Version:    Version,
		ID:         p.ID,
		Program:    p.Program,
		Args:       nonNil(p.Args),
		Cwd:        p.Cwd,
		Env:        nonNil(p.Env),
		UID:        p.UID,
		GID:        p.GID,
		Hostname:   p.Hostname,
		Console:    p.Console,
		Namespaces: ns,
		Mounts:     mounts,
		Landlock: Landlock{
			MinABI: ll.MinABI,
			RO:     clone(ll.RO),
			RW:     rw,
			Dev:    clone(ll.Dev),
			ROFile: clone(ll.ROFile),
			RWFile: clone(ll.RWFile),
		},
		Seccomp:    SeccompProfile,
		Network:    net,
		MaxProcs:   p.MaxProcs,
		Guards:     append([]plan.Guard(nil), p.Guards...),
		ChangesDir: p.ChangesDir,
	}, nil
}

// Render returns the spec's canonical bytes: indented JSON with a trailing newline.
func (s *Spec) Render() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Parse decodes and checks a spec rendered by Render.
func Parse(b []byte) (*Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.Version != Version {
		return nil, fmt.Errorf("%w: version %d, this agentbox builds version %d", ErrInvalid, s.Version, Version)
	}
	if s.Console != plan.ConsoleTTY && s.Console != plan.ConsolePipe {
		return nil, fmt.Errorf("%w: console %q", ErrInvalid, s.Console)
	}
	if !filepath.IsAbs(s.Program) || !filepath.IsAbs(s.Cwd) {
		return nil, fmt.Errorf("%w: program and cwd must be absolute", ErrInvalid)
	}
	if len(s.Guards) > 0 && !filepath.IsAbs(s.ChangesDir) {
		return nil, fmt.Errorf("%w: guarded paths without an absolute changes directory", ErrInvalid)
	}
	return &s, nil
}

// hostSystem are the host paths whose binds are the system's, not a box's own: the system
// folders every box sees read-only (plan.DefaultSystemDirs), the kernel's, and the device
// nodes. Not the whole of /dev: /dev/shm is a tmpfs where a user's runtime folder, and so a
// launch's run directory and workspace, can lie (a root user's XDG_RUNTIME_DIR there), and a
// root-run box reaches those only through their idmapped cover (OwnedPaths).
var hostSystem = append(append([]string{"/proc", "/sys"}, devNodes...), plan.DefaultSystemDirs...)

// OwnedPaths returns the host paths a box uses as its own: the sources of its binds and its
// overlays' layers, the folders they must lie beneath and the changes directory, outside the
// system folders (hostSystem). A box that runs as another host uid than its caller's (one
// started by host root, idmap.StartCovered) gets each of them idmapped, so that what its caller
// owns there is the box's, as an ordinary user's box owns the user's files.
func (s *Spec) OwnedPaths() []string {
	var out []string
	add := func(paths ...string) {
		for _, p := range paths {
			if p != "" && !IsSystem(p) {
				out = append(out, p)
			}
		}
	}
	for _, m := range s.Mounts {
		switch m.Kind {
		case KindBind:
			add(m.Source, m.Beneath)
		case KindOverlay:
			add(m.Source, m.SourceBeneath, m.Upper, m.Work, m.Beneath)
		}
	}
	add(s.ChangesDir)
	return out
}

// IsSystem reports whether the host path p lies in a system folder (hostSystem).
func IsSystem(p string) bool {
	for _, sys := range hostSystem {
		if p == sys || beneath(p, sys) {
			return true
		}
	}
	return false
}

// HasNamespace reports whether the spec asks for the named namespace.
func (s *Spec) HasNamespace(name string) bool {
	for _, n := range s.Namespaces {
		if n == name {
			return true
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string{}, s...)
}

func clone(s []string) []string { return append([]string(nil), s...) }

// parentsFirst returns mounts in plan order, except that a mount whose target lies beneath a
// later mount's target moves right after that mount: a mount over an ancestor would otherwise
// hide it (the program bound at ~/.local/bin/x before the empty tmpfs over ~).
func parentsFirst(in []plan.Mount) []plan.Mount {
	out := append([]plan.Mount(nil), in...)
	for moved := true; moved; {
		moved = false
		for i := range out {
			last := -1
			for j := i + 1; j < len(out); j++ {
				if beneath(out[i].Target, out[j].Target) {
					last = j
				}
			}
			if last >= 0 {
				m := out[i]
				copy(out[i:last], out[i+1:last+1])
				out[last] = m
				moved = true
				break
			}
		}
	}
	return out
}

// masked returns the index of the mask of target that masking target again would stack a
// second mask on (the last of mounts at target or at a folder above it), or -1. A root-run
// box's root-only paths under /etc include the fixed masks (/etc/shadow, …), and a box keeps
// each mask in place by checking that its own mount is the one at its path: of two stacked
// masks the lower one is never there, and box-init masked it again at every change of the
// mount table, each mask again a change, without end (thousands of mounts within seconds).
func masked(mounts []Mount, target string) int {
	for i := len(mounts) - 1; i >= 0; i-- {
		if t := mounts[i].Target; t == target || beneath(target, t) {
			if t == target && mounts[i].Kind == KindMask {
				return i
			}
			return -1
		}
	}
	return -1
}

// beneath reports whether path is strictly beneath dir.
// onTmpfs reports whether the folder of target is on a tmpfs mount of mounts: the nearest of
// them above target is a tmpfs, and none is at target itself. The native engine checks it
// again where it makes the link; bwrap makes a link wherever it is told, a host folder bound
// in too.
func onTmpfs(mounts []plan.Mount, target string) bool {
	var near *plan.Mount
	for i := range mounts {
		m := &mounts[i]
		if m.Kind == plan.MountSymlink {
			continue
		}
		if m.Target == target {
			return false
		}
		if beneath(target, m.Target) && (near == nil || len(m.Target) > len(near.Target)) {
			near = m
		}
	}
	return near != nil && near.Kind == plan.MountTmpfs
}

func beneath(path, dir string) bool {
	return dir == "/" && path != "/" || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// sizeOption is the tmpfs mount option for a size of mib MiB.
func sizeOption(mib int) string { return "size=" + strconv.Itoa(mib) + "m" }

// inodeOption is the tmpfs mount option bounding its inodes to one per 4 KiB page of a size of
// mib MiB (262,144 per GiB). A size bounds the pages a tmpfs holds, not its inodes, whose
// default is half of the host's RAM in pages whatever the size: 300,000 empty files in a box's
// /tmp took 302 MiB of the host's kernel memory and none of the size (issue 21, finding 11).
// Each inode costs about 1 KiB, so a mount holds at most a quarter of its size again in them.
// The native engine passes it to mount(2); bwrap (0.8) has no option for it and drops it.
func inodeOption(mib int) string { return "nr_inodes=" + strconv.Itoa(mib*256) }
