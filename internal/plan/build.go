package plan

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Input is what Build needs; every field is supplied by the caller so that Build stays pure.
type Input struct {
	ID        string // launch id (random, made by the daemon)
	Profile   string // profile id; "" means "generic"
	Program   string // absolute, symlink-resolved host path of the executable
	Args      []string
	Workspace string // absolute, symlink-resolved workspace directory
	Cwd       string // absolute; must be the workspace or beneath it; "" means Workspace
	Home      string // the user's home directory (replaced by an empty tmpfs in the box)
	UID, GID  int
	// Env is the caller's environment as KEY=VALUE; only allowlisted keys are kept.
	Env     []string
	RunDir  string // host launch run directory, bound at /run/agentbox
	Console Console
	Egress  Egress // "" means deny
	// SystemDirs are the host directories bound read-only; nil means DefaultSystemDirs.
	SystemDirs []string
	// Hidden are more host paths beneath SystemDirs masked in the box (files and folders an
	// ordinary user cannot read, when the box runs as root); nil means only the fixed masks.
	Hidden []string
	// Brokers is what the daemon's brokers (relay, git, ssh, …) add to the launch.
	Brokers Contributions
	// Limits are the sizes of the box's tmpfs mounts; a zero field means its default
	// (DefaultLimits).
	Limits Limits
}

// Limits are the sizes of a box's memory-backed file systems in MiB.
type Limits struct {
	TmpMiB  int // /tmp
	HomeMiB int // the home, and every other tmpfs the plan mounts (a profile's private folders)
	ShmMiB  int // /dev/shm
	// Processes is the program's RLIMIT_NPROC (tasks of the box's user namespace).
	Processes int
}

// DefaultLimits are the sizes used where Input.Limits leaves a field zero (config.Limits says
// the same defaults). Without a size a tmpfs may grow to half of the host's RAM.
var DefaultLimits = Limits{TmpMiB: 2048, HomeMiB: 2048, ShmMiB: 64, Processes: 2048}

// Contributions are what brokers add to a launch's plan. The zero value adds nothing.
type Contributions struct {
	// Env is set in the box after the allowlisted caller environment (KEY=VALUE; a broker's
	// value wins over the caller's).
	Env []string
	// Forwards are in-box loopback ports forwarded to unix sockets under RunDir.
	Forwards []Forward
	// Mounts are applied after the base mounts (e.g. protected paths bound read-only).
	Mounts []Mount
	// ReadOnly and ReadWrite extend the Landlock grants with in-box paths.
	ReadOnly, ReadWrite []string
	// Guards are absent protected paths of the workspace (see Guards); ChangesDir is the host
	// directory what the box creates at them is moved to. Guards need ChangesDir; ChangesDir
	// alone serves the protected paths that exist, guarded should the host remove them.
	Guards     []Guard
	ChangesDir string
}

// DefaultSystemDirs are bound read-only into every box when they exist.
var DefaultSystemDirs = []string{"/bin", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/usr"}

// maskedFiles are host files hidden from the box even though their directory is bound
// (a box run by root would otherwise read them).
var maskedFiles = []string{"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers"}

// envAllow lists the environment keys passed from the caller into the box; nothing else leaks.
var envAllow = map[string]bool{
	"TERM": true, "COLORTERM": true, "LANG": true, "LANGUAGE": true, "TZ": true,
	"PATH": true, "NO_COLOR": true, "FORCE_COLOR": true, "COLUMNS": true, "LINES": true,
}

// ErrInvalid is returned for inputs Build refuses.
var ErrInvalid = errors.New("invalid plan input")

// Build returns the plan for one launch. It reads nothing from the system: the same Input
// always gives the same Plan.
func Build(in Input) (*Plan, error) {
	for name, p := range map[string]string{"program": in.Program, "workspace": in.Workspace, "home": in.Home, "run dir": in.RunDir} {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%w: %s %q is not an absolute path", ErrInvalid, name, p)
		}
	}
	if in.ID == "" {
		return nil, fmt.Errorf("%w: empty launch id", ErrInvalid)
	}
	ws := filepath.Clean(in.Workspace)
	cwd := ws
	if in.Cwd != "" {
		cwd = filepath.Clean(in.Cwd)
		if cwd != ws && !strings.HasPrefix(cwd, ws+"/") {
			return nil, fmt.Errorf("%w: cwd %q is outside workspace %q", ErrInvalid, cwd, ws)
		}
	}
	profile := in.Profile
	if profile == "" {
		profile = "generic"
	}
	console := in.Console
	if console == "" {
		console = ConsolePipe
	}
	egress := in.Egress
	if egress == "" {
		egress = EgressDeny
	}
	sys := in.SystemDirs
	if sys == nil {
		sys = DefaultSystemDirs
	}
	home := filepath.Clean(in.Home)

	var mounts []Mount
	var ro []string
	for _, d := range sys {
		mounts = append(mounts, Mount{Kind: MountBind, Source: d, Target: d, ReadOnly: true, Optional: true})
		ro = append(ro, d)
	}
	// A root-run launch's Hidden names /etc/shadow and the other masked files again (only root
	// may read them): spec.Build masks each path once, whatever asked for it.
	for _, f := range append(append([]string(nil), maskedFiles...), in.Hidden...) {
		mounts = append(mounts, Mount{Kind: MountMask, Target: f, Optional: true})
	}
	mounts = append(mounts,
		Mount{Kind: MountTmpfs, Target: home},
		Mount{Kind: MountTmpfs, Target: "/tmp"},
		Mount{Kind: MountBind, Source: ws, Target: ws},
		Mount{Kind: MountBind, Source: in.RunDir, Target: RunDir, ReadOnly: true},
	)
	mounts = append(mounts, in.Brokers.Mounts...)
	ro = append(ro, in.Brokers.ReadOnly...)
	// The program itself, when it lives outside the system directories and the workspace; bound
	// after the tmpfs mounts so that an empty home or /tmp does not hide it.
	if !under(in.Program, sys) && !under(in.Program, []string{ws}) {
		mounts = append(mounts, Mount{Kind: MountBind, Source: in.Program, Target: in.Program, ReadOnly: true})
		ro = append(ro, in.Program)
	}

	env := map[string]string{}
	for _, kv := range in.Env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && envAllow[k] {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
	}
	for _, kv := range in.Brokers.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	env["HOME"] = home
	env["TMPDIR"] = "/tmp"
	env["AGENTBOX"] = "1"
	env["AGENTBOX_LAUNCH_ID"] = in.ID
	if console == ConsolePipe {
		delete(env, "COLUMNS")
		delete(env, "LINES")
	}
	lim := in.Limits
	if lim.TmpMiB <= 0 {
		lim.TmpMiB = DefaultLimits.TmpMiB
	}
	if lim.HomeMiB <= 0 {
		lim.HomeMiB = DefaultLimits.HomeMiB
	}
	if lim.ShmMiB <= 0 {
		lim.ShmMiB = DefaultLimits.ShmMiB
	}
	if lim.Processes <= 0 {
		lim.Processes = DefaultLimits.Processes
	}
	for i := range mounts {
		if mounts[i].Kind == MountTmpfs && mounts[i].SizeMiB <= 0 {
			mounts[i].SizeMiB = lim.HomeMiB
			if mounts[i].Target == "/tmp" {
				mounts[i].SizeMiB = lim.TmpMiB
			}
		}
	}

	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)

	args := append([]string{}, in.Args...)
	p := &Plan{
		ID:        in.ID,
		Profile:   profile,
		Program:   in.Program,
		Args:      args,
		Cwd:       cwd,
		Env:       envList,
		UID:       in.UID,
		GID:       in.GID,
		Home:      home,
		Workspace: ws,
		Hostname:  "agentbox",
		RunDir:    in.RunDir,
		Mounts:    mounts,
		Landlock: Landlock{
			MinABI: 2,
			RO:     append(ro, RunDir, "/proc"),
			RW:     append([]string{home, "/tmp", ws}, in.Brokers.ReadWrite...),
			Dev:    []string{"/dev/pts", "/dev/tty", "/dev/ptmx"},
			RWFile: []string{"/dev/null", "/dev/zero", "/dev/full"},
			ROFile: []string{"/dev/random", "/dev/urandom"},
		},
		Network:  Network{Egress: egress, Forwards: append([]Forward(nil), in.Brokers.Forwards...)},
		Console:  console,
		ShmMiB:   lim.ShmMiB,
		MaxProcs: lim.Processes,
	}
	if len(in.Brokers.Guards) > 0 || in.Brokers.ChangesDir != "" {
		if !filepath.IsAbs(in.Brokers.ChangesDir) {
			return nil, fmt.Errorf("%w: guarded paths need an absolute changes directory, got %q", ErrInvalid, in.Brokers.ChangesDir)
		}
		for _, g := range in.Brokers.Guards {
			if !Within(g.Path, ws) || g.Beneath != ws {
				return nil, fmt.Errorf("%w: guarded path %q is not beneath the workspace %s", ErrInvalid, g.Path, ws)
			}
		}
		p.Guards = append([]Guard(nil), in.Brokers.Guards...)
		p.ChangesDir = in.Brokers.ChangesDir
	}
	return p, nil
}

func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}
