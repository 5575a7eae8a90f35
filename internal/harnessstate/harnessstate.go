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
	"encoding/json"
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
//
// A host file a synthesizer reads but cannot read or parse counts as empty (the launch goes
// on: the box starts as a new user's would), and is returned as a Warning for the user, who
// would otherwise meet the trust dialog at every launch with nothing saying why.
func Prepare(dir string, p *profile.Profile, home, ws string) ([]Warning, error) {
	entries := p.StateEntries()
	if len(entries) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	defer root.Close()
	if err := writeFile(root, "workspace", []byte(filepath.Clean(ws)+"\n")); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	var warns []Warning
	for _, e := range entries {
		w, err := prepareEntry(dir, root, e, home, ws)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, e.Rel), err)
		}
		if w != nil {
			warns = append(warns, *w)
		}
	}
	return warns, nil
}

// A Warning says that the host's file File, which a synthesizer reads, could not be read or
// parsed (Err), so that nothing of it was carried into the box. What names what the file
// holds ("": its trust and preferences).
type Warning struct {
	File string
	Err  error
	What string
}

func (w Warning) String() string {
	what := w.What
	if what == "" {
		what = "the trust and preferences"
	}
	return fmt.Sprintf("%s could not be read (%v): the box does not carry %s it holds; fix or remove it", w.File, w.Err, what)
}

func prepareEntry(dir string, root *os.Root, e profile.StateEntry, home, ws string) (*Warning, error) {
	if d := filepath.Dir(e.Rel); d != "." {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return nil, err
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
			return nil, err
		}
		err = fs.ErrNotExist
		fallthrough
	case errors.Is(err, fs.ErrNotExist):
		if e.Dir {
			if err := root.Mkdir(e.Rel, 0o700); err != nil {
				return nil, err
			}
		} else if err := writeEntry(root, e, nil); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	if e.MountPoint {
		// In place: it may be a mount point in the boxes of this workspace that run now,
		// which a removal on the host would take away.
		if !e.Dir {
			return nil, writeMountPoint(root, e.Rel, []byte(e.Content))
		}
		return nil, emptyDir(root, e.Rel)
	}
	if e.Seed == "" {
		return nil, nil
	}
	seed, ok := seeds[e.Seed]
	if !ok {
		return nil, fmt.Errorf("no synthesizer %q", e.Seed)
	}
	if seed.edit != nil {
		return seed.edit(dir, root, e.Rel, home)
	}
	hostRel := e.Rel
	if seed.host != nil {
		hostRel = seed.host(home)
	}
	var host []byte
	var herr error
	hostPath := ""
	if hostRel != "" {
		hostPath = filepath.Join(home, hostRel)
		host, herr = readHost(hostPath)
	}
	if herr == nil && host != nil && seed.parse != nil {
		if herr = seed.parse(host); herr != nil {
			host = nil
		}
	}
	var warn *Warning
	if herr != nil {
		warn = &Warning{File: hostPath, Err: herr, What: seed.what}
	}
	box := readBox(root, e.Rel)
	if seed.formerly != "" {
		// Where an earlier agentbox kept the box's copy: read once, when this one holds
		// nothing yet, through the same allowlist, then removed (never through a link).
		if len(box) == 0 {
			box = readBox(root, seed.formerly)
		}
		if err := root.RemoveAll(seed.formerly); err != nil {
			return nil, err
		}
	}
	out, err := seed.make(host, box, filepath.Clean(ws))
	if err != nil {
		return nil, err
	}
	return warn, writeEntry(root, e, out)
}

// writeEntry makes the file of entry e hold b: in place when it may be a mount point in the
// boxes of the workspace that run now (writeFile: a mount point of a state folder, or a state
// file bound on its own, e.Alone), else by a new file renamed over the path,
// whatever is there. Such a file lies in a bound box-owned folder, which a running box of the
// workspace can write: one that put a FIFO there between the check of its kind and the write
// made the launch fail (ENXIO; review 20b, TestAttackClaudeConfigSwappedByRunningBox).
func writeEntry(root *os.Root, e profile.StateEntry, b []byte) error {
	if e.MountPoint || e.Alone {
		return writeFile(root, e.Rel, b)
	}
	err := replaceFile(root, e.Rel, b)
	if err == nil {
		return nil
	}
	// A folder there (a rename cannot replace one that holds anything): removed, then written
	// again. Anything else is left as it was and the error reported: a failure that is not the
	// box's doing (a full disk) must not lose what the box carried there.
	if st, lerr := root.Lstat(e.Rel); lerr != nil || !st.IsDir() {
		return err
	}
	if rerr := root.RemoveAll(e.Rel); rerr != nil {
		return errors.Join(err, rerr)
	}
	return replaceFile(root, e.Rel, b)
}

// writeMountPoint makes the file mount point rel beneath root hold b, in place (see
// writeFile), and leaves it without write bits (0400): it is bound read-only into the box,
// and a program that looks at the mode sees so. Claude Code 2.1.334 ignores its legacy config
// ~/.claude/.config.json only when that file is empty and has no write bit; with one, and no
// ~/.claude.json, it adopts the file. It is made writable for the owner only while it is
// rewritten, and not at all when it already holds b.
func writeMountPoint(root *os.Root, rel string, b []byte) error {
	if st, err := root.Lstat(rel); err == nil && st.Mode().IsRegular() && st.Size() == int64(len(b)) && st.Mode().Perm()&0o222 == 0 {
		if cur := readBox(root, rel); cur != nil && string(cur) == string(b) {
			return nil
		}
	}
	if err := root.Chmod(rel, 0o600); err != nil {
		return err
	}
	if err := writeFile(root, rel, b); err != nil {
		return err
	}
	return root.Chmod(rel, 0o400)
}

// emptyDir empties the folder rel beneath root in place.
func emptyDir(root *os.Root, rel string) error {
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
// host's file and the box's copy (nil when absent, unreadable or, for the host's, when parse
// refuses it) and the workspace; host returns the home-relative path of the host's file it
// reads, given the home ("": none; nil: the entry's own path); parse (nil: the seed reads nothing of the host's) says why the
// host's file cannot be read in its format, for the user's warning, and what names what that
// file holds ("": its trust and preferences). A seed with edit instead changes the box's file
// in place (a database the boxes of the workspace that run now have open), given the state
// directory, the entry and the home; it reads the host's file itself. formerly ("": none) is
// the state-relative path where an earlier agentbox kept the box's copy, which a box of the
// workspace may still have left there.
type seed struct {
	host     func(home string) string
	parse    func([]byte) error
	make     func(host, box []byte, ws string) ([]byte, error)
	what     string
	edit     func(dir string, root *os.Root, rel, home string) (*Warning, error)
	formerly string
}

// seeds are the synthesizers by name (profile.Seeds).
var seeds = map[string]seed{
	// The box's copy was ~/.claude.json itself, bound on its own, until session 20: now it is
	// in the state folder ~/.claude, where Claude Code's rename over it works.
	profile.SeedClaudeConfig:       {host: claudeHostConfig, parse: parseJSONObject, make: claudeConfig, formerly: ".claude.json"},
	profile.SeedCodexConfig:        {parse: func(b []byte) error { _, err := parseTOML(b); return err }, make: codexConfig},
	profile.SeedCopilotConfig:      {parse: func(b []byte) error { _, err := jsonc(b); return err }, make: copilotConfig},
	profile.SeedCopilotMCPConfig:   {make: copilotMCPConfig},
	profile.SeedCopilotPermissions: {parse: func(b []byte) error { _, err := jsonc(b); return err }, make: copilotPermissions, what: "the tool approvals"},
	// Gemini CLI reads the trust file where GEMINI_CLI_TRUSTED_FOLDERS_PATH points (the box's
	// own, in a state folder); the host's is ~/.gemini/trustedFolders.json.
	profile.SeedGeminiTrust:    {host: func(string) string { return ".gemini/trustedFolders.json" }, parse: parseJSONObject, make: geminiTrust},
	profile.SeedGeminiSettings: {parse: func(b []byte) error { _, err := jsonc(b); return err }, make: geminiSettings, what: "the settings"},
	profile.SeedOpenCodeDB:     {edit: openCodeDB},
}

// parseJSONObject says why b is not a JSON object (nil when it is).
func parseJSONObject(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// readHost reads the user's own file (their symlinks are followed: no box can make one
// there); nil and no error when absent, an error when unreadable or larger than maxFile.
func readHost(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("larger than %d MiB", maxFile>>20)
	}
	return b, nil
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
