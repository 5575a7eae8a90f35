// Package bwrap is the bubblewrap engine, for hosts where only bwrap may create namespaces: it
// renders a plan as a bwrap argv and runs agentbox's own exec stage (no capabilities,
// no_new_privs, Landlock, seccomp, applied to a thread that forks and execs the program) inside, so that its boxes carry the same
// guarantees as the native engine's.
//
// Process tree of one box:
//
//	shim ─ agentbox bwrap-monitor ─ bwrap ─ agentbox bwrap-init (PID 1 of the box) ─ program
//
// The monitor is the box's top process (engine.Box.Process): it stays in the host's
// namespaces, relays the shim's signals to bwrap-init and exits with the program's status;
// engine.Box.InitPid names bwrap-init, whose namespaces are the box's. bwrap builds the
// filesystem and namespaces (masks of paths that may be absent are rendered as MaskOption and
// resolved by the monitor against the host, whose kernel and /etc the box shares); bwrap-init
// reports on the control channel and starts the program through the shared exec stage
// (internal/engine/execstage) exactly as the native engine's box-init does. When the plan has
// protected paths to keep, bwrap-init first re-executes itself in a mount namespace of its own,
// where it keeps them as box-init does (mount.Adopt, mount.Protect). Binaries that
// embed this engine must dispatch argv[1]
// "bwrap-monitor" and "bwrap-init" (MonitorMain and InitMain; see internal/boxmain).
package bwrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/plan"
)

// Name is the engine's config name.
const Name = "bwrap"

// RequestVersion is the version of the request this engine renders and accepts.
const RequestVersion = 1

// Program is the executable the engine runs, looked up on PATH when a box starts.
const Program = "bwrap"

// ErrMissing means bwrap is not installed (not on PATH). It wraps engine.ErrNotSupported, so
// the shim reports it with the engine_not_supported code.
var ErrMissing = fmt.Errorf("%w: bwrap is not installed (not found on PATH)", engine.ErrNotSupported)

// Descriptors of bwrap and, through it, of bwrap-init.
const (
	fdControl = 3 // the control socket (engine.IO.Control)
	fdSpec    = 4 // memfd with the box spec the exec stage applies
	fdStderr  = 5 // the program's stderr (bwrap's own fd 2 is captured by the monitor)
	fdExe     = 6 // the agentbox executable, exec'd as /proc/self/fd/6
	fdStatus  = 7 // bwrap --json-status-fd
	fdReady   = 8 // bwrap-init writes one byte here once it reports on the control socket itself
)

// Request is the engine's request: bwrap's argv and the spec the exec stage applies inside.
type Request struct {
	Version int `json:"version"`
	// Args are bwrap's arguments (argv[1:]), ending with the command bwrap runs: bwrap-init.
	Args []string `json:"args"`
	// Spec is the box spec for the same plan (the native engine's request): bwrap-init applies
	// its mask and read-only steps, the exec stage its program, environment, Landlock and
	// seccomp.
	Spec *spec.Spec `json:"spec"`
}

// Engine is the bubblewrap engine. Its zero value is ready to use.
type Engine struct{}

var _ engine.Engine = (*Engine)(nil)

func init() {
	engine.Register(Name, func() engine.Engine { return &Engine{} })
}

// Name returns "bwrap".
func (*Engine) Name() string { return Name }

// Request renders p as the bwrap argv and box spec (JSON).
func (*Engine) Request(p *plan.Plan) ([]byte, error) {
	// The spec as the native engine renders it, read back as box-init would read it.
	built, err := spec.Build(p)
	if err != nil {
		return nil, fmt.Errorf("bwrap request: %w", err)
	}
	raw, err := built.Render()
	if err != nil {
		return nil, fmt.Errorf("bwrap request: %w", err)
	}
	s, err := spec.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bwrap request: %w", err)
	}
	args, err := renderArgs(s)
	if err != nil {
		return nil, fmt.Errorf("bwrap request: %w", err)
	}
	b, err := json.MarshalIndent(Request{Version: RequestVersion, Args: args, Spec: s}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseRequest decodes and checks a request rendered by Request.
func ParseRequest(b []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: bwrap request: %v", spec.ErrInvalid, err)
	}
	if r.Version != RequestVersion {
		return nil, fmt.Errorf("%w: bwrap request version %d, this agentbox builds version %d", spec.ErrInvalid, r.Version, RequestVersion)
	}
	if len(r.Args) == 0 || r.Spec == nil {
		return nil, fmt.Errorf("%w: bwrap request without args or spec", spec.ErrInvalid)
	}
	raw, err := json.Marshal(r.Spec)
	if err != nil {
		return nil, err
	}
	if r.Spec, err = spec.Parse(raw); err != nil {
		return nil, err
	}
	return &r, nil
}

// BeneathOption precedes a bind whose source must resolve beneath a directory: `--agentbox-
// beneath DIR --ro-bind SRC DEST`. The monitor opens SRC beneath DIR as box-init does
// (RESOLVE_BENEATH, no magic links) and passes the descriptor, so bwrap binds what was opened
// (`/proc/self/fd/N`), never a path a symlink swapped meanwhile; a missing source of a -try
// bind drops the bind.
const BeneathOption = "--agentbox-beneath"

// MaskOption is an option of a request's argv that is not bwrap's: `--agentbox-mask PATH`
// hides PATH, which may be absent (bwrap has no option that skips a missing target). The
// monitor replaces it when the box starts: nothing when PATH is absent on the host, an empty
// read-only tmpfs over a directory, a read-only, nodev bind of /dev/null over a file.
const MaskOption = "--agentbox-mask"

// renderArgs translates the spec's namespaces and mounts into bwrap options.
func renderArgs(s *spec.Spec) ([]string, error) {
	has := map[string]bool{}
	for _, n := range s.Namespaces {
		has[n] = true
	}
	for _, n := range []string{"user", "mnt", "pid", "ipc", "uts", "cgroup"} {
		if !has[n] {
			return nil, fmt.Errorf("%w: the bwrap engine always creates a %s namespace", spec.ErrInvalid, n)
		}
	}
	a := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"}
	if has["net"] {
		a = append(a, "--unshare-net") // bwrap brings lo up
	}
	a = append(a,
		"--uid", strconv.Itoa(s.UID), "--gid", strconv.Itoa(s.GID),
		"--hostname", s.Hostname,
		// bwrap-init is PID 1 and reaps; bwrap kills the box when the monitor dies.
		"--as-pid-1", "--die-with-parent",
		"--clearenv", "--chdir", "/",
		// the exec stage needs SETPCAP (in the box's user namespace) to empty the bounding set and
		// lock the securebits, and SYS_RESOURCE to write the namespace's inotify count, and
		// bwrap-init SYS_ADMIN to set hidepid on the box's /proc; the exec stage drops them with
		// every other capability.
		"--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SYS_RESOURCE",
		"--json-status-fd", strconv.Itoa(fdStatus),
	)
	if s.Hostname == "" {
		return nil, fmt.Errorf("%w: empty hostname", spec.ErrInvalid)
	}
	var readOnly []string // remounted read-only once everything is mounted
	dev := false
	procRO := false
	for _, m := range s.Mounts {
		if m.Beneath != "" && !(m.Kind == spec.KindOverlay && m.LowerFallback) {
			if m.Kind != spec.KindBind && m.Kind != spec.KindOverlay {
				return nil, fmt.Errorf("%w: %s step with beneath at %s", spec.ErrInvalid, m.Kind, m.Target)
			}
			a = append(a, BeneathOption, m.Beneath)
		}
		// bwrap's --dev builds the whole of /dev (the same nodes, a new devpts, the ptmx and fd
		// links) except /dev/shm, which is a tmpfs of the spec's, and what lies beneath it (a
		// workspace or run directory in a runtime folder under /dev/shm).
		if dev && strings.HasPrefix(m.Target, "/dev/") && m.Target != "/dev/shm" && !strings.HasPrefix(m.Target, "/dev/shm/") {
			continue
		}
		switch m.Kind {
		case spec.KindProc:
			a = append(a, "--proc", m.Target)
		case spec.KindTmpfs:
			if m.Target == "/dev" {
				a = append(a, "--dev", "/dev")
				dev = true
				readOnly = append(readOnly, "/dev")
				continue
			}
			if mode, ok := tmpfsOption(m.Options, "mode"); ok {
				a = append(a, "--perms", mode)
			}
			if size, ok := tmpfsOption(m.Options, "size"); ok {
				mib, err := strconv.Atoi(strings.TrimSuffix(size, "m"))
				if err != nil || !strings.HasSuffix(size, "m") || mib <= 0 {
					return nil, fmt.Errorf("%w: tmpfs size %q at %s", spec.ErrInvalid, size, m.Target)
				}
				a = append(a, "--size", strconv.FormatInt(int64(mib)<<20, 10))
			}
			a = append(a, "--tmpfs", m.Target)
			if m.ReadOnly {
				readOnly = append(readOnly, m.Target)
			}
		case spec.KindBind:
			op := "--bind"
			switch {
			case m.Device:
				op = "--dev-bind"
			case m.ReadOnly:
				op = "--ro-bind"
			}
			if m.Optional {
				op += "-try"
			}
			a = append(a, op, m.Source, m.Target)
		case spec.KindOverlay:
			// bwrap 0.8 builds no overlay: the box gets the writable layer alone (its own box
			// cache), without the host's folder below it, or with LowerFallback the host's folder
			// read-only (docs/toolchains.md).
			switch {
			case m.LowerFallback && m.Optional:
				a = append(a, "--ro-bind-try", m.Source, m.Target)
			case m.LowerFallback:
				a = append(a, "--ro-bind", m.Source, m.Target)
			default:
				a = append(a, "--bind", m.Upper, m.Target)
			}
		case spec.KindMask:
			if !m.Optional {
				return nil, fmt.Errorf("%w: the bwrap engine masks only optional paths (%s)", spec.ErrInvalid, m.Target)
			}
			a = append(a, MaskOption, m.Target)
		case spec.KindReadOnly:
			// The box's whole /proc is made read-only (Landlock grants the program nothing
			// more there anyway): bwrap cannot bind a path of the new root over itself.
			if m.Target != "/proc" && !strings.HasPrefix(m.Target, "/proc/") {
				return nil, fmt.Errorf("%w: the bwrap engine makes only /proc paths read-only (%s)", spec.ErrInvalid, m.Target)
			}
			if !procRO {
				procRO = true
				readOnly = append(readOnly, "/proc")
			}
		case spec.KindSymlink:
			a = append(a, "--symlink", m.Source, m.Target)
		case spec.KindDevpts:
			return nil, fmt.Errorf("%w: devpts outside /dev", spec.ErrInvalid)
		default:
			return nil, fmt.Errorf("%w: mount kind %q at %s", spec.ErrInvalid, m.Kind, m.Target)
		}
	}
	for _, t := range readOnly {
		a = append(a, "--remount-ro", t)
	}
	a = append(a, "--remount-ro", "/")
	a = append(a, "--", "/proc/self/fd/"+strconv.Itoa(fdExe), "bwrap-init")
	return a, nil
}

// tmpfsOption returns the value of key in a tmpfs option list (mode=1777,size=64m).
func tmpfsOption(options, key string) (string, bool) {
	for _, o := range strings.Split(options, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// errNoChild is reported by the monitor when bwrap ended before creating the box.
var errNoChild = errors.New("bwrap ended before creating the box")

// ExpandArgs replaces the options of a request's argv that are not bwrap's (MaskOption,
// BeneathOption) with bwrap options. stat looks a masked path up on the host (which the box
// shares for /proc and the bound system directories); open opens a bind source beneath a
// directory and returns the path bwrap binds it from (/proc/self/fd/N), or an error wrapping
// fs.ErrNotExist when it is absent.
func ExpandArgs(args []string, stat func(string) (isDir, ok bool), open func(source, beneath string) (string, error)) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			return append(out, args[i:]...), nil
		}
		switch args[i] {
		case MaskOption:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%w: %s without a path", spec.ErrInvalid, MaskOption)
			}
			i++
			switch dir, ok := stat(args[i]); {
			case !ok:
			case dir:
				out = append(out, "--perms", "0555", "--tmpfs", args[i], "--remount-ro", args[i])
			default:
				out = append(out, "--ro-bind", "/dev/null", args[i])
			}
		case BeneathOption:
			if i+4 >= len(args) || !strings.HasPrefix(args[i+2], "--") || !strings.Contains(args[i+2], "bind") {
				return nil, fmt.Errorf("%w: %s without a bind", spec.ErrInvalid, BeneathOption)
			}
			beneath, op, src, dst := args[i+1], args[i+2], args[i+3], args[i+4]
			i += 4
			p, err := open(src, beneath)
			if err != nil {
				if strings.HasSuffix(op, "-try") && errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, fmt.Errorf("bind %s beneath %s: %w", src, beneath, err)
			}
			out = append(out, strings.TrimSuffix(op, "-try"), p, dst)
		default:
			out = append(out, args[i])
		}
	}
	return out, nil
}
