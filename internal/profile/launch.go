package profile

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// CheckArgs refuses the first argument that one of p's denied-args rules matches, with an
// *ArgumentError. A flag rule matches "--port" and "--port=80"; a command rule matches the
// first argument that is not a flag (after "--" nothing is a flag); a prefix rule matches any
// argument that starts with it.
func (p *Profile) CheckArgs(args []string) error {
	firstCmd := -1
	for i, a := range args {
		if a == "--" {
			if i+1 < len(args) {
				firstCmd = i + 1
			}
			break
		}
		if !strings.HasPrefix(a, "-") {
			firstCmd = i
			break
		}
	}
	for i, a := range args {
		for _, d := range p.DeniedArgs {
			hit := false
			switch d.Match {
			case MatchFlag:
				hit = a == d.Arg || strings.HasPrefix(a, d.Arg+"=")
			case MatchCommand:
				hit = i == firstCmd && a == d.Arg
			case MatchPrefix:
				hit = strings.HasPrefix(a, d.Arg)
			}
			if hit {
				return &ArgumentError{Profile: p.ID, Arg: a, Rule: d.Arg, Reason: d.Reason}
			}
		}
	}
	return nil
}

// Facts are what the preconditions and the wiring of one launch depend on. Everything is
// supplied by the caller, so that both are pure.
type Facts struct {
	// Args are the user's arguments (argv[1:]).
	Args []string
	// Egress is the launch's network mode.
	Egress plan.Egress
	// Models is the configuration's `models:` (program ID → model).
	Models map[string]string
	// Providers are the relay providers with a configured gateway.
	Providers map[string]bool
	// RelayURL and Pairing are what the relay broker gave the launch (the in-box URL and the
	// session's pairing); "" when no relay broker runs.
	RelayURL, Pairing string
	// StateDir is the box-owned state directory of the launch's workspace and profile (package
	// harnessstate), where the profile's state entries are bound from. "" fails a launch whose
	// profile has state entries.
	StateDir string
}

// Model returns the model of a launch and where it comes from: the last of the profile's
// model flags on the command line ("--model x" or "--model=x"), else models.<id>. It returns
// "" when neither sets one.
func (p *Profile) Model(f Facts) (model, source string) {
	for i := 0; i < len(f.Args); i++ {
		a := f.Args[i]
		if a == "--" {
			break
		}
		for _, m := range p.Requires.ModelArgs {
			if a == m && i+1 < len(f.Args) {
				model, source = f.Args[i+1], "argument "+m
				i++
			} else if v, ok := strings.CutPrefix(a, m+"="); ok {
				model, source = v, "argument "+m
			}
		}
	}
	if model == "" && f.Models[p.ID] != "" {
		model, source = f.Models[p.ID], "models."+p.ID
	}
	return model, source
}

// Provider returns the relay provider of a launch ("" for a program not wired to the relay).
func (p *Profile) Provider(f Facts) string {
	if p.Relay.ProviderFromModel {
		m, _ := p.Model(f)
		prov, _, _ := strings.Cut(m, "/")
		return prov
	}
	return p.Relay.Provider
}

// Check verifies p's preconditions for one launch, before anything starts. It returns a
// *PreconditionError naming the configuration key that fixes the first one that fails. That
// the relay broker gave the launch a URL and pairing is checked when the launch is wired.
func (p *Profile) Check(f Facts) error {
	fail := func(what, key, fix, format string, a ...any) error {
		return &PreconditionError{Profile: p.ID, What: what, Key: key, Fix: fix, Msg: fmt.Sprintf(format, a...)}
	}
	if p.Requires.EgressDeny && f.Egress == plan.EgressAllow {
		return fail("egress", "egress", "run it with egress: deny (the default), or drop --egress allow",
			"%s refuses egress: allow: with the host network it could reach a provider directly, past the relay", p.DisplayName())
	}
	var model string
	if p.Requires.Model {
		var src string
		model, src = p.Model(f)
		key := "models." + p.ID
		flag := "--model"
		if len(p.Requires.ModelArgs) > 0 {
			flag = p.Requires.ModelArgs[0]
		}
		if model == "" {
			return fail("model", key, fmt.Sprintf("set %s in your config, or give the program its own flag: agentbox run %s -- %s NAME", key, p.ID, flag),
				"%s needs a model and none is set", p.DisplayName())
		}
		if !ModelRE().MatchString(model) {
			return fail("model", key, "use a model name of letters, digits and . _ : / @ + -",
				"model %q (from %s) is not a valid model name", model, src)
		}
		if p.Relay.ProviderFromModel {
			prov, rest, ok := strings.Cut(model, "/")
			if !ok || prov == "" || rest == "" {
				return fail("model", key, fmt.Sprintf("name the provider: %s: anthropic/<model> or openai/<model>", key),
					"model %q (from %s) does not name its provider (provider/model)", model, src)
			}
		}
	}
	if !p.Relay.Wired() {
		return nil
	}
	prov := p.Provider(Facts{Args: f.Args, Models: f.Models})
	if !f.Providers[prov] {
		return fail("gateway", "gateway."+prov, fmt.Sprintf("configure gateway.%s (its URL and credential) in your config", prov),
			"%s talks to the %s provider, and no %s gateway is configured for the relay", p.DisplayName(), prov, prov)
	}
	return nil
}

// Wiring is what a profile adds to one launch.
type Wiring struct {
	// Args is the program's full argument list: the profile's relay arguments, then the user's.
	Args []string
	// Contributions go into plan.Input.Brokers (merged with the brokers').
	plan.Contributions
	// Unset are environment keys to remove from the box.
	Unset           []string
	Model, Provider string
}

// InstallTree is the install tree of one launch (found by FindInstall on the host).
type InstallTree struct {
	// Tree is the install tree (a directory, or the executable file itself).
	Tree string `json:"tree"`
	// Interpreter is the prefix of the script's interpreter ("" when none).
	Interpreter string `json:"interpreter,omitempty"`
}

// Wire renders p into one launch: the home entries become mounts, the install tree a
// read-only bind, the relay templates environment and arguments. home is the user's home
// directory, tree what FindInstall found (nil: nothing beyond the program file, which
// plan.Build binds). Call Check first: Wire assumes the preconditions hold. It is pure.
func (p *Profile) Wire(home string, tree *InstallTree, f Facts) (*Wiring, error) {
	home = filepath.Clean(home)
	w := &Wiring{}
	for i, h := range p.Home {
		host := filepath.Join(home, h.Path)
		beneath := ""
		// An entry inside a harness folder that is not bound itself (Copilot's, which is the
		// box's own) resolves beneath that folder: a symlink there never leads elsewhere.
		if d := harnessDir(filepath.Clean(h.Path)); d != filepath.Clean(h.Path) {
			beneath = filepath.Join(home, d)
		}
		for _, e := range p.Home[:i] {
			if e.grants() && strings.HasPrefix(filepath.Clean(h.Path), filepath.Clean(e.Path)+"/") {
				beneath = filepath.Join(home, e.Path)
			}
		}
		switch {
		case h.Access == AccessCache:
			// The daemon mounts it with the workspace's box cache (Caches).
			continue
		case h.Access == AccessDeny && p.inStateDir(i):
			// The host's path is never seen in a state folder: its mount point there (made empty
			// by harnessstate.Prepare), bound read-only, keeps a box from leaving one for the next.
			// A bind, not a mask: an engine that looks an optional mask's target up on the host
			// (bwrap) would find none there and skip it.
			sd := filepath.Clean(f.StateDir)
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(sd, h.Path), Target: host, ReadOnly: true, Beneath: sd})
		case h.Access == AccessDeny:
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountMask, Target: host, Optional: true})
		case h.Access == AccessPrivate:
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountTmpfs, Target: host})
		case h.Access == AccessLink:
			// Relative, so that it leads into the box's own home whatever the home's path.
			rel, err := filepath.Rel(filepath.Dir(host), filepath.Join(home, h.Link))
			if err != nil {
				return nil, fmt.Errorf("profile %s: home entry %s: %w", p.ID, h.Path, err)
			}
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountSymlink, Source: rel, Target: host})
		case h.Access == AccessState:
			if f.StateDir == "" {
				return nil, fmt.Errorf("profile %s: home entry %s is kept in a box-owned state directory, and the launch has none", p.ID, h.Path)
			}
			if p.inStateDir(i) {
				// Reached through the folder's own bind: a file bound on its own could not be
				// replaced by a rename, which is how Gemini CLI saves its trust file.
				continue
			}
			sd := filepath.Clean(f.StateDir)
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(sd, h.Path), Target: host, Beneath: sd})
		default:
			if p.inStateDir(i) && h.Create == "" {
				// The host's path may be absent: its mount point in the state folder (made
				// empty by harnessstate.Prepare) is read-only then, so that no box keeps
				// something there for the next one to load.
				sd := filepath.Clean(f.StateDir)
				w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(sd, h.Path), Target: host, ReadOnly: true, Beneath: sd})
			}
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountBind, Source: host, Target: host,
				ReadOnly: h.Access == AccessRO, Optional: h.Create == "", Beneath: beneath})
		}
	}
	if tree != nil {
		for _, t := range []string{tree.Tree, tree.Interpreter} {
			if t == "" {
				continue
			}
			w.Mounts = append(w.Mounts, plan.Mount{Kind: plan.MountBind, Source: t, Target: t, ReadOnly: true})
			w.ReadOnly = append(w.ReadOnly, t)
		}
	}
	w.Args = append(w.Args, f.Args...)
	if !p.Relay.Wired() {
		return w, nil
	}
	model, _ := p.Model(f)
	prov := p.Provider(f)
	w.Model, w.Provider = model, prov
	vals := map[string]string{"{relayURL}": strings.TrimSuffix(f.RelayURL, "/"), "{pairing}": f.Pairing, "{provider}": prov, "{model}": model}
	if p.Relay.uses("{home}") {
		// Only when used: a home with a space fails no launch that does not need it.
		vals["{home}"] = home
	}
	for ph, v := range vals {
		// Values are substituted into JSON and TOML strings: refuse anything that would need
		// escaping rather than escape it per format.
		if strings.ContainsAny(v, "\"\\'\x00\n\r\t ") {
			return nil, fmt.Errorf("profile %s: %s value %q holds a quote, backslash or space", p.ID, ph, v)
		}
	}
	render := func(s string) string {
		for _, ph := range placeholders {
			s = strings.ReplaceAll(s, ph, vals[ph])
		}
		return s
	}
	args := make([]string, 0, len(p.Relay.Args)+len(f.Args))
	for _, a := range p.Relay.Args {
		args = append(args, render(a))
	}
	w.Args = append(args, f.Args...)
	for _, k := range sortedKeys(p.Relay.Env) {
		w.Env = append(w.Env, k+"="+render(p.Relay.Env[k]))
	}
	w.Unset = slices.Clone(p.Relay.Unset)
	return w, nil
}

// Caches returns the home-relative folders of p's cache entries (access: cache), which the
// daemon shows each box as an overlay of the host's folder under the workspace's box cache.
func (p *Profile) Caches() []string {
	var out []string
	for _, h := range p.Home {
		if h.Access == AccessCache {
			out = append(out, filepath.Clean(h.Path))
		}
	}
	return out
}

// PreCreate is a home path created on the host before a launch when absent.
type PreCreate struct {
	// Rel is relative to $HOME.
	Rel     string
	Dir     bool
	Content string
}

// PreCreates lists the home paths p needs to exist before the box is built, parents first.
func (p *Profile) PreCreates() []PreCreate {
	var out []PreCreate
	for _, h := range p.Home {
		if h.Create != "" && h.Access != AccessState {
			out = append(out, PreCreate{Rel: filepath.Clean(h.Path), Dir: h.Create == CreateDir, Content: h.Content})
		}
	}
	return out
}

// HomePlaceholder is a home path held by a placeholder while a box runs, when absent at launch.
type HomePlaceholder struct {
	// Path is the host path; Beneath the read-write entry it lies in (created beneath it, never
	// through a symlink).
	Path, Beneath string
	Dir           bool
	// Content is a file placeholder's content.
	Content string
}

// HomePlaceholders returns the ro and deny entries of p that a box could create while they are
// absent, because they lie beneath a rw entry: each needs a placeholder while the box runs
// (an empty file, or an empty folder for absent: dir), and the private and state entries there
// (the mount point of the box's own folder or file). Folders on the way from the rw entry
// are listed before what they hold. An entry with create is never absent, and one beneath a
// ro entry or the private home cannot be created by the box.
func (p *Profile) HomePlaceholders(home string) []HomePlaceholder {
	home = filepath.Clean(home)
	var out []HomePlaceholder
	seen := map[string]bool{}
	for i, h := range p.Home {
		if h.Access == AccessRW || (h.Create != "" && h.Access != AccessState) || p.inStateDir(i) {
			continue
		}
		var parent *HomeEntry
		for j := range p.Home[:i] {
			if e := &p.Home[j]; e.grants() && strings.HasPrefix(filepath.Clean(h.Path), filepath.Clean(e.Path)+"/") {
				parent = e
			}
		}
		if parent == nil || parent.Access != AccessRW {
			continue
		}
		beneath := filepath.Join(home, parent.Path)
		rel, _ := filepath.Rel(filepath.Clean(parent.Path), filepath.Clean(h.Path))
		parts := strings.Split(rel, "/")
		for k := range parts {
			path := filepath.Join(beneath, filepath.Join(parts[:k+1]...))
			last := k == len(parts)-1
			if seen[path] {
				continue
			}
			seen[path] = true
			hp := HomePlaceholder{Path: path, Beneath: beneath, Dir: !last || h.Absent == CreateDir || h.Access == AccessPrivate ||
				(h.Access == AccessState && h.Create == CreateDir)}
			if !hp.Dir {
				hp.Content = h.Content
			}
			out = append(out, hp)
		}
	}
	return out
}

// HomeProtected returns the host paths of p's protected home entries, each with the
// directory it resolves beneath (the granted directory holding it), for the protected-paths
// and integrity code.
func (p *Profile) HomeProtected(home string) []plan.Protected {
	home = filepath.Clean(home)
	var out []plan.Protected
	for i, h := range p.Home {
		if !h.Protect {
			continue
		}
		beneath := home
		for _, e := range p.Home[:i] {
			if e.grants() && strings.HasPrefix(filepath.Clean(h.Path), filepath.Clean(e.Path)+"/") {
				beneath = filepath.Join(home, e.Path)
			}
		}
		out = append(out, plan.Protected{Path: filepath.Join(home, h.Path), Beneath: beneath})
	}
	return out
}

// inStateDir reports whether p's home entry i lies in an earlier state folder entry: it is
// in the box through that folder, not bound on its own.
func (p *Profile) inStateDir(i int) bool {
	h := filepath.Clean(p.Home[i].Path)
	for _, e := range p.Home[:i] {
		if e.Access == AccessState && e.Create == CreateDir && strings.HasPrefix(h, filepath.Clean(e.Path)+"/") {
			return true
		}
	}
	return false
}

// StateEntry is a home entry kept in the box-owned state directory.
type StateEntry struct {
	// Rel is relative to $HOME, and to the state directory.
	Rel  string
	Dir  bool
	Seed string
	// MountPoint says the entry is not the box's own but lies in a state folder: the host's
	// path bound read-only there (Host: a ro entry, whose kind on the host, when present,
	// decides the mount point's), a mask or a private folder. Its mount point is made empty at
	// every launch; what a box wrote there is not kept.
	MountPoint, Host bool
	// Alone says a state entry is bound into the box on its own, not reached through the bind
	// of a state folder it lies in: it is a mount point in the running boxes of the workspace,
	// so it is rewritten in place (a new file renamed over it would leave them the old one).
	Alone bool
	// Content is what a file mount point holds (the entry's content: what the program reads
	// while the host has no such file, e.g. Claude Code's keybindings.json).
	Content string
}

// StateEntries lists p's state entries (access: state), and the mount points of the other
// entries in its state folders, in order.
func (p *Profile) StateEntries() []StateEntry {
	var out []StateEntry
	for i, h := range p.Home {
		switch {
		case h.Access == AccessState:
			out = append(out, StateEntry{Rel: filepath.Clean(h.Path), Dir: h.Create == CreateDir, Seed: h.Seed, Alone: !p.inStateDir(i)})
		case p.inStateDir(i):
			out = append(out, StateEntry{Rel: filepath.Clean(h.Path), MountPoint: true, Host: h.Access == AccessRO,
				Dir: h.Create == CreateDir || h.Absent == CreateDir || h.Access == AccessPrivate, Content: h.Content})
		}
	}
	return out
}
