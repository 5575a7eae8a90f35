// Package hostprog finds the programs agentbox runs on the host, outside any box (git, go,
// bwrap, a credential helper): each by an absolute path, looked up once through the process's
// PATH and never again, so that what a box writes later cannot take a name's place.
//
// A program found by name in a process that outlives the shell which started it (the daemon)
// was found through that shell's PATH at each run: a workspace folder on it (direnv's PATH_add
// bin) let a box plant bin/git, which the daemon's check at exit ran on the host, unboxed, as
// the user (review 18, F1). Found once, the answer stays; and the daemon refuses a workspace
// that holds, is or is inside a folder of its own PATH, or holds a program found here
// (plan.CheckHostPath), so that no box writes where a later look-up could go.
package hostprog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Program is a host program found by name.
type Program struct {
	Name string // as asked for ("git")
	Path string // where the PATH led ("/usr/bin/git"): absolute
	Real string // Path with its symlinks resolved: the file that runs
}

var (
	mu    sync.Mutex
	found = map[key]Program{}
)

// key is a look-up: the name and the PATH it was looked up through. A process's PATH does
// not change (the daemon never sets it), so a name is looked up once; a test that sets PATH
// gets the answer for its own.
type key struct{ name, path string }

// Find returns the program name (a bare name, or an absolute path, taken as it is and
// recorded as well) as found
// through this process's PATH the first time it was found, looking it up only then: the
// first executable regular file named so in an absolute PATH entry. A relative or empty PATH
// entry names the current folder, whatever it is at the time, and is passed over. A name not
// found is looked up again at the next call (the user may install it meanwhile); the error
// names the PATH looked through.
func Find(name string) (Program, error) {
	if name == "" {
		return Program{}, errors.New("no program named")
	}
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		return Program{}, fmt.Errorf("program %q: a relative path; name it by an absolute path or by a bare name found on PATH", name)
	}
	k := key{name, os.Getenv("PATH")}
	mu.Lock()
	defer mu.Unlock()
	if p, ok := found[k]; ok {
		return p, nil
	}
	if filepath.IsAbs(name) {
		// Named by its path: recorded, for Found, as one the process runs.
		p, err := program(name, name)
		if err == nil {
			found[k] = p
		}
		return p, err
	}
	for _, dir := range filepath.SplitList(k.path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p, err := program(name, filepath.Join(dir, name))
		if err == nil {
			found[k] = p
			return p, nil
		}
	}
	return Program{}, fmt.Errorf("%s: %w in the absolute folders of PATH (%s)", name, exec.ErrNotFound, k.path)
}

// program returns name found at path, an executable regular file (through its symlinks).
func program(name, path string) (Program, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Program{}, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return Program{}, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return Program{}, fmt.Errorf("%s: not an executable file", path)
	}
	return Program{Name: name, Path: filepath.Clean(path), Real: real}, nil
}

// Path returns the absolute path of the program name (Find).
func Path(name string) (string, error) {
	p, err := Find(name)
	return p.Path, err
}

// Command is exec.CommandContext for the program name found by Find. A name not found gives a
// command whose Start, Run or Output returns the reason, as exec.Command's does.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	p, err := Find(name)
	if err != nil {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Err = err
		return cmd
	}
	return p.Command(ctx, args...)
}

// Command is exec.CommandContext for p, found already: it runs p.Path, with p.Name as its
// argument 0, and looks nothing up.
func (p Program) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.Path, args...)
	cmd.Args[0] = p.Name
	return cmd
}

// Found returns the programs found so far through the PATH the process has now, by name.
func Found() []Program {
	path := os.Getenv("PATH")
	mu.Lock()
	defer mu.Unlock()
	var out []Program
	for k, p := range found {
		if k.path == path {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Program) int { return strings.Compare(a.Name, b.Name) })
	return out
}
