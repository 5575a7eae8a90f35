package profile

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
)

//go:embed profiles/*.yaml
var builtinFS embed.FS

// Origin says where a profile comes from.
const (
	OriginBuiltin = "builtin"
	OriginConfig  = "config"
)

var (
	builtinOnce sync.Once
	builtins    map[string]*Profile
	builtinErr  error
)

// Builtins returns the embedded profiles by ID (a fresh copy each call). A broken embedded
// file is a build defect: the tests load every one.
func Builtins() (map[string]*Profile, error) {
	builtinOnce.Do(func() { builtins, builtinErr = loadFS(builtinFS, "profiles") })
	if builtinErr != nil {
		return nil, builtinErr
	}
	out := make(map[string]*Profile, len(builtins))
	for id, p := range builtins {
		out[id] = p.clone()
	}
	return out, nil
}

func loadFS(fsys fs.FS, dir string) (map[string]*Profile, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*Profile{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		p, err := Parse(id, b)
		if err != nil {
			return nil, err
		}
		out[id] = p
	}
	if out[Generic] == nil {
		return nil, fmt.Errorf("profile: no %s profile embedded", Generic)
	}
	return out, nil
}

// Parse decodes one profile file strictly (unknown keys refused) and validates it.
func Parse(id string, data []byte) (*Profile, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("profile %q: invalid id (lowercase letters, digits, . _ -)", id)
	}
	p := &Profile{}
	if err := yaml.UnmarshalWithOptions(data, p, yaml.DisallowUnknownField(), yaml.Strict()); err != nil {
		return nil, fmt.Errorf("profile %s: %w", id, err)
	}
	p.ID = id
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Profile) clone() *Profile {
	c := *p
	c.Executables = slices.Clone(p.Executables)
	c.Install.Packages = slices.Clone(p.Install.Packages)
	c.Home = slices.Clone(p.Home)
	c.Relay.Args = slices.Clone(p.Relay.Args)
	c.Relay.Unset = slices.Clone(p.Relay.Unset)
	if p.Relay.Env != nil {
		c.Relay.Env = make(map[string]string, len(p.Relay.Env))
		for k, v := range p.Relay.Env {
			c.Relay.Env[k] = v
		}
	}
	c.DeniedArgs = slices.Clone(p.DeniedArgs)
	c.Requires.ModelArgs = slices.Clone(p.Requires.ModelArgs)
	c.WorkspaceConfig = slices.Clone(p.WorkspaceConfig)
	c.WorkspaceInstructions = slices.Clone(p.WorkspaceInstructions)
	c.ExpectedRefusals = slices.Clone(p.ExpectedRefusals)
	return &c
}

// Set is the profiles in force: the built-in ones, with the configuration's `programs:` added
// (an entry with a built-in's ID replaces it).
type Set struct {
	byID   map[string]*Profile
	origin map[string]string
	byExe  map[string]string
}

// NewSet returns the built-in profiles plus extra (the configuration's `programs:`, by ID).
// It refuses an invalid entry, and an executable name claimed by two profiles, with a
// *FieldError naming the entry.
func NewSet(extra map[string]Profile) (*Set, error) {
	b, err := Builtins()
	if err != nil {
		return nil, err
	}
	s := &Set{byID: b, origin: map[string]string{}, byExe: map[string]string{}}
	for id := range b {
		s.origin[id] = OriginBuiltin
	}
	for _, id := range sortedProfileKeys(extra) {
		p := extra[id]
		p.ID = id
		if !ValidID(id) {
			return nil, &FieldError{Profile: id, Field: "", Msg: "invalid program id (lowercase letters, digits, . _ -; at most 64)"}
		}
		if id == Generic {
			return nil, &FieldError{Profile: id, Field: "", Msg: "the generic profile cannot be replaced"}
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		s.byID[id] = p.clone()
		s.origin[id] = OriginConfig
	}
	for _, id := range s.IDs() {
		for i, e := range s.byID[id].Executables {
			if other, ok := s.byExe[e]; ok && other != id {
				return nil, &FieldError{Profile: id, Field: fmt.Sprintf("executables[%d]", i),
					Msg: fmt.Sprintf("%q is already claimed by profile %s", e, other)}
			}
			s.byExe[e] = id
		}
	}
	return s, nil
}

func sortedProfileKeys(m map[string]Profile) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// IDs lists the profiles' IDs, sorted.
func (s *Set) IDs() []string {
	ids := make([]string, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Get returns the profile with the given ID, or nil.
func (s *Set) Get(id string) *Profile {
	if p := s.byID[id]; p != nil {
		return p.clone()
	}
	return nil
}

// Origin returns where profile id comes from (OriginBuiltin or OriginConfig).
func (s *Set) Origin(id string) string { return s.origin[id] }

// Resolve returns the profile for the program a user named (`claude`, or a path whose base
// name is claude); a program no profile answers to gets the generic profile.
func (s *Set) Resolve(program string) *Profile {
	if id, ok := s.byExe[filepath.Base(program)]; ok {
		return s.byID[id].clone()
	}
	return s.byID[Generic].clone()
}

// WorkspaceConfig returns the union of every profile's workspace configuration, cleaned,
// de-duplicated and sorted. Every box pins all of it read-only, whatever program it runs,
// so that a boxed session of one harness cannot plant configuration another will trust.
func (s *Set) WorkspaceConfig() []string {
	return s.union(func(p *Profile) []string { return p.WorkspaceConfig }, false)
}

// WorkspaceInstructions returns the union of every profile's instruction and prompt files,
// cleaned, de-duplicated and sorted (writable in every box unless protect.instructions is
// readonly).
func (s *Set) WorkspaceInstructions() []string {
	return s.union(func(p *Profile) []string { return p.WorkspaceInstructions }, false)
}

// union returns the union over every profile of what list selects, cleaned, de-duplicated and
// sorted; with dirsOnly, only the entries written with a trailing slash (directories).
func (s *Set) union(list func(*Profile) []string, dirsOnly bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range s.IDs() {
		for _, w := range list(s.byID[id]) {
			c := filepath.Clean(w)
			if dirsOnly && !strings.HasSuffix(w, "/") || seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// HarnessHomes returns the home-relative directories that hold a harness's state or
// configuration (every home entry of every profile, reduced to its harness directory under
// $HOME: ".claude", ".copilot", ".config/opencode", ".local/share/opencode"), sorted. No
// workspace may be inside one.
func (s *Set) HarnessHomes() []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range s.IDs() {
		for _, h := range s.byID[id].Home {
			if !h.grants() && h.Access != AccessState && h.Access != AccessLink {
				continue
			}
			c := harnessDir(filepath.Clean(h.Path))
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// HomeEntryFolders returns the home-relative folders that hold a home entry of some profile
// beneath its harness home (".claude" for ".claude/settings.json", ".gemini/agentbox-trust";
// none for a harness home itself: ".cache" for ".cache/copilot" is not one), sorted: the
// workspace rule looks for symlinks among their entries (plan.FindConfigLinks).
func (s *Set) HomeEntryFolders() []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range s.IDs() {
		for _, h := range s.byID[id].Home {
			c := filepath.Clean(h.Path)
			if harnessDir(c) == c {
				continue // a harness home itself: the workspace rule resolves it (plan.CheckWorkspace)
			}
			d := filepath.Dir(c)
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// harnessDir reduces a home-relative path to the harness directory that holds it: its first
// component, or the harness's folder inside a folder harnesses share (.config/X, .cache/X,
// .local/share/X, .local/state/X).
func harnessDir(p string) string {
	parts := strings.Split(p, "/")
	n := 1
	switch {
	case parts[0] == ".config" || parts[0] == ".cache":
		n = 2
	case parts[0] == ".local" && len(parts) > 1 && (parts[1] == "share" || parts[1] == "state"):
		n = 3
	}
	return filepath.Join(parts[:min(n, len(parts))]...)
}

// WorkspaceConfigDirs returns the entries of WorkspaceConfig that are directories (written
// with a trailing slash in a profile: ".opencode/"), for the placeholder an absent one needs.
func (s *Set) WorkspaceConfigDirs() []string {
	return s.union(func(p *Profile) []string { return p.WorkspaceConfig }, true)
}

// WorkspaceInstructionDirs returns the entries of WorkspaceInstructions that are directories.
func (s *Set) WorkspaceInstructionDirs() []string {
	return s.union(func(p *Profile) []string { return p.WorkspaceInstructions }, true)
}
