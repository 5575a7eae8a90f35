package wrap

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// Program is one managed program as the policy names it.
type Program struct {
	// Name is the command name (the launcher's file name).
	Name string
	// Vendor is the managed install's executable; "" means a PATH lookup that skips launchers.
	Vendor string
}

// ErrForeignFile means a launcher's place holds a file that is not an agentbox launcher (the
// vendor's own install, say): it is never replaced.
var ErrForeignFile = errors.New("not an agentbox launcher")

// Change is what Install or Uninstall did to one file.
type Change struct {
	Path   string `json:"path"`
	Action string `json:"action"` // "installed", "updated", "unchanged", "removed"
}

// Install renders a launcher for every program into prefix (created 0755 when missing), each
// running agentbox (an absolute path), and removes launchers in prefix for programs no longer
// listed, so the directory matches the policy. A file in a launcher's place that is not a
// launcher is never touched: Install fails with ErrForeignFile before changing anything.
func Install(prefix, agentbox string, progs []Program) ([]Change, error) {
	type planned struct {
		path string
		data []byte
	}
	var todo []planned
	for _, p := range progs {
		data, err := Render(Launcher{Name: p.Name, Agentbox: agentbox, Vendor: p.Vendor})
		if err != nil {
			return nil, err
		}
		path := filepath.Join(prefix, p.Name)
		if st, err := os.Lstat(path); err == nil && (!st.Mode().IsRegular() || !IsLauncher(path)) {
			return nil, fmt.Errorf("%s: %w; refusing to replace it (move the vendor's install elsewhere and name it in containment.programs[].path)", path, ErrForeignFile)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		todo = append(todo, planned{path, data})
	}
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	var changes []Change
	for _, p := range todo {
		old, err := os.ReadFile(p.path)
		action := "installed"
		switch {
		case err == nil && bytes.Equal(old, p.data):
			changes = append(changes, Change{p.path, "unchanged"})
			continue
		case err == nil:
			action = "updated"
		}
		if err := atomicfile.WriteFile(p.path, p.data, 0o755); err != nil {
			return changes, err
		}
		changes = append(changes, Change{p.path, action})
	}
	keep := map[string]bool{}
	for _, p := range progs {
		keep[p.Name] = true
	}
	stale, err := launchers(prefix)
	if err != nil {
		return changes, err
	}
	for _, path := range stale {
		if keep[filepath.Base(path)] {
			continue
		}
		if err := os.Remove(path); err != nil {
			return changes, err
		}
		changes = append(changes, Change{path, "removed"})
	}
	return changes, nil
}

// Uninstall removes every launcher in prefix (files carrying Header; nothing else). A prefix
// that does not exist holds none.
func Uninstall(prefix string) ([]Change, error) {
	paths, err := launchers(prefix)
	if err != nil {
		return nil, err
	}
	var changes []Change
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return changes, err
		}
		changes = append(changes, Change{p, "removed"})
	}
	return changes, nil
}

// launchers lists the launchers in dir, sorted.
func launchers(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if p := filepath.Join(dir, e.Name()); IsLauncher(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Status is the state of one managed program's launcher.
type Status struct {
	Name string `json:"name"`
	// Launcher is the launcher's path in the prefix.
	Launcher string `json:"launcher"`
	// State is "installed" (a current launcher), "stale" (a launcher with other contents),
	// "missing", or "foreign" (a file that is not a launcher).
	State string `json:"state"`
	// FirstOnPath says that the name, looked up on PATH as a shell does, finds this launcher.
	FirstOnPath bool `json:"firstOnPath"`
	// Found is what a shell runs for the name ("" when nothing).
	Found string `json:"found,omitempty"`
	// Vendor is the vendor's executable a launch would run: the policy's path, else the PATH
	// lookup that skips launchers ("" when none is found).
	Vendor string `json:"vendor,omitempty"`
}

// Check reports the launchers of progs in prefix against what Install would render, and what
// a shell with path (a PATH value) would run for each name.
func Check(prefix, agentbox string, progs []Program, path string) []Status {
	var out []Status
	for _, p := range progs {
		s := Status{Name: p.Name, Launcher: filepath.Join(prefix, p.Name), State: "missing", Vendor: p.Vendor}
		want, _ := Render(Launcher{Name: p.Name, Agentbox: agentbox, Vendor: p.Vendor})
		if st, err := os.Lstat(s.Launcher); err == nil {
			switch have, rerr := os.ReadFile(s.Launcher); {
			case !st.Mode().IsRegular() || !IsLauncher(s.Launcher):
				s.State = "foreign"
			case rerr == nil && bytes.Equal(have, want):
				s.State = "installed"
			default:
				s.State = "stale"
			}
		}
		s.Found = shellLookPath(p.Name, path)
		s.FirstOnPath = s.Found != "" && s.Found == s.Launcher
		if s.Vendor == "" {
			s.Vendor = LookPath(p.Name, path)
		}
		out = append(out, s)
	}
	return out
}

// shellLookPath is what a shell runs for name: the first executable regular file on path.
func shellLookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		c := filepath.Join(dir, name)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return c
		}
	}
	return ""
}
