// Package profile holds program profiles as data: for each agent harness (Claude Code,
// OpenCode, Copilot CLI, Codex CLI, Gemini CLI) and for any other program, which executables
// it answers to, how its install tree is found, which parts of its home the box sees (and
// how), how the LLM relay is wired into it, which arguments are refused, and what must hold
// before it starts. Built-in profiles are embedded files; admins and users add more under
// `programs:` in the configuration, with the same schema.
package profile

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Profile describes one program. Its zero value is the generic profile: no harness home, no
// relay wiring, nothing refused. Field names are the keys of a profile file and of an entry
// under `programs:`.
type Profile struct {
	// ID names the profile (the file name or the key under `programs:`); not part of the file.
	ID string `json:"-"`
	// Name is shown to people ("Claude Code"). Empty means the ID.
	Name string `json:"name,omitempty" jsonschema_description:"Name shown to people."`
	// Executables are the base names the profile answers to (`agentbox run claude`). Empty
	// means the profile is used only when named explicitly.
	Executables []string `json:"executables,omitempty" jsonschema_description:"Executable base names the profile answers to."`
	// Install says how the program's install tree is found and bound read-only.
	Install Install `json:"install,omitzero" jsonschema_description:"How the install tree is found (bound read-only)."`
	// Home lists what of the user's home the box sees; everything else of $HOME is an empty
	// private tmpfs.
	Home []HomeEntry `json:"home,omitempty" jsonschema_description:"Paths of the home directory the box sees, and how."`
	// Relay wires the program to the LLM relay. The zero value wires nothing.
	Relay Relay `json:"relay,omitzero" jsonschema_description:"How the program reaches the LLM relay."`
	// DeniedArgs are arguments refused before anything starts.
	DeniedArgs []DeniedArg `json:"deniedArgs,omitempty" jsonschema_description:"Arguments refused before the box starts."`
	// Requires are the preconditions checked before anything starts.
	Requires Requires `json:"requires,omitzero" jsonschema_description:"Preconditions checked before the box starts."`
	// WorkspaceConfig are workspace-relative paths of configuration the program trusts. Every
	// box pins the union over all profiles read-only (WorkspaceConfig).
	WorkspaceConfig []string `json:"workspaceConfig,omitempty" jsonschema_description:"Workspace-relative configuration the program trusts (pinned read-only in every box)."`
	// WorkspaceInstructions are workspace-relative instruction and prompt files the program
	// reads (CLAUDE.md, AGENTS.md, command and skill folders): work, not configuration. Every
	// box leaves the union over all profiles writable and reports what the launch changed in
	// them, unless protect.instructions is readonly (then they are pinned as WorkspaceConfig).
	WorkspaceInstructions []string `json:"workspaceInstructions,omitempty" jsonschema_description:"Workspace-relative instruction and prompt files the program reads (writable in every box and reported at exit; read-only under protect.instructions: readonly)."`
	// ExpectedRefusals are requests the program makes at every start whatever its settings,
	// to targets no box reaches: the egress proxy still refuses and audits each (a launch's
	// record lists it, marked expected), but the end of an attached launch does not announce
	// it, since no configuration key the user could set would make it go away.
	ExpectedRefusals []ExpectedRefusal `json:"expectedRefusals,omitempty" jsonschema_description:"Targets (host:port) the program asks for at every start whatever its settings: still refused and audited, marked expected, and not announced at the end of a launch."`
}

// ExpectedRefusal is a target a program asks for at every start, which no setting of the
// program turns off.
type ExpectedRefusal struct {
	// Target is host:port, as the egress proxy records it (lower case).
	Target string `json:"target" jsonschema_description:"host:port the program asks for."`
	// Why says what the request is and why it cannot be turned off; shown in the launch's
	// record.
	Why string `json:"why" jsonschema_description:"What the request is, and why no setting turns it off."`
}

// Install says how a program's install tree is found: the executable is resolved on PATH and
// its symlinks followed (npm's global bin links, ~/.local/bin links); the tree is the
// nearest ancestor holding a package.json whose name is in Packages, else the file itself.
type Install struct {
	// Packages are npm package names whose root is the install tree. Empty means the
	// executable file alone.
	Packages []string `json:"packages,omitempty" jsonschema_description:"npm package names whose root directory is the install tree."`
	// Interpreter, when the executable is a script starting with #!, is the interpreter whose
	// prefix (the directory above its bin/) is bound read-only too, e.g. node under ~/.nvm.
	// Empty means none.
	Interpreter string `json:"interpreter,omitempty" jsonschema_description:"Interpreter of a script executable whose install prefix is bound too (node)."`
}

// Access modes of a home entry.
const (
	AccessRW   = "rw"   // bound read-write
	AccessRO   = "ro"   // bound read-only
	AccessDeny = "deny" // hidden (masked) inside a granted directory; in a state folder, empty and read-only
	// AccessPrivate is a folder of the box's own inside a granted directory: an empty writable
	// tmpfs, discarded at exit. The host's folder is neither seen nor written.
	AccessPrivate = "private"
	// AccessState is the box's own too, but kept: bound read-write from the box-owned state
	// directory of the launch's workspace and profile (under agentbox's state directory), so
	// that later boxes of the same workspace find what earlier ones wrote (transcripts, resume
	// indexes, trust taken in a box). The host's path is neither seen nor written, and no
	// unboxed program reads the state directory. A file entry may be synthesized afresh at
	// every launch (Seed), from an allowlist of the host's and the box's own state.
	AccessState = "state"
	// AccessCache is a cache the program fills with what it then runs (Copilot CLI's extracted
	// package): an overlay of the host's folder, read and never written, under the layer for it
	// in the workspace's box cache (docs/toolchains.md), where every write of the box goes and
	// which the later boxes of that workspace, and nothing else, read. Without the host's folder,
	// the layer alone.
	AccessCache = "cache"
	// AccessLink is a symbolic link of the box's own at Path, in its private home (the tmpfs,
	// outside every other entry), leading to Link, a state entry of the profile: a program
	// that replaces its file by renaming a new one over it (Claude Code's ~/.claude.json)
	// writes through the link into the state folder holding it, where a rename works, while a
	// file bound on its own is a mount point no rename can replace (EBUSY). Made at every
	// launch, discarded at exit; the host's path is neither seen nor written.
	AccessLink = "link"
)

// grants reports whether e binds the host's path into the box (rw or ro), so that entries
// beneath it resolve beneath it.
func (e *HomeEntry) grants() bool { return e.Access == AccessRW || e.Access == AccessRO }

// Kinds of pre-created home entries.
const (
	CreateDir  = "dir"
	CreateFile = "file"
)

// HomeEntry is one path of the user's home that the box sees.
type HomeEntry struct {
	// Path is relative to $HOME (".claude/settings.json").
	Path string `json:"path" jsonschema_description:"Path relative to the home directory."`
	// Access is rw, ro, deny, private, state, cache or link.
	Access string `json:"access" jsonschema:"enum=rw,enum=ro,enum=deny,enum=private,enum=state,enum=cache,enum=link" jsonschema_description:"rw (read-write), ro (read-only), deny (masked), private (a folder of the box's own, discarded at exit), state (the box's own, kept per workspace under agentbox's state directory), cache (the host's folder read-only under the workspace's box cache layer, where the box writes) or link (a symbolic link of the box's own to a state entry, see link)."`
	// Protect marks executable configuration: it is pinned read-only against replacement and
	// watched by the integrity watch. Only with access ro.
	Protect bool `json:"protect,omitempty" jsonschema_description:"Executable configuration: pinned read-only and watched (access ro only)."`
	// Create pre-creates the path on the host when absent ("dir" or "file"), so the program
	// starts and a read-only pin never waits for a missing path. Empty means an absent path
	// is skipped.
	Create string `json:"create,omitempty" jsonschema:"enum=dir,enum=file" jsonschema_description:"Pre-create on the host when absent: dir or file."`
	// Content is the content of a pre-created file ("{}\n" for JSON settings), or of the file
	// placeholder of an absent ro or deny entry (one its program and host tools accept).
	Content string `json:"content,omitempty" jsonschema_description:"Content of a pre-created file, or of an absent entry's file placeholder."`
	// Absent is the kind of placeholder ("dir" or "file", default "file") that holds a ro or
	// deny entry without create while a box runs, when the entry is absent at launch and lies
	// beneath a rw entry: without it the box could create the entry there, and the next session
	// would find it. The placeholder is removed when the last box holding it ends.
	Absent string `json:"absent,omitempty" jsonschema:"enum=dir,enum=file" jsonschema_description:"Placeholder kind (dir or file, default file) for a ro or deny entry absent at launch beneath a rw entry, held while a box runs so the box cannot create it."`
	// Seed names the synthesizer (package harnessstate) that writes a state file afresh at
	// every launch from an allowlist of non-executable keys of the host's file at Path and of
	// the box's own copy. Only with access state and create file; empty keeps the box's file
	// as the box left it.
	Seed string `json:"seed,omitempty" jsonschema_description:"For a state file: the synthesizer that rewrites it at every launch from an allowlist of the host's and the box's keys (claude-config, codex-config, copilot-config, copilot-mcp-config, copilot-permissions, gemini-trust, gemini-settings, opencode-db)."`
	// Link is where a link entry (access: link) leads: the path, relative to $HOME, of a
	// state entry of the same profile in a state folder. Empty for every other access.
	Link string `json:"link,omitempty" jsonschema_description:"For access link: the home-relative path of a state entry in a state folder that the box's symbolic link at path leads to."`
}

// Relay wires a program to the LLM relay. Values are templates over {relayURL} (the in-box
// relay URL), {pairing} (the launch's pairing), {provider} (the relay provider), {model} and
// {home} (the home directory, the same path in the box).
type Relay struct {
	// Provider is the relay provider the program speaks to (anthropic, openai, gemini). Empty
	// with ProviderFromModel false means the program is not wired.
	Provider string `json:"provider,omitempty" jsonschema_description:"Relay provider: anthropic, openai, gemini."`
	// ProviderFromModel takes the provider from the model's prefix ("anthropic/claude-…").
	ProviderFromModel bool `json:"providerFromModel,omitempty" jsonschema_description:"Take the provider from the model's prefix (provider/model)."`
	// Env are environment variables set in the box (templates).
	Env map[string]string `json:"env,omitempty" jsonschema_description:"Environment set in the box (templates over {relayURL}, {pairing}, {provider}, {model}, {home})."`
	// Args are arguments put before the user's (templates; never {pairing}).
	Args []string `json:"args,omitempty" jsonschema_description:"Arguments put before the user's (templates; never {pairing})."`
	// Unset are environment variables removed from the box even when allowlisted.
	Unset []string `json:"unset,omitempty" jsonschema_description:"Environment variables removed from the box."`
}

// uses reports whether one of r's templates holds placeholder ph.
func (r Relay) uses(ph string) bool {
	for _, v := range r.Env {
		if strings.Contains(v, ph) {
			return true
		}
	}
	return slices.ContainsFunc(r.Args, func(a string) bool { return strings.Contains(a, ph) })
}

// Wired reports whether the profile routes the program through the relay.
func (r Relay) Wired() bool { return r.Provider != "" || r.ProviderFromModel }

// Match modes of a denied argument.
const (
	// MatchFlag refuses the flag, alone or as --flag=value.
	MatchFlag = "flag"
	// MatchCommand refuses the first argument that is not a flag (a subcommand such as
	// `opencode serve`).
	MatchCommand = "command"
	// MatchPrefix refuses any argument that starts with Arg.
	MatchPrefix = "prefix"
)

// DeniedArg is one refused argument.
type DeniedArg struct {
	Arg    string `json:"arg" jsonschema_description:"The argument: a flag (--port), a subcommand (serve) or a prefix."`
	Match  string `json:"match" jsonschema:"enum=flag,enum=command,enum=prefix" jsonschema_description:"flag (also --flag=value), command (the first non-flag argument) or prefix."`
	Reason string `json:"reason,omitempty" jsonschema_description:"Why it is refused, shown to the user."`
}

// Requires are a profile's preconditions.
type Requires struct {
	// EgressDeny refuses `egress: allow`: with the host network the program could reach a
	// provider directly, past the relay's log and revocation.
	EgressDeny bool `json:"egressDeny,omitempty" jsonschema_description:"Refuse egress: allow."`
	// Model requires a model: from one of ModelArgs on the command line, else from
	// models.<id> in the configuration.
	Model bool `json:"model,omitempty" jsonschema_description:"A model is required (command line, else models.<id>)."`
	// ModelArgs are the flags that name the model on the command line.
	ModelArgs []string `json:"modelArgs,omitempty" jsonschema_description:"Flags that name the model on the command line."`
}

// Generic is the ID of the generic profile, used for a program no profile answers to.
const Generic = "generic"

// FieldError is a profile that is not valid: Field is the dotted path of the offending key
// inside the profile ("home[2].path").
type FieldError struct {
	Profile string
	Field   string
	Msg     string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("profile %s: %s: %s", e.Profile, e.Field, e.Msg)
}

var (
	idRE     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) })
	envKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	hostRE   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	})
	providerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`) })
	// ModelRE is what a model name may hold; it is substituted into JSON and TOML templates,
	// so quotes, backslashes and spaces are refused.
	ModelRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`) })
	placeholders = []string{"{relayURL}", "{pairing}", "{provider}", "{model}", "{home}"}
)

// ValidID reports whether id can name a profile.
func ValidID(id string) bool { return idRE().MatchString(id) }

// Validate checks what the schema's types cannot: paths stay beneath home and workspace,
// templates use known placeholders, the pairing never goes into arguments, and the keys are
// consistent. It returns a *FieldError.
func (p *Profile) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &FieldError{Profile: p.ID, Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	for i, e := range p.Executables {
		if e == "" || strings.ContainsAny(e, "/\x00") || e == "." || e == ".." {
			return bad(fmt.Sprintf("executables[%d]", i), "%q is not a base name", e)
		}
	}
	for i, pkg := range p.Install.Packages {
		if pkg == "" || strings.ContainsAny(pkg, " \x00") {
			return bad(fmt.Sprintf("install.packages[%d]", i), "%q is not an npm package name", pkg)
		}
	}
	if s := p.Install.Interpreter; s != "" && (strings.ContainsAny(s, "/\x00 ") || s == "." || s == "..") {
		return bad("install.interpreter", "%q is not a base name", s)
	}
	seen := map[string]bool{}
	for i, h := range p.Home {
		f := fmt.Sprintf("home[%d]", i)
		if err := relPath(h.Path); err != "" {
			return bad(f+".path", "%q %s", h.Path, err)
		}
		clean := filepath.Clean(h.Path)
		if seen[clean] {
			return bad(f+".path", "%q is listed twice", h.Path)
		}
		seen[clean] = true
		switch h.Access {
		case AccessRW, AccessRO, AccessDeny, AccessPrivate, AccessState, AccessCache, AccessLink:
		default:
			return bad(f+".access", "invalid value %q (allowed: rw, ro, deny, private, state, cache, link)", h.Access)
		}
		if (h.Link != "") != (h.Access == AccessLink) {
			return bad(f+".link", "a link entry (access: link) needs link, and only it has one")
		}
		if h.Access == AccessLink {
			if err := p.checkLink(i); err != "" {
				return bad(f+".link", "%s", err)
			}
		}
		if h.Access == AccessCache {
			if h.Create != "" || h.Absent != "" || h.Content != "" || h.Protect || h.Seed != "" {
				return bad(f+".access", "a cache entry is a folder seen through the box cache: no create, absent, content, protect or seed")
			}
			for j, e := range p.Home {
				if o := filepath.Clean(e.Path); j != i && (strings.HasPrefix(clean, o+"/") || strings.HasPrefix(o, clean+"/")) {
					return bad(f+".path", "a cache entry holds no other home entry and lies in none (home[%d] is %q)", j, e.Path)
				}
			}
		}
		if h.Access == AccessState && (h.Create == "" || h.Absent != "" || h.Content != "" || h.Protect) {
			return bad(f+".access", "a state entry needs create: dir or file (its kind), and no absent, content or protect")
		}
		if h.Seed != "" && (h.Access != AccessState || h.Create != CreateFile) {
			return bad(f+".seed", "only a state file (access: state, create: file) is seeded")
		}
		if h.Seed != "" && !slices.Contains(Seeds, h.Seed) {
			return bad(f+".seed", "invalid value %q (allowed: %s)", h.Seed, strings.Join(Seeds, ", "))
		}
		if p.inStateDir(i) && h.Access == AccessRW {
			return bad(f+".access", "an entry in a state folder is the box's own (state, private), or the host's read-only (ro) or masked (deny): not rw")
		}
		if h.Access == AccessState && underGranted(clean, p.Home[:i]) {
			if parent := grantingParent(clean, p.Home[:i]); parent.Access != AccessRW {
				return bad(f+".path", "a state entry beneath a granted entry must be beneath a rw one")
			}
		}
		if h.Access == AccessPrivate && (h.Create != "" || h.Absent != "" || h.Content != "") {
			return bad(f+".access", "a private entry is always a folder of the box's own: no create, absent or content")
		}
		if h.Protect && h.Access != AccessRO {
			return bad(f+".protect", "only a read-only (access: ro) entry can be protected")
		}
		switch h.Create {
		case "", CreateDir, CreateFile:
		default:
			return bad(f+".create", "invalid value %q (allowed: dir, file)", h.Create)
		}
		if h.Create != "" && h.Access == AccessDeny {
			return bad(f+".create", "a denied path is never created")
		}
		if h.Content != "" && h.Create != CreateFile && (h.Create != "" || h.Access == AccessRW || h.Absent == CreateDir) {
			return bad(f+".content", "content needs create: file, or a ro or deny entry's file placeholder")
		}
		switch h.Absent {
		case "", CreateDir, CreateFile:
		default:
			return bad(f+".absent", "invalid value %q (allowed: dir, file)", h.Absent)
		}
		if h.Absent != "" && (h.Create != "" || h.Access == AccessRW) {
			return bad(f+".absent", "only a ro or deny entry without create gets a placeholder")
		}
		if (h.Access == AccessDeny || h.Access == AccessPrivate) && !underGranted(clean, p.Home[:i]) && !p.inStateDir(i) {
			return bad(f+".path", "a denied or private path must be beneath an earlier rw, ro or state folder entry (the rest of the home is private anyway)")
		}
		if h.Access == AccessPrivate && !p.inStateDir(i) {
			if parent := grantingParent(clean, p.Home[:i]); parent.Access != AccessRW {
				return bad(f+".path", "a private folder must be beneath a rw entry (beneath a ro one, the box cannot write there anyway)")
			}
		}
	}
	r := p.Relay
	if r.Provider != "" && r.ProviderFromModel {
		return bad("relay.provider", "set provider or providerFromModel, not both")
	}
	if r.Provider != "" && !providerRE().MatchString(r.Provider) {
		return bad("relay.provider", "%q is not a provider name", r.Provider)
	}
	if !r.Wired() && (len(r.Env) > 0 || len(r.Args) > 0) {
		return bad("relay", "env and args need a provider (or providerFromModel)")
	}
	if r.ProviderFromModel && !p.Requires.Model {
		return bad("relay.providerFromModel", "needs requires.model: the provider comes from the model")
	}
	for _, k := range sortedKeys(r.Env) {
		if !envKeyRE().MatchString(k) {
			return bad("relay.env."+k, "%q is not an environment variable name", k)
		}
		if strings.HasPrefix(k, "AGENTBOX") {
			return bad("relay.env."+k, "AGENTBOX* variables belong to agentbox")
		}
		if err := checkTemplate(r.Env[k]); err != "" {
			return bad("relay.env."+k, "%s", err)
		}
	}
	for i, a := range r.Args {
		if err := checkTemplate(a); err != "" {
			return bad(fmt.Sprintf("relay.args[%d]", i), "%s", err)
		}
		if strings.Contains(a, "{pairing}") {
			return bad(fmt.Sprintf("relay.args[%d]", i), "the pairing never goes into arguments (they are recorded and visible in /proc); pass it in env")
		}
	}
	for i, k := range r.Unset {
		if !envKeyRE().MatchString(k) {
			return bad(fmt.Sprintf("relay.unset[%d]", i), "%q is not an environment variable name", k)
		}
	}
	for i, d := range p.DeniedArgs {
		f := fmt.Sprintf("deniedArgs[%d]", i)
		if d.Arg == "" {
			return bad(f+".arg", "empty")
		}
		switch d.Match {
		case MatchFlag:
			if !strings.HasPrefix(d.Arg, "-") {
				return bad(f+".arg", "a flag starts with -")
			}
		case MatchCommand:
			if strings.HasPrefix(d.Arg, "-") {
				return bad(f+".arg", "a command does not start with -")
			}
		case MatchPrefix:
		default:
			return bad(f+".match", "invalid value %q (allowed: flag, command, prefix)", d.Match)
		}
	}
	for i, a := range p.Requires.ModelArgs {
		if !strings.HasPrefix(a, "-") {
			return bad(fmt.Sprintf("requires.modelArgs[%d]", i), "a flag starts with -")
		}
	}
	if len(p.Requires.ModelArgs) > 0 && !p.Requires.Model {
		return bad("requires.modelArgs", "needs requires.model")
	}
	for i, w := range p.WorkspaceConfig {
		if err := relPath(w); err != "" {
			return bad(fmt.Sprintf("workspaceConfig[%d]", i), "%q %s", w, err)
		}
	}
	for i, w := range p.WorkspaceInstructions {
		if err := relPath(w); err != "" {
			return bad(fmt.Sprintf("workspaceInstructions[%d]", i), "%q %s", w, err)
		}
	}
	for i, r := range p.ExpectedRefusals {
		f := fmt.Sprintf("expectedRefusals[%d]", i)
		if err := hostPort(r.Target); err != "" {
			return bad(f+".target", "%q %s", r.Target, err)
		}
		if strings.TrimSpace(r.Why) == "" {
			return bad(f+".why", "empty: say what the request is and why no setting of the program turns it off")
		}
	}
	return nil
}

// checkLink returns why p's link entry i is not one a box can be given, or "": its path lies
// in the box's private home, outside every other entry (where no host folder is bound in: the
// engine makes the link on the box's tmpfs), and it leads to a state entry in a state folder,
// the box-owned state and nothing of the host's.
func (p *Profile) checkLink(i int) string {
	h := p.Home[i]
	if h.Create != "" || h.Absent != "" || h.Content != "" || h.Protect || h.Seed != "" {
		return "a link entry is a symbolic link of the box's own: no create, absent, content, protect or seed"
	}
	if err := relPath(h.Link); err != "" {
		return fmt.Sprintf("%q %s", h.Link, err)
	}
	clean, to := filepath.Clean(h.Path), filepath.Clean(h.Link)
	for j, e := range p.Home {
		o := filepath.Clean(e.Path)
		if j != i && (strings.HasPrefix(clean, o+"/") || strings.HasPrefix(o, clean+"/")) {
			return fmt.Sprintf("a link lies in no other home entry and holds none (home[%d] is %q): it is made in the box's private home", j, e.Path)
		}
	}
	for j, e := range p.Home {
		if filepath.Clean(e.Path) == to && e.Access == AccessState && p.inStateDir(j) {
			return ""
		}
	}
	return fmt.Sprintf("%q is not a state entry (access: state) in a state folder of this profile: a link leads only to the box-owned state", h.Link)
}

// hostPort returns why s is not a lower-case host:port (a DNS name or an IP address and a
// port number, as the egress proxy records a target), or "".
func hostPort(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil || strings.ContainsAny(s, "/@") {
		return "is not host:port (raw.example.org:443)"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return "has no port number from 1 to 65535"
	}
	if net.ParseIP(host) == nil && !hostRE().MatchString(host) {
		return "names no host (lower-case letters, digits, dots and hyphens)"
	}
	return ""
}

// relPath returns why p is not a clean relative path beneath its base, or "".
func relPath(p string) string {
	switch {
	case p == "":
		return "is empty"
	case filepath.IsAbs(p):
		return "must be relative"
	case strings.ContainsRune(p, 0):
		return "holds a NUL byte"
	}
	c := filepath.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "must stay beneath its base directory"
	}
	return ""
}

// grantingParent returns the last of earlier that grants a folder holding p (nil: none).
func grantingParent(p string, earlier []HomeEntry) *HomeEntry {
	var parent *HomeEntry
	for j := range earlier {
		if e := &earlier[j]; e.grants() && strings.HasPrefix(p, filepath.Clean(e.Path)+"/") {
			parent = e
		}
	}
	return parent
}

// Seeds are the synthesizers a state file may name (package harnessstate implements them).
var Seeds = []string{SeedClaudeConfig, SeedCodexConfig, SeedCopilotConfig, SeedCopilotMCPConfig, SeedCopilotPermissions, SeedGeminiTrust, SeedGeminiSettings, SeedOpenCodeDB}

// The synthesizers of state files.
const (
	// SeedClaudeConfig synthesizes Claude Code's ~/.claude.json.
	SeedClaudeConfig = "claude-config"
	// SeedCodexConfig synthesizes Codex CLI's config.toml: preferences and the workspace's trust.
	SeedCodexConfig = "codex-config"
	// SeedCopilotConfig synthesizes Copilot CLI's state file config.json: onboarding state and
	// the workspace's trust.
	SeedCopilotConfig = "copilot-config"
	// SeedCopilotMCPConfig writes Copilot CLI's mcp-config.json with no MCP server.
	SeedCopilotMCPConfig = "copilot-mcp-config"
	// SeedCopilotPermissions writes Copilot CLI's permissions-config.json (its saved tool
	// approvals) from the host's file only: no box's approval reaches a later box.
	SeedCopilotPermissions = "copilot-permissions"
	// SeedGeminiTrust synthesizes Gemini CLI's trustedFolders.json: the workspace's trust.
	SeedGeminiTrust = "gemini-trust"
	// SeedGeminiSettings writes Gemini CLI's user settings.json: the host's, with its update
	// check, automatic update and usage statistics off.
	SeedGeminiSettings = "gemini-settings"
	// SeedOpenCodeDB edits OpenCode's SQLite database in place (sessions live in it): the
	// saved "always" answers, session permission rules that allow, project start commands and
	// accounts a box recorded are dropped; the host's own saved answers are carried.
	SeedOpenCodeDB = "opencode-db"
)

func underGranted(p string, earlier []HomeEntry) bool {
	for _, e := range earlier {
		if e.grants() && strings.HasPrefix(p, filepath.Clean(e.Path)+"/") {
			return true
		}
	}
	return false
}

func checkTemplate(s string) string {
	rest := s
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return ""
		}
		rest = rest[i:]
		known := false
		for _, ph := range placeholders {
			if strings.HasPrefix(rest, ph) {
				known, rest = true, rest[len(ph):]
				break
			}
		}
		if !known {
			// JSON braces are fine; only {word} shaped tokens must be known placeholders.
			if j := strings.IndexByte(rest, '}'); j > 1 && regexp.MustCompile(`^\{[A-Za-z]+\}`).MatchString(rest[:j+1]) {
				return fmt.Sprintf("unknown placeholder %s (known: %s)", rest[:j+1], strings.Join(placeholders, ", "))
			}
			rest = rest[1:]
		}
	}
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// DisplayName returns the name shown to people.
func (p *Profile) DisplayName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.ID
}
