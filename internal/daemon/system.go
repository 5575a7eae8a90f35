package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/profile/managed"
)

// SystemOptions configure RunSystem. The zero value reads /etc/agentbox/policy.yaml (root
// owned, checked), writes under /etc/claude-code and renders once.
type SystemOptions struct {
	// PolicyFile is the system policy. "" means config.DefaultPolicyFile.
	PolicyFile string
	// PolicyOwner is the uid that must own the policy. Zero means root.
	PolicyOwner int
	// Managed is where Claude Code's managed settings and agentbox's state live. The zero
	// value means /etc/claude-code and /etc/agentbox.
	Managed managed.Options
	// Mode forces the delivery; "" means a drop-in file when the installed Claude Code reads
	// managed-settings.d, else a merge into managed-settings.json.
	Mode managed.Mode
	// Claude is the Claude Code executable whose support for drop-ins decides the mode. ""
	// means claude on PATH.
	Claude string
	// Interval, when positive, renders again at this interval until ctx ends (a service);
	// zero renders once.
	Interval time.Duration
	// Logger receives the log; nil means a text logger on stderr.
	Logger *slog.Logger
	// allowNonRoot lets tests run as an ordinary user.
	allowNonRoot bool
}

// ErrNotRoot means `daemon --system` was run by an ordinary user: only root may write the
// admin-writable files Claude Code trusts.
var ErrNotRoot = errors.New("agentbox daemon --system must run as root")

// RunSystem is `agentbox daemon --system`: it reads the system policy (refusing an invalid
// or unsafely owned one, with the file, line and field, and then leaving every managed file as
// it is) and renders its managed locks into Claude Code's managed settings, once or every
// Interval. A failed render keeps what was delivered before.
func RunSystem(ctx context.Context, o SystemOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if os.Geteuid() != 0 && !o.allowNonRoot {
		return ErrNotRoot
	}
	render := func() error {
		res, err := RenderSystem(o)
		if err != nil {
			return err
		}
		p := managed.Read(o.Managed)
		log.Info("managed settings rendered", "mode", res.Mode, "file", res.File, "changed", res.Changed, "backup", res.Backup,
			"source", p.Source, "allowManagedHooksOnly", p.AllowManagedHooksOnly, "allowManagedMcpServersOnly", p.AllowManagedMcpServersOnly)
		return nil
	}
	err := render()
	if o.Interval <= 0 {
		return err
	}
	if err != nil {
		log.Error("render managed settings; keeping what was delivered before", "err", err)
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := render(); err != nil {
				log.Error("render managed settings; keeping what was delivered before", "err", err)
			}
		}
	}
}

// RenderSystem reads the policy and delivers its Claude Code locks once.
func RenderSystem(o SystemOptions) (*managed.Result, error) {
	policy := o.PolicyFile
	if policy == "" {
		policy = config.DefaultPolicyFile
	}
	// Only the policy: the user layer has no say here. A config that is refused applies
	// nothing, so the managed files stay as they are.
	eff, err := config.Load(config.LoadOptions{PolicyFile: policy, PolicyOwner: o.PolicyOwner, PolicyOnly: true})
	if err != nil {
		return nil, fmt.Errorf("system policy: %w", err)
	}
	mode := o.Mode
	if mode == "" {
		mode = managed.ModeFile
		claude := o.Claude
		if claude == "" {
			claude, _ = exec.LookPath("claude")
		}
		if claude != "" {
			if real, err := filepath.EvalSymlinks(claude); err == nil && managed.SupportsDropIn(real) {
				mode = managed.ModeDropIn
			}
		}
	}
	return managed.Apply(eff.Config.Managed.ClaudeCode, mode, o.Managed)
}

// SystemPosture reads the posture the locks give Claude Code now (for `daemon --system`'s
// report).
func SystemPosture(o managed.Options) *api.Posture { return managed.Read(o) }
