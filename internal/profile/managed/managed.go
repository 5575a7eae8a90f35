// Package managed delivers agentbox's managed locks into Claude Code's managed settings (the
// admin-writable files under /etc/claude-code, which Claude Code alone honours for
// allowManagedHooksOnly and allowManagedMcpServersOnly), and reads back the posture Claude
// Code will run under.
//
// Delivery never overwrites what an administrator or MDM put there: with a Claude Code that
// reads the managed-settings.d drop-in directory, agentbox writes only its own drop-in file;
// otherwise it merges only the keys it owns into managed-settings.json, keeping every other
// byte, after saving a backup, and it refuses to take over a key it did not write.
package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/config"
)

// DefaultDir is Claude Code's managed settings directory on Linux.
const DefaultDir = "/etc/claude-code"

// Names inside the managed directory.
const (
	SettingsFile = "managed-settings.json"
	DropInDir    = "managed-settings.d"
	// DropInFile is agentbox's drop-in: late in the alphabetical merge order, so an admin's
	// fragments named 00-…–89-… are merged before it.
	DropInFile = "90-agentbox.json"
	// BackupSuffix names the copy of managed-settings.json saved before agentbox changes it.
	BackupSuffix = ".agentbox-backup"
	// StateFile records, beside the policy, what agentbox last wrote (to tell its own keys from
	// an administrator's).
	StateFile = "managed-state.json"
)

// Mode is how the locks are delivered.
type Mode string

const (
	// ModeDropIn writes agentbox's own file into managed-settings.d.
	ModeDropIn Mode = "dropin"
	// ModeFile merges agentbox's keys into managed-settings.json.
	ModeFile Mode = "file"
)

// Errors of Apply, checked with errors.Is.
var (
	// ErrForeignKey means a key agentbox would write is already set by someone else (an admin,
	// MDM): agentbox never overwrites it. The file is left untouched.
	ErrForeignKey = errors.New("managed settings key set by someone else")
	// ErrInvalidFile means the existing managed settings file is not a JSON object; agentbox
	// does not touch it.
	ErrInvalidFile = errors.New("managed settings file is not a JSON object")
)

// Options configure Apply and Read. The zero value uses DefaultDir and keeps the state in
// /etc/agentbox.
type Options struct {
	// Dir is Claude Code's managed directory. "" means DefaultDir.
	Dir string
	// StateDir is where StateFile lives. "" means the directory of config.DefaultPolicyFile.
	StateDir string
}

func (o Options) dir() string {
	if o.Dir == "" {
		return DefaultDir
	}
	return o.Dir
}

func (o Options) state() string {
	d := o.StateDir
	if d == "" {
		d = filepath.Dir(config.DefaultPolicyFile)
	}
	return filepath.Join(d, StateFile)
}

// key is one key agentbox owns, as a path of object keys.
type key []string

func (k key) String() string { return strings.Join(k, ".") }

// ownedKeys are every key agentbox may write, in the order it writes them.
var ownedKeys = []key{
	{"allowManagedHooksOnly"},
	{"allowManagedMcpServersOnly"},
	{"allowedMcpServers"},
	{"env", "DISABLE_AUTOUPDATER"},
}

// Desired returns the value of each owned key the policy sets (absent keys are not written).
func Desired(m config.ClaudeCodeManaged) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if m.AllowManagedHooksOnly {
		out["allowManagedHooksOnly"] = json.RawMessage("true")
	}
	if m.AllowManagedMcpServersOnly {
		out["allowManagedMcpServersOnly"] = json.RawMessage("true")
	}
	if m.AllowedMcpServers != nil {
		b, _ := json.Marshal(m.AllowedMcpServers)
		out["allowedMcpServers"] = b
	}
	if m.AutoUpdates != config.AutoUpdatesOn {
		out["env.DISABLE_AUTOUPDATER"] = json.RawMessage(`"1"`)
	}
	return out
}

// state is what agentbox last wrote, by mode.
type state struct {
	// Keys are the raw values agentbox wrote into managed-settings.json, by dotted key.
	Keys map[string]string `json:"keys,omitempty"`
	// DropIn is the content agentbox wrote into its drop-in file.
	DropIn []byte `json:"dropIn,omitempty"`
}

func readState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &state{}, nil
	}
	if err != nil {
		return nil, err
	}
	s := &state{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("managed state %s: %w", path, err)
	}
	return s, nil
}

func writeState(path string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// Result says what Apply did.
type Result struct {
	Mode    Mode
	File    string // the file written (or that would have been)
	Changed bool
	Backup  string // the backup of managed-settings.json, when one was made
}

// Apply delivers the policy's Claude Code locks in mode. The policy is parsed and validated
// before Apply is called (config.Load refuses an invalid one, and then nothing is touched).
// A key agentbox would write that someone else set is refused with ErrForeignKey, and the
// file is left untouched.
func Apply(m config.ClaudeCodeManaged, mode Mode, o Options) (*Result, error) {
	st, err := readState(o.state())
	if err != nil {
		return nil, err
	}
	want := Desired(m)
	dir := o.dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch mode {
	case ModeDropIn:
		return applyDropIn(want, dir, st, o)
	case ModeFile:
		return applyFile(want, dir, st, o)
	}
	return nil, fmt.Errorf("managed: unknown mode %q", mode)
}

func applyDropIn(want map[string]json.RawMessage, dir string, st *state, o Options) (*Result, error) {
	d := filepath.Join(dir, DropInDir)
	file := filepath.Join(d, DropInFile)
	res := &Result{Mode: ModeDropIn, File: file}
	cur, err := os.ReadFile(file)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if exists && !bytes.Equal(cur, st.DropIn) {
		return nil, fmt.Errorf("%w: %s was not written by agentbox (or changed since); move it aside to let agentbox manage it", ErrForeignKey, file)
	}
	doc := []byte("{}\n")
	for _, k := range ownedKeys {
		if v, ok := want[k.String()]; ok {
			if doc, err = set(doc, k, v); err != nil {
				return nil, err
			}
		}
	}
	if exists && bytes.Equal(cur, doc) {
		return res, nil
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(file, doc, 0o644); err != nil {
		return nil, err
	}
	st.DropIn = doc
	res.Changed = true
	return res, writeState(o.state(), st)
}

func applyFile(want map[string]json.RawMessage, dir string, st *state, o Options) (*Result, error) {
	file := filepath.Join(dir, SettingsFile)
	res := &Result{Mode: ModeFile, File: file}
	orig, err := os.ReadFile(file)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	mode := os.FileMode(0o644)
	if exists {
		if fi, err := os.Stat(file); err == nil {
			mode = fi.Mode().Perm()
		}
		if !json.Valid(orig) {
			return nil, fmt.Errorf("%w: %s", ErrInvalidFile, file)
		}
		if _, err := parseObject(orig, 0); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidFile, file)
		}
	} else {
		orig = []byte("{}\n")
	}
	doc := orig
	keys := map[string]string{}
	for _, k := range ownedKeys {
		name := k.String()
		cur, has, err := lookup(doc, k)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrInvalidFile, file, name, err)
		}
		mine, wrote := st.Keys[name]
		owned := has && wrote && string(cur) == mine
		v, wanted := want[name]
		switch {
		case has && !owned && wanted && !bytes.Equal(cur, v):
			// Someone else set this key (or changed what agentbox wrote): never overwrite it.
			return nil, fmt.Errorf("%w: %s sets %s (to %s), which agentbox did not write; remove it there or from the policy", ErrForeignKey, file, name, cur)
		case has && !owned:
			// Someone else's key that the policy agrees with or does not set: leave it theirs.
		case wanted:
			if doc, err = set(doc, k, v); err != nil {
				return nil, fmt.Errorf("%w: %s: %s: %v", ErrInvalidFile, file, name, err)
			}
			keys[name] = string(v)
		case owned:
			if doc, err = del(doc, k); err != nil {
				return nil, err
			}
		}
	}
	if bytes.Equal(doc, orig) && exists {
		st.Keys = keys
		return res, writeState(o.state(), st)
	}
	if exists {
		res.Backup = file + BackupSuffix
		if err := atomicfile.WriteFile(res.Backup, orig, mode); err != nil {
			return nil, fmt.Errorf("backup %s: %w", file, err)
		}
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("managed: merged %s is not valid JSON (not written)", file)
	}
	if err := atomicfile.WriteFile(file, doc, mode); err != nil {
		return nil, err
	}
	st.Keys = keys
	res.Changed = true
	return res, writeState(o.state(), st)
}

// SupportsDropIn reports whether the Claude Code executable at path reads the
// managed-settings.d drop-in directory (its code names it).
func SupportsDropIn(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	needle := []byte(DropInDir)
	buf := make([]byte, 1<<20)
	var carry []byte
	for {
		n, err := f.Read(buf)
		chunk := append(carry, buf[:n]...)
		if bytes.Contains(chunk, needle) {
			return true
		}
		if len(chunk) >= len(needle) {
			carry = append([]byte(nil), chunk[len(chunk)-len(needle)+1:]...)
		}
		if err != nil {
			return false
		}
	}
}

// Read returns the posture Claude Code will run under, from the managed files as Claude Code
// merges them (managed-settings.json, then managed-settings.d/*.json in name order, hidden
// files skipped; later scalars win, lists add up). Any error gives PostureSourceUnknown with
// the locks off: a posture that cannot be read is never reported as locked.
func Read(o Options) *api.Posture {
	dir := o.dir()
	var files []string
	if _, err := os.Stat(filepath.Join(dir, SettingsFile)); err == nil {
		files = append(files, filepath.Join(dir, SettingsFile))
	} else if !errors.Is(err, os.ErrNotExist) {
		return unknown(err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, DropInDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return unknown(err)
	}
	var drop []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") && (e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0) {
			drop = append(drop, filepath.Join(dir, DropInDir, n))
		}
	}
	slices.Sort(drop)
	files = append(files, drop...)
	if len(files) == 0 {
		return &api.Posture{Source: api.PostureSourceNone}
	}
	p := &api.Posture{Source: api.PostureSourceFile, Files: files}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return unknown(err)
		}
		var s struct {
			AllowManagedHooksOnly      *bool             `json:"allowManagedHooksOnly"`
			AllowManagedMcpServersOnly *bool             `json:"allowManagedMcpServersOnly"`
			AllowedMcpServers          []json.RawMessage `json:"allowedMcpServers"`
			Env                        map[string]any    `json:"env"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			return unknown(fmt.Errorf("%s: %w", f, err))
		}
		if s.AllowManagedHooksOnly != nil {
			p.AllowManagedHooksOnly = *s.AllowManagedHooksOnly
		}
		if s.AllowManagedMcpServersOnly != nil {
			p.AllowManagedMcpServersOnly = *s.AllowManagedMcpServersOnly
		}
		p.AllowedMcpServers += len(s.AllowedMcpServers)
		if v, ok := s.Env["DISABLE_AUTOUPDATER"]; ok {
			p.AutoUpdatesDisabled = fmt.Sprint(v) != "" && fmt.Sprint(v) != "0" && fmt.Sprint(v) != "false"
		}
	}
	return p
}

func unknown(err error) *api.Posture {
	return &api.Posture{Source: api.PostureSourceUnknown, Error: err.Error()}
}
