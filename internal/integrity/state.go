package integrity

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// State is what the watch last saw of one launch: every root, and the executable
// configuration found in the workspace. It starts as the snapshot taken before the box spawns;
// each transition moves it on, so a reversal is another transition and nothing is reported
// twice. It is saved in the launch directory so that a restarted daemon continues from it.
type State struct {
	Workspace string      `json:"workspace"`
	Limits    Limits      `json:"limits"`
	Roots     []RootState `json:"roots"`
	// Exec is the executable configuration found outside the roots, by path.
	Exec map[string]string `json:"exec"`
	// Notes are what Resolve could not pin (reported at launch).
	Notes []string `json:"notes,omitempty"`
}

// Snapshot records the roots of lay and scans the workspace for executable configuration.
func Snapshot(lay *Layout, lim Limits) *State {
	s := &State{Workspace: lay.Workspace, Limits: lim, Notes: lay.Notes}
	s.Roots = Take(lay.Roots, lim)
	// An incomplete scan here shows in the check at exit, which rescans (VerifyExec).
	s.Exec, _ = ScanExec(lay.Workspace, s.rootSet(), lim)
	return s
}

func (s *State) rootSet() map[string]bool {
	m := make(map[string]bool, len(s.Roots))
	for _, r := range s.Roots {
		m[r.Path] = true
	}
	return m
}

// VerifyRoots compares every root with what was seen last and returns the transitions.
func (s *State) VerifyRoots() []Transition {
	var out []Transition
	roots := make([]Root, len(s.Roots))
	for i, r := range s.Roots {
		roots[i] = r.Root
	}
	cur := take(roots, s.Roots, s.Limits)
	for i := range cur {
		if t, ok := compare(s.Roots[i], cur[i]); ok {
			out = append(out, t)
			s.Roots[i] = cur[i]
		}
	}
	return out
}

// VerifyExec rescans the whole workspace for executable configuration (bounded) and returns
// what appeared, changed or went. A scan that reached its bound is a transition of its own
// (on the workspace, every time): what lies in the folders it did not check is unknown.
func (s *State) VerifyExec() []Transition {
	found, notChecked := ScanExec(s.Workspace, s.rootSet(), s.Limits)
	out := s.mergeExec(found, func(path string) bool { return true })
	if notChecked > 0 {
		out = append(out, Transition{Kind: Modified, Path: s.Workspace, Alert: true, Detail: fmt.Sprintf(
			"scan incomplete: %d folders not checked (the scan stops after %d folders); executable configuration in them was not looked for",
			notChecked, s.Limits.withDefaults().ScanDirs)})
	}
	return out
}

// VerifyExecIn rescans the given directories (not their subdirectories, except those new to
// the scan, which the caller passes too) and returns the transitions of findings owned by them.
func (s *State) VerifyExecIn(dirs []string) []Transition {
	found := map[string]string{}
	set := map[string]bool{}
	skip := s.rootSet()
	for _, d := range dirs {
		set[d] = true
		scanDir(s.Workspace, d, skip, found)
	}
	return s.mergeExec(found, func(path string) bool { return set[ownerDir(path)] })
}

// ownerDir is the directory whose scan finds path: X for X/.envrc and for everything in X/.git
// (config files, hooks, submodule and worktree gitdirs), and a bare repository X for X/config
// and X/hooks/*.
func ownerDir(path string) string {
	if i := strings.Index(path, "/.git/"); i >= 0 {
		return path[:i]
	}
	d := filepath.Dir(path)
	switch filepath.Base(d) {
	case ".git":
		return filepath.Dir(d)
	case "hooks":
		return filepath.Dir(d)
	}
	return d
}

func (s *State) mergeExec(found map[string]string, owned func(string) bool) []Transition {
	if s.Exec == nil {
		s.Exec = map[string]string{}
	}
	var out []Transition
	for p, d := range found {
		old, had := s.Exec[p]
		kind := Created
		switch {
		case !had:
		case old != d:
			kind = Modified
		default:
			continue
		}
		if movable(p) {
			// New or changed since the snapshot: what the host's git would run is the box's
			// (or was written while a box ran). It is moved aside, never deleted.
			aside, err := moveAside(s.Workspace, p)
			if err == nil {
				out = append(out, Transition{Kind: kind, Path: p, Detail: d + "; moved aside to " + aside, Alert: true})
				delete(s.Exec, p)
				continue
			}
			d += "; could not be moved aside: " + err.Error()
		}
		out = append(out, Transition{Kind: kind, Path: p, Detail: d, Alert: true})
		s.Exec[p] = d
	}
	for p, d := range s.Exec {
		if _, ok := found[p]; !ok && owned(p) {
			if _, err := os.Lstat(p); err == nil && isConfig(p) {
				// Still there but no longer executable.
				out = append(out, Transition{Kind: Modified, Path: p, Detail: "no executable configuration left (was: " + d + ")", Alert: true})
			} else {
				out = append(out, Transition{Kind: Removed, Path: p, Detail: d, Alert: true})
			}
			delete(s.Exec, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// movable reports whether a finding at p is moved aside when new or changed: git's
// configuration and hooks are; an .envrc is not (direnv runs none it was not allowed to,
// and asks again when one changes).
func movable(p string) bool {
	return filepath.Base(p) != ".envrc"
}

func isConfig(p string) bool {
	b := filepath.Base(p)
	return b == "config" || b == "config.worktree"
}

// Save writes the state to path atomically (0600).
func (s *State) Save(path string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("integrity: save state: %w", err)
	}
	return nil
}

// Load reads a state saved by Save.
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("integrity: load state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("integrity: load state %s: %w", path, err)
	}
	return &s, nil
}
