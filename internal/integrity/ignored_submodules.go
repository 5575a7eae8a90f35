package integrity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// hiddenSubmodules returns the paths (relative to top) of the submodules of the work tree top
// whose untracked files its git status does not show: their effective ignore setting is
// untracked, dirty or all. It is the repository's configuration (submodule.NAME.ignore) over
// the .gitmodules file's, over diff.ignoreSubmodules — the first two read for the workspace's
// own repository only (its configuration is pinned, or out of the box's reach); a nested
// superproject's (private) is the box's, and only its .gitmodules is read. A project whose
// .gitmodules sets ignore = untracked for vendored code that builds in place had a box's new
// test file there neither taken nor named, and the host's go test ./... ran it (review 17,
// F9). .gitmodules is read beneath top, a regular file only, without waiting on a FIFO.
func hiddenSubmodules(ctx context.Context, top string, private bool) (map[string]bool, error) {
	ignores, err := submoduleIgnores(ctx, top, private)
	if err != nil {
		return nil, err
	}
	hides := map[string]bool{}
	for p, v := range ignores {
		switch v {
		case "untracked", "dirty", "all":
			hides[p] = true
		}
	}
	return hides, nil
}

// submoduleIgnores returns the effective ignore setting (lower case; "" when none is set) of
// each submodule .gitmodules names beneath the work tree top, by its path relative to top:
// the rules of hiddenSubmodules. Those whose setting is dirty or all have their tracked files'
// changes hidden from the superproject's git status as well (verifyHiddenEdits).
func submoduleIgnores(ctx context.Context, top string, private bool) (map[string]string, error) {
	b, err := readBeneath(top, filepath.Join(top, ".gitmodules"), maxCheckedFile)
	if errors.Is(err, os.ErrNotExist) {
		b = nil
	} else if err != nil {
		return nil, fmt.Errorf(".gitmodules: %w", err)
	}
	env := hostGitEnv()
	// getRegexp returns git config's key → value for the keys matching re (-z: "key\nvalue\0").
	getRegexp := func(args ...string) (map[string]string, error) {
		out, err := readGit(ctx, top, env, append(append([]string{"config", "-z"}, args...), "--get-regexp", `^submodule\..*\.(path|ignore)$|^diff\.ignoresubmodules$`)...)
		if err != nil && strings.Contains(err.Error(), ": exit status 1:") { // readGit's
			return nil, nil // no key matched
		}
		if err != nil {
			return nil, err
		}
		kv := map[string]string{}
		for e := range bytes.SplitSeq(out, []byte{0}) {
			if k, v, ok := bytes.Cut(e, []byte("\n")); ok {
				kv[string(k)] = string(v)
			}
		}
		return kv, nil
	}
	gm := map[string]string{}
	if len(b) > 0 {
		f, err := os.CreateTemp("", "agentbox-gitmodules-")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		_, werr := f.Write(b)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, werr
		}
		if gm, err = getRegexp("--file", f.Name()); err != nil {
			return nil, fmt.Errorf(".gitmodules: %w", err)
		}
	}
	var own map[string]string
	if !private {
		if own, err = getRegexp(); err != nil {
			return nil, err
		}
	}
	// name → path, from .gitmodules (the repository's configuration names no path).
	ignores := map[string]string{}
	for k, p := range gm {
		name, ok := strings.CutPrefix(k, "submodule.")
		if name, ok = strings.CutSuffix(name, ".path"); !ok || p == "" {
			continue
		}
		v, set := own["submodule."+name+".ignore"]
		if !set {
			v, set = gm["submodule."+name+".ignore"]
		}
		if !set {
			v = own["diff.ignoresubmodules"]
		}
		ignores[filepath.Clean(filepath.FromSlash(p))] = strings.ToLower(strings.TrimSpace(v))
	}
	return ignores, nil
}
