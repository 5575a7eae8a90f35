// Package harnessstate keeps the box-owned state of each (workspace, profile) — conversation
// transcripts, resume indexes, trust decisions taken in a box — and synthesizes, at every
// launch, the harness state files a box starts from out of an allowlist of non-executable keys
// of the host's own files and of the box's copy.
//
// A state directory is written by boxes and read only by later boxes of the same workspace
// and profile (and by this package, through an os.Root, never following a link out of it). No
// unboxed program is pointed at it, and nothing in it is executable configuration: a seeded
// file is rewritten from its allowlist before every launch, so whatever else a box wrote into
// it (MCP servers, hooks, environment, helpers) is dropped.
package harnessstate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/profile"
)

// maxFile is the most of a harness state file that is read (the host's, or the box's copy).
// A larger file is treated as absent, so a box cannot make the daemon read without end.
const maxFile = 8 << 20

// Dir returns the box-owned state directory of workspace ws and profile id under agentbox's
// state directory stateRoot: stateRoot/boxes/<id>/<hash of ws>. It creates nothing.
func Dir(stateRoot, id, ws string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(ws)))
	return filepath.Join(stateRoot, "boxes", id, hex.EncodeToString(sum[:16]))
}

// Prepare makes p's state entries in dir (created 0700 when absent, with a note naming the
// workspace) and writes its seeded files afresh: each from the host's file of the same
// home-relative path under home and from the box's copy in dir, through the seed's allowlist.
// The mount points of the other entries in a state folder (the host's read-only paths, masks,
// private folders) are made empty. An entry a box replaced with something of another kind (a
// link, a FIFO, a folder for a file) is removed and made again.
func Prepare(dir string, p *profile.Profile, home, ws string) error {
	entries := p.StateEntries()
	if len(entries) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	defer root.Close()
	if err := writeFile(root, "workspace", []byte(filepath.Clean(ws)+"\n")); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := prepareEntry(root, e, home, ws); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, e.Rel), err)
		}
	}
	return nil
}

func prepareEntry(root *os.Root, e profile.StateEntry, home, ws string) error {
	if d := filepath.Dir(e.Rel); d != "." {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if e.Host {
		// The mount point of the host's path takes its kind, when the host has it.
		if st, err := os.Stat(filepath.Join(home, e.Rel)); err == nil {
			e.Dir = st.IsDir()
		}
	}
	st, err := root.Lstat(e.Rel)
	switch {
	case err == nil && e.Dir && st.IsDir(), err == nil && !e.Dir && st.Mode().IsRegular():
	case err == nil:
		// What a box left of another kind.
		if err := root.RemoveAll(e.Rel); err != nil {
			return err
		}
		err = fs.ErrNotExist
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if e.Dir {
			if err := root.Mkdir(e.Rel, 0o700); err != nil {
				return err
			}
		} else if err := writeFile(root, e.Rel, nil); err != nil {
			return err
		}
	default:
		return err
	}
	if e.MountPoint {
		return empty(root, e.Rel, e.Dir)
	}
	if e.Seed == "" {
		return nil
	}
	seed, ok := seeds[e.Seed]
	if !ok {
		return fmt.Errorf("no synthesizer %q", e.Seed)
	}
	hostRel := e.Rel
	if seed.host != "" {
		hostRel = seed.host
	}
	host := readHost(filepath.Join(home, hostRel))
	box := readBox(root, e.Rel)
	out, err := seed.make(host, box, filepath.Clean(ws))
	if err != nil {
		return err
	}
	return writeFile(root, e.Rel, out)
}

// empty empties the folder or file rel beneath root in place: it may be a mount point in the
// boxes of this workspace that run now, which a removal on the host would take away.
func empty(root *os.Root, rel string, dir bool) error {
	if !dir {
		return writeFile(root, rel, nil)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := root.RemoveAll(filepath.Join(rel, n)); err != nil {
			return err
		}
	}
	return nil
}

// A seed synthesizes one state file. make returns the file a launch starts from, given the
// host's file and the box's copy (nil when absent or unreadable) and the workspace; host is
// the home-relative path of the host's file it reads ("": the entry's own path).
type seed struct {
	host string
	make func(host, box []byte, ws string) ([]byte, error)
}

// seeds are the synthesizers by name (profile.Seeds).
var seeds = map[string]seed{
	profile.SeedClaudeConfig:     {make: claudeConfig},
	profile.SeedCodexConfig:      {make: codexConfig},
	profile.SeedCopilotMCPConfig: {make: copilotMCPConfig},
	// Gemini CLI reads the trust file where GEMINI_CLI_TRUSTED_FOLDERS_PATH points (the box's
	// own, in a state folder); the host's is ~/.gemini/trustedFolders.json.
	profile.SeedGeminiTrust: {host: ".gemini/trustedFolders.json", make: geminiTrust},
}

// readHost reads the user's own file (their symlinks are followed: no box can make one
// there); nil when absent, unreadable or larger than maxFile.
func readHost(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return readCapped(f)
}

// readBox reads the box's copy beneath root without following a link, and only a regular
// file; nil otherwise.
func readBox(root *os.Root, rel string) []byte {
	f, err := root.OpenFile(rel, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return readCapped(f)
}

func readCapped(r io.Reader) []byte {
	b, err := io.ReadAll(io.LimitReader(r, maxFile+1))
	if err != nil || len(b) > maxFile {
		return nil
	}
	return b
}

// writeFile writes b into rel beneath root in place (truncating it), never through a link
// and only into a regular file. In place, not by renaming a new file over it: the file is the
// source of a bind mount in the boxes of this workspace that run now, and a rename on the host
// would silently take their mount away.
func writeFile(root *os.Root, rel string, b []byte) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|openFlags, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file")
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
