package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
	"github.com/agentbox/agentbox/internal/profile/managed"
	"github.com/agentbox/agentbox/internal/relay/llm"
)

// Environment the relay broker sets in a box; profiles map it onto each program's variables.
const (
	envRelayURL = "AGENTBOX_RELAY_URL"
	envPairing  = "AGENTBOX_PAIRING"
)

// managedOptions is where the posture is read from; tests point it at a temporary directory.
var managedOptions managed.Options

// postureProfiles are the profiles whose launches record the managed posture (the programs
// that read Claude Code's managed settings).
var postureProfiles = []string{"claude"}

// gatewayProviders returns the relay providers a launch may be wired to: the ones the LLM
// relay serves. A provider the relay does not serve (a model named google/…, say) is refused
// before anything starts, naming gateway.<provider>.
func gatewayProviders(config.Config) map[string]bool {
	return map[string]bool{llm.Anthropic: true, llm.OpenAI: true, llm.Gemini: true}
}

// resolveProfile is step 1 of the launch pipeline: the program's profile (or the generic one),
// its denied arguments and the preconditions that need nothing started.
func resolveProfile(req *api.LaunchRequest, cfg config.Config, egress plan.Egress) (*profile.Profile, profile.Facts, error) {
	set, err := profile.NewSet(cfg.Programs)
	if err != nil {
		return nil, profile.Facts{}, &api.Error{Code: api.CodeConfigInvalid, Message: "programs: " + err.Error(), Hint: "fix the programs: entry in your config"}
	}
	p := set.Resolve(req.Program)
	if err := p.CheckArgs(req.Args); err != nil {
		return nil, profile.Facts{}, profileError(err)
	}
	f := profile.Facts{Args: req.Args, Egress: egress, Models: cfg.Models, Providers: gatewayProviders(cfg)}
	if err := p.Check(f); err != nil {
		return nil, profile.Facts{}, profileError(err)
	}
	return p, f, nil
}

// profileError maps the profile package's error classes onto API errors.
func profileError(err error) error {
	var ae *profile.ArgumentError
	if errors.As(err, &ae) {
		return &api.Error{Code: api.CodeArgumentDenied, Message: ae.Error(), Hint: "remove " + ae.Rule + " from the arguments"}
	}
	var pe *profile.PreconditionError
	if errors.As(err, &pe) {
		hint := pe.Fix
		if pe.Key != "" && !strings.Contains(hint, pe.Key) {
			hint = "set " + pe.Key + ": " + hint
		}
		return &api.Error{Code: api.CodePreconditionFailed, Message: pe.Error(), Hint: hint}
	}
	return err
}

// wireProfile is the profile's part of step 2: it reads what the relay broker gave the launch
// (its in-box URL and pairing) from the brokers' contributions, renders the profile into the
// launch and merges it into c. It returns the program's full argument list.
func wireProfile(p *profile.Profile, f profile.Facts, home string, tree *profile.InstallTree, c *plan.Contributions) ([]string, error) {
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, envRelayURL+"="); ok {
			f.RelayURL = v
		}
		if v, ok := strings.CutPrefix(kv, envPairing+"="); ok {
			f.Pairing = v
		}
	}
	if p.Relay.Wired() && (f.RelayURL == "" || f.Pairing == "") {
		return nil, profileError(&profile.PreconditionError{Profile: p.ID, What: "relay",
			Msg: p.DisplayName() + " reaches its model only through the LLM relay, and this daemon gave the launch none",
			Fix: "the daemon runs no LLM relay broker; upgrade agentbox"})
	}
	w, err := p.Wire(home, tree, f)
	if err != nil {
		return nil, &api.Error{Code: api.CodeBoxSetupFailed, Message: err.Error()}
	}
	// Home grants first (the box's home is a tmpfs they are bound into), then what the brokers
	// mount (protected paths).
	c.Mounts = append(w.Mounts, c.Mounts...)
	c.ReadOnly = append(c.ReadOnly, w.ReadOnly...)
	c.Env = append(c.Env, w.Env...)
	if len(w.Unset) > 0 {
		c.Env = slices.DeleteFunc(c.Env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return slices.Contains(w.Unset, k)
		})
	}
	return w.Args, nil
}

// unsetEnv removes keys from a KEY=VALUE list.
func unsetEnv(env, keys []string) []string {
	if len(keys) == 0 {
		return env
	}
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keys, k)
	})
}

// preCreate creates the home paths p needs before the box is built, when absent: so the
// program starts, and so that a read-only pin or a mask never sits under a missing parent.
// Nothing is followed out of the home directory (os.Root), and existing paths are left as
// they are.
func preCreate(home string, p *profile.Profile) error {
	pcs := p.PreCreates()
	if len(pcs) == 0 {
		return nil
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	defer root.Close()
	for _, pc := range pcs {
		if _, err := root.Lstat(pc.Rel); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", filepath.Join(home, pc.Rel), err)
		}
		if err := root.MkdirAll(filepath.Dir(pc.Rel), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Join(home, filepath.Dir(pc.Rel)), err)
		}
		if pc.Dir {
			if err := root.Mkdir(pc.Rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create %s: %w", filepath.Join(home, pc.Rel), err)
			}
			continue
		}
		f, err := root.OpenFile(pc.Rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", filepath.Join(home, pc.Rel), err)
		}
		_, err = f.WriteString(pc.Content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", filepath.Join(home, pc.Rel), err)
		}
	}
	return nil
}

// findInstall finds the program's install tree on the host; a failure only means nothing is
// bound beyond the program file.
func (d *Daemon) findInstall(p *profile.Profile, path string, env []string) *profile.InstallTree {
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	t, err := p.FindInstall(path, pathEnv)
	if err != nil {
		d.log.Warn("profile: install tree not found; binding the program file only", "profile", p.ID, "program", path, "err", err)
		return nil
	}
	return t
}

// posture reads Claude Code's managed posture now. A read error is logged and reported as an
// unknown source with the locks off, never as locked.
func (d *Daemon) posture() *api.Posture {
	p := managed.Read(managedOptions)
	if p.Source == api.PostureSourceUnknown {
		d.log.Warn("managed posture unreadable; reporting the locks off", "err", p.Error)
	}
	return p
}

// launchPosture is the posture a launch of profile id records (nil for programs that do not
// read Claude Code's managed settings).
func (d *Daemon) launchPosture(id string) *api.Posture {
	if !slices.Contains(postureProfiles, id) {
		return nil
	}
	return d.posture()
}

// workspaceConfigPins returns the workspace-relative configuration every box pins read-only:
// the union over all profiles in force (the built-in ones and cfg's programs), so that a
// boxed session of one harness cannot plant configuration another will trust; with
// protect.instructions: readonly, their instruction files too. Directories keep their trailing
// slash (".opencode/"), so that an absent one is guarded as a folder (plan.ProtectedDirPaths).
func workspaceConfigPins(cfg config.Config) []string {
	set := profileSet(cfg)
	if set == nil {
		return nil
	}
	out := withSlash(set.WorkspaceConfig(), set.WorkspaceConfigDirs())
	if cfg.Protect.Instructions == config.InstructionsReadOnly {
		out = append(out, withSlash(set.WorkspaceInstructions(), set.WorkspaceInstructionDirs())...)
	}
	return out
}

// workspaceInstructions returns the absolute paths of the workspace's instruction files that
// boxes leave writable (none under protect.instructions: readonly): the integrity watch tracks
// them, and what a launch changed in them is listed at exit.
func workspaceInstructions(cfg config.Config, ws string) []string {
	set := profileSet(cfg)
	if set == nil || cfg.Protect.Instructions == config.InstructionsReadOnly {
		return nil
	}
	var out []string
	for _, rel := range set.WorkspaceInstructions() {
		out = append(out, filepath.Join(ws, rel))
	}
	return out
}

// withSlash returns paths with a trailing slash on those in dirs.
func withSlash(paths, dirs []string) []string {
	out := slices.Clone(paths)
	for i, w := range out {
		if slices.Contains(dirs, w) {
			out[i] = w + "/"
		}
	}
	return out
}

// profileSet is the set of profiles in force under cfg.
func profileSet(cfg config.Config) *profile.Set {
	set, err := profile.NewSet(cfg.Programs)
	if err != nil {
		// The configuration was validated when it was loaded; fall back to the built-ins.
		set, _ = profile.NewSet(nil)
	}
	return set
}

// launchProfile returns profile id under cfg, or nil (no profile, or no home to wire it to).
func launchProfile(cfg config.Config, id, home string) *profile.Profile {
	set := profileSet(cfg)
	if set == nil || home == "" {
		return nil
	}
	return set.Get(id)
}

// homeWatched returns the host paths of profile id's protected home entries (pinned read-only
// by the profile's wiring), for the integrity watch.
func homeWatched(cfg config.Config, id, home string) []string {
	p := launchProfile(cfg, id, home)
	if p == nil {
		return nil
	}
	var out []string
	for _, hp := range p.HomeProtected(home) {
		out = append(out, hp.Path)
	}
	return out
}

// homePlaceholders returns the placeholders that hold the profile's absent ro and deny home
// entries while a box runs (profile.HomePlaceholders).
func homePlaceholders(cfg config.Config, id, home string) []integrity.Placeholder {
	p := launchProfile(cfg, id, home)
	if p == nil {
		return nil
	}
	var out []integrity.Placeholder
	for _, hp := range p.HomePlaceholders(home) {
		out = append(out, integrity.Placeholder{Path: hp.Path, Dir: hp.Dir, Content: hp.Content, Beneath: hp.Beneath, Private: true})
	}
	return out
}

// ruleProfiles returns the set of every profile in force with the configuration cfg, for the
// workspace's rules (their harness homes and home entries): the built-in ones when cfg's
// programs do not make one (resolveProfile then refuses the launch, after the workspace's
// rules).
func ruleProfiles(cfg config.Config) *profile.Set {
	set, err := profile.NewSet(cfg.Programs)
	if err != nil {
		set, _ = profile.NewSet(nil)
	}
	return set
}
