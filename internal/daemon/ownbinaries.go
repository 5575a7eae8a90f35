package daemon

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/boxhelper"
	"github.com/agentbox/agentbox/internal/plan"
)

// ownBinaryPins protects agentbox's own binaries from a box whose workspace holds them (a
// checkout that builds agentbox, run as ./bin/agentbox, is commonly its own workspace): a box
// that replaced bin/agentbox would have the user run its program on the host at the next
// command, and one that planted the box helper beside it would have the next daemon check and
// start it (build info can be forged by a box with a Go toolchain). Of the daemon's executable
// exe (the daemon binary), the CLI beside it, and the helper boxhelper.OpenBinary would pick (helper, the
// one the daemon uses, "" if none), those inside the workspace ws are returned:
//
//   - pins: existing regular files, bound read-only in the box by plan.ProtectMounts, their
//     folders up to the workspace made mount points so that they cannot be renamed away; the
//     box runs them, but cannot write, replace or remove them. They are not integrity roots:
//     the box cannot change them, and a rebuild on the host is no drift.
//   - extra: paths for the integrity registry (Registry.Prepare's extra): a binary that is a
//     symlink (its target is pinned when it stays in the workspace) and every place the daemon
//     looks for its helper, and a pinned CLI for its daemon binary, that comes before the one
//     that exists (all of them when none does), so that each gets a placeholder while the box
//     runs and the box cannot create a binary a later daemon or CLI would take.
func ownBinaryPins(ws, exe, helper string) (pins []plan.Protected, extra []string) {
	ws = filepath.Clean(ws)
	if ws == "" || !filepath.IsAbs(ws) {
		return nil, nil
	}
	inside := func(p string) bool { return strings.HasPrefix(p, ws+string(filepath.Separator)) }
	seen := map[string]bool{}
	add := func(p string) (exists bool) {
		p = filepath.Clean(p)
		fi, err := os.Lstat(p)
		if err != nil {
			return false
		}
		if seen[p] || !inside(p) {
			return true
		}
		seen[p] = true
		switch {
		case fi.Mode().IsRegular():
			pins = append(pins, plan.Protected{Path: p, Beneath: ws})
		case fi.Mode()&os.ModeSymlink != 0:
			extra = append(extra, p)
		}
		return true
	}
	if exe != "" {
		add(exe)
	}
	if helper != "" {
		add(helper)
	}
	if exe == "" {
		return pins, extra
	}
	// The CLI that runs this daemon binary: beside it (a checkout's bin/), or in ../../bin/
	// when the daemon is in libexec/agentbox/. Such a CLI runs the first daemon binary it finds
	// (beside itself, then in ../libexec/agentbox/): every place it would look before the one
	// that exists gets a placeholder, so that a box cannot plant a daemon binary the CLI would
	// run on the host in place of this one.
	if clis, err := boxhelper.CLICandidatesFor(exe); err == nil {
		// `wrap install` run by this daemon binary writes launchers that run the first CLI of
		// these that exists (boxhelper.FindCLI): the places before it get placeholders too.
		extra = append(extra, missingBefore(clis, inside, add)...)
		for _, cli := range clis {
			if !add(cli) || !inside(filepath.Clean(cli)) {
				continue
			}
			extra = append(extra, missingBefore(candidates(cli, boxhelper.DaemonName), inside, add)...)
		}
	}
	return pins, append(extra, missingBefore(candidates(exe, boxhelper.HelperName), inside, add)...)
}

// candidates returns where the binary of agentbox exe looks for its binary name
// (boxhelper.CandidatesFor), or nothing when exe cannot be resolved.
func candidates(exe, name string) []string {
	cands, err := boxhelper.CandidatesFor(exe, name)
	if err != nil {
		return nil
	}
	return cands
}

// missingBefore returns the places of cands (where a binary is looked for, in order) that lie
// inside the workspace and come before the first that exists, which add pins (when it is
// inside); all of them when none exists.
func missingBefore(cands []string, inside func(string) bool, add func(string) bool) []string {
	var missing []string
	for _, c := range cands {
		if add(c) {
			return missing // the first that exists is the one used
		}
		if inside(c) {
			missing = append(missing, c)
		}
	}
	return missing
}
