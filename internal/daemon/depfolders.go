package daemon

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// Bounds of the search for projects below the workspace's top (dependencyFolders). Past them
// a dependency folder is not the box's own: the box writes it in place, and the check at exit
// moves aside one that appeared and one in which anything was written while the box ran
// (integrity.State.VerifyExit; docs/toolchains.md).
const (
	depProjectDepth = 4    // folders below the top looked into: ws/a … ws/a/b/c/d
	depProjectDirs  = 2048 // folders looked into at most
	depFoldersMax   = 64   // dependency folders made the box's own at most
)

// dependencyFolders returns the dependency folders of the projects in workspace ws that a box
// gets as its own (docs/toolchains.md, "Dependency folders are the box's own"): for each
// project folder — the top, the start folder cwd, and the folders up to depProjectDepth
// below the top, hidden ones and dependency folders excepted, at most depProjectDirs of them
// — each integrity.DepFolderKinds folder that is there as a folder (target/ only beside a
// Cargo.toml), or that is absent while a marker is, and each folder in it that is a Python
// virtualenv, whatever its name (it holds a pyvenv.cfg: venv/, env/, .env/); and, within the
// same bounds, after them, the virtualenvs in the hidden folders met on the way, at any depth
// (direnv's .direnv/python-3.X, tox's .tox/py3X, nox's .nox/*: review 14, F7). A name there
// that is a symlink or a file is left out: the box sees it as the host has it. At most
// depFoldersMax are returned: those on the host that hold anything first (the host's installs,
// which the box would otherwise write in place), then the empty ones, then the absent ones,
// each the shallowest first, so that the empty folders a box leaves never push the host's out
// (review 14, F4); past are the others, in that order. The result is sorted and has no
// duplicate.
func dependencyFolders(ws, cwd string) (out, past []string, cut bool) {
	var present, absent, hidden []string
	seen := map[string]bool{}
	add := func(p string, there bool) {
		if seen[p] {
			return
		}
		seen[p] = true
		if there {
			present = append(present, p)
		} else {
			absent = append(absent, p)
		}
	}
	// project adds dir's dependency folders, from its entries (one listing each: the search
	// runs at every launch). listed says that its subfolders are listed in turn (the next
	// level), where a virtualenv is told by its own entries; the others' are looked at here.
	project := func(dir string, ents []os.DirEntry, listed bool) {
		types := make(map[string]os.FileMode, len(ents))
		for _, e := range ents {
			types[e.Name()] = e.Type()
		}
		for _, k := range integrity.DepFolderKinds {
			if k.Name == "" {
				continue
			}
			t, there := types[k.Name]
			if there && !t.IsDir() {
				continue // a symlink or a file: as the host has it
			}
			marked := slices.ContainsFunc(k.Markers, func(m string) bool {
				t, ok := types[m]
				return ok && t.IsRegular()
			})
			if marked || k.Always && there {
				add(filepath.Join(dir, k.Name), there)
			}
		}
		for _, e := range ents {
			if !e.IsDir() || isDepFolderName(e.Name()) || listed && descend(e.Name()) {
				continue
			}
			if st, err := os.Lstat(filepath.Join(dir, e.Name(), integrity.VenvMarker)); err == nil && st.Mode().IsRegular() {
				add(filepath.Join(dir, e.Name()), true)
			}
		}
	}
	if cwd != ws && plan.Within(cwd, ws) {
		if ents, err := os.ReadDir(cwd); err == nil {
			project(cwd, ents, false)
		}
	}
	level, visited := []string{ws}, 0
	for depth := 0; depth <= depProjectDepth && len(level) > 0; depth++ {
		var next []string
		for _, d := range level {
			ents, err := os.ReadDir(d)
			if err != nil {
				continue
			}
			if d != ws && integrity.IsVenv(ents) {
				add(d, true) // a virtualenv: not a project, nothing to look into
				continue
			}
			listed := depth < depProjectDepth
			for _, e := range ents {
				if listed && e.IsDir() && e.Name() != ".git" && strings.HasPrefix(e.Name(), ".") && !isDepFolderName(e.Name()) {
					hidden = append(hidden, filepath.Join(d, e.Name()))
				}
				if !listed || !e.IsDir() || !descend(e.Name()) {
					continue
				}
				if visited >= depProjectDirs {
					listed, cut = false, true // the rest of d's subfolders are looked at by project
					break
				}
				visited++
				next = append(next, filepath.Join(d, e.Name()))
			}
			project(d, ents, listed)
		}
		level = next
	}
	// The hidden folders, for virtualenvs alone (not looked into: .git, node_modules, target),
	// as deep as project() looks for one, within what is left of the bound.
	top := strings.Count(ws, "/")
	for len(hidden) > 0 && !cut {
		d := hidden[0]
		hidden = hidden[1:]
		if visited >= depProjectDirs {
			cut = true
			break
		}
		visited++
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		if integrity.IsVenv(ents) {
			add(d, true)
			continue
		}
		for _, e := range ents {
			if e.IsDir() && e.Name() != ".git" && (e.Name() == ".venv" || !isDepFolderName(e.Name())) && strings.Count(d, "/")-top <= depProjectDepth {
				hidden = append(hidden, filepath.Join(d, e.Name()))
			}
		}
	}
	// Those on the host that hold anything first (the host's own installs, which the box would
	// otherwise write in place), then the empty ones, then the placeholders; the shallowest
	// first.
	byDepth := func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "/"), strings.Count(b, "/")), strings.Compare(a, b))
	}
	var empty []string
	present = slices.DeleteFunc(present, func(p string) bool {
		if holdsAnything(p) {
			return false
		}
		empty = append(empty, p)
		return true
	})
	slices.SortFunc(present, byDepth)
	slices.SortFunc(empty, byDepth)
	slices.SortFunc(absent, byDepth)
	out = slices.Concat(present, empty, absent)
	if len(out) > depFoldersMax {
		past = out[depFoldersMax:]
		out = out[:depFoldersMax:depFoldersMax]
	}
	slices.Sort(out)
	return out, past, cut
}

// holdsAnything reports whether p is a folder (not followed if a symlink) with an entry.
func holdsAnything(p string) bool {
	if !isPlainDir(p) {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) > 0
}

// descend reports whether the search for projects looks into a subfolder of this name: not a
// hidden one, not a dependency folder.
func descend(name string) bool {
	return !strings.HasPrefix(name, ".") && !isDepFolderName(name)
}

func isDepFolderName(name string) bool {
	return slices.ContainsFunc(integrity.DepFolderKinds, func(k integrity.DepFolderKind) bool { return k.Name != "" && k.Name == name })
}

// depFolderLayer names the box cache's layers of the dependency folder rel (relative to the
// workspace): "dep-" and the first 8 bytes of its SHA-256, in hex, and its name.
func depFolderLayer(rel string) string {
	sum := sha256.Sum256([]byte(rel))
	return "dep-" + hex.EncodeToString(sum[:8]) + "-" + filepath.Base(rel)
}

// dependencyOverlays makes each of the workspace's dependency folders (dependencyFolders) the
// box's own: an overlay of the host's folder (read, never written) under the box cache's layer
// for it, where the box's npm ci, pip install and cargo write, and the host's tools never
// look. A folder absent on the host gets a placeholder while launch id's box runs (an empty
// folder, the overlay's mount point: the box's writes never reach it, and the last box of the
// workspace to end removes it); it is held in the integrity broker's registry, which releases
// it with the launch's other placeholders.
// Past depFoldersMax, the rest are not the box's own, and the notice returned says so.
func (d *Daemon) dependencyOverlays(id, ws, cwd string, facts plan.WorkspaceFacts, c *plan.Contributions) (notice string, err error) {
	return d.overlayDepFolders(id, ws, d.findDepFolders(ws, cwd), facts, c)
}

// launchDepFolders are a launch's dependency folders (findDepFolders): folders are made the
// box's own, past are not (beyond depFoldersMax), and cut says the search's bound was reached.
type launchDepFolders struct {
	folders, past []string
	cut           bool
}

// findDepFolders returns the dependency folders of workspace ws for a launch starting in cwd
// (dependencyFolders), with those earlier launches found (rememberDepFolders). It is what the
// launch overlays (overlayDepFolders) and what its PATH rule exempts (outsideDepFolders):
// found once, before the rule, for both.
func (d *Daemon) findDepFolders(ws, cwd string) launchDepFolders {
	folders, past, cut := dependencyFolders(ws, cwd)
	// The folders earlier launches found are the box's own too, should the search no longer
	// reach them: a box can make thousands of empty folders, which git status never shows,
	// so that the next launch's bounded search ends before the host's node_modules (review 13,
	// F2).
	known := filepath.Join(d.stateDir, knownDepFoldersDir, filepath.Base(boxCache(d.stateDir, ws)))
	return launchDepFolders{folders: d.rememberDepFolders(known, ws, folders), past: past, cut: cut}
}

// overlayDepFolders is dependencyOverlays for the folders found.
func (d *Daemon) overlayDepFolders(id, ws string, found launchDepFolders, facts plan.WorkspaceFacts, c *plan.Contributions) (notice string, err error) {
	folders, past, cut := found.folders, found.past, found.cut
	if cut {
		notice = fmt.Sprintf("agentbox: the workspace has more folders than the %d the launch looks into for dependency folders (node_modules, virtualenvs, target): "+
			"those it did not reach, and no earlier launch found, are not the box's own (the box writes them in place); start the box in a project folder (--workspace DIR)", depProjectDirs)
		d.log.Warn("dependency folders: the search's bound was reached", "launch", id, "bound", depProjectDirs)
	}
	past = slices.DeleteFunc(past, func(p string) bool { return slices.Contains(folders, p) })
	if left := len(past); left > 0 {
		// The host's own folders among them (those that hold anything) are named: the box
		// writes them in place, and the host's tools run what it leaves there.
		var host []string
		for _, p := range past {
			if rel, err := filepath.Rel(ws, p); err == nil && holdsAnything(p) {
				host = append(host, rel)
			}
		}
		written := ""
		if len(host) > 0 {
			written = ", among them the host's own " + strings.Join(host[:min(len(host), 3)], ", ")
			if len(host) > 3 {
				written += fmt.Sprintf(" and %d more", len(host)-3)
			}
			written += ", which the host's tools run"
		}
		notice = strings.TrimPrefix(notice+"\n", "\n") + fmt.Sprintf("agentbox: %d of the workspace's dependency folders (node_modules, virtualenvs, target) are not the box's own (at most %d are): "+
			"the box writes them in place%s, and one it makes is moved aside when it ends; start the box in a project folder (--workspace DIR) to have its own", left, depFoldersMax, written)
		d.log.Warn("dependency folders: past the bound", "launch", id, "left", left, "bound", depFoldersMax, "host", host)
	}
	if len(folders) == 0 {
		return notice, nil
	}
	var phs []integrity.Placeholder
	for _, p := range folders {
		phs = append(phs, integrity.Placeholder{Path: p, Dir: true, Beneath: ws})
	}
	if _, err := d.integrity.reg.Hold(id, phs); err != nil {
		return notice, fmt.Errorf("dependency folders: %w", err)
	}
	d.integrity.ownDepFolders(id, folders)
	var caches []packageCache
	for _, p := range folders {
		if !isPlainDir(p) {
			// Replaced by a symlink or a file since it was looked at: without its overlay the
			// box would write the host's folder.
			return notice, fmt.Errorf("dependency folder %s is no longer a folder; run the launch again", p)
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return notice, err
		}
		caches = append(caches, packageCache{name: depFolderLayer(rel), dir: p, workspace: ws})
	}
	cache, err := makeBoxCache(d.stateDir, ws)
	if err != nil {
		return notice, err
	}
	// The folders between the workspace's top and each dependency folder are pinned, before
	// the overlays: renaming its project folder away would otherwise carry the overlay with it,
	// and leave the path to a folder the box makes, on the host (review 13, F3).
	c.Mounts = append(c.Mounts, plan.PinParents(folders, ws, c.Mounts)...)
	return notice, cacheOverlays(cache, id, caches, nil, facts, nil, c)
}

// knownDepFoldersDir is the folder of the daemon's state where each workspace's dependency
// folders, as launches found them on the host, are remembered (one file per workspace, named
// as its box cache; never in a box).
const knownDepFoldersDir = "depfolders"

// maxKnownDepFolders bounds a workspace's remembered dependency folders; the first found are
// kept.
const maxKnownDepFolders = 128

// rememberDepFolders returns found with the folders the file known lists (relative to ws) that
// are folders on the host now and hold anything, and records in known those, then the ones of
// found that are such folders (not the placeholders a launch makes, nor the empty folders a box
// leaves, which would take the places of the host's: review 14, F4), the earliest first, at
// most maxKnownDepFolders. A file that cannot be read or written loses the memory, not the
// launch: it is logged.
func (d *Daemon) rememberDepFolders(known, ws string, found []string) []string {
	var keep []string
	was, err := os.ReadFile(known)
	if err == nil {
		for _, rel := range strings.Split(string(was), "\n") {
			p := filepath.Join(ws, rel)
			if rel != "" && filepath.IsLocal(rel) && holdsAnything(p) && !slices.Contains(keep, p) {
				keep = append(keep, p)
			}
		}
	} else if !os.IsNotExist(err) {
		d.log.Warn("dependency folders: the earlier launches' list is not read", "file", known, "err", err)
	}
	out := slices.Clone(found)
	for _, p := range keep {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range found {
		if len(keep) < maxKnownDepFolders && !slices.Contains(keep, p) && holdsAnything(p) {
			keep = append(keep, p)
		}
	}
	var b strings.Builder
	for _, p := range keep {
		rel, err := filepath.Rel(ws, p)
		if err == nil {
			b.WriteString(rel + "\n")
		}
	}
	// Written only when it changed (a missing file is an empty list): the write is two fsyncs
	// on the launch's path (the file and its folder), every launch of a workspace otherwise.
	if b.String() != string(was) {
		if err := os.MkdirAll(filepath.Dir(known), 0o700); err != nil {
			d.log.Warn("dependency folders: the list is not kept", "file", known, "err", err)
		} else if err := atomicfile.WriteFile(known, []byte(b.String()), 0o600); err != nil {
			d.log.Warn("dependency folders: the list is not kept", "file", known, "err", err)
		}
	}
	slices.Sort(out)
	return out
}
