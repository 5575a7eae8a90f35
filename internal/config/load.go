package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/config/field"
)

// DefaultPolicyFile is where the system policy lives.
const DefaultPolicyFile = "/etc/agentbox/policy.yaml"

// LoadOptions says where Load finds its files. The zero value reads the user's config from its
// standard place and the system policy from DefaultPolicyFile.
type LoadOptions struct {
	// UserFile is the user config. "" means UserFile(Getenv). A file named here must exist.
	UserFile string
	// PolicyFile is the system policy. "" means DefaultPolicyFile. An absent policy file means
	// no policy.
	PolicyFile string
	// PolicyOwner is the uid that must own the policy file and its directory. Zero means root;
	// tests running as an ordinary user set their own uid.
	PolicyOwner int
	// Getenv reads the environment (AGENTBOX_CONFIG, XDG_CONFIG_HOME, HOME). nil means os.Getenv.
	Getenv func(string) string
	// PolicyOnly reads no user config (UserFile is ignored): what root runs for every user
	// (wrap mode's launchers, the managed settings) takes nothing from the invoking user.
	PolicyOnly bool
}

// SourceKind says which layer a value comes from.
type SourceKind string

// Layers, lowest precedence first.
const (
	SourceDefault SourceKind = "default"
	SourceUser    SourceKind = "user"
	SourcePolicy  SourceKind = "policy"
)

// Source is where one value of the effective configuration comes from.
type Source struct {
	Kind SourceKind `json:"kind"`
	File string     `json:"file,omitempty"` // "" for defaults
	Line int        `json:"line,omitempty"` // line of the key in File
}

// Effective is the configuration in force and where each of its values comes from.
type Effective struct {
	// Config has every field explicit (defaults filled in).
	Config Config `json:"config"`
	// Sources maps every key ("console.clipboard") to its source.
	Sources map[string]Source `json:"sources"`

	files []string
}

// Files lists the files that were read, lowest precedence first.
func (e *Effective) Files() []string { return e.files }

// Entry is one key of the effective configuration, for `agentbox config show`.
type Entry struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source Source `json:"source"`
	// Locked is true when the system policy sets the key: the user's value, if any, is ignored.
	Locked bool `json:"locked,omitempty"`
}

// Entries lists every key of e in declaration order.
func (e *Effective) Entries() []Entry {
	var out []Entry
	for _, l := range leaves() {
		src := e.Sources[l.path]
		out = append(out, Entry{
			Key:    l.path,
			Value:  e.Config.fieldByIndex(l.index).Interface(),
			Source: src,
			Locked: src.Kind == SourcePolicy,
		})
	}
	return out
}

// Locked reports whether the system policy sets key, so that the user cannot change it.
func (e *Effective) Locked(key string) bool { return e.Sources[key].Kind == SourcePolicy }

// Keys lists every configuration key ("engine", "console.clipboard", …) in declaration order.
func Keys() []string {
	var out []string
	for _, l := range leaves() {
		out = append(out, l.path)
	}
	return out
}

// Load reads the user config and the system policy and merges them over the defaults:
// defaults < user < policy, key by key. A file that is refused (ErrInvalid), a policy that is
// not safely owned (ErrUnsafePolicy) or a file that cannot be read fails the whole Load:
// agentbox never runs on a partial configuration.
func Load(opts LoadOptions) (*Effective, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	policyFile := opts.PolicyFile
	if policyFile == "" {
		policyFile = DefaultPolicyFile
	}

	var layers []*layer
	if !opts.PolicyOnly {
		userFile, required := opts.UserFile, true
		if userFile == "" {
			var err error
			if userFile, required, err = UserFile(getenv); err != nil {
				return nil, err
			}
		}
		user, err := readUser(userFile, required)
		if err != nil {
			return nil, err
		}
		if user != nil {
			layers = append(layers, user)
		}
	}
	policy, err := readPolicy(policyFile, opts.PolicyOwner)
	if err != nil {
		return nil, err
	}
	if policy != nil {
		layers = append(layers, policy)
	}
	eff := merge(layers...)
	if err := checkMerged(eff); err != nil {
		return nil, err
	}
	return eff, nil
}

// checkMerged applies the rules that span keys two files may set: every git.pushAllow entry
// lies within git.allow (one file may set git.allow, the other git.pushAllow). The error names
// the file and line of git.pushAllow.
func checkMerged(eff *Effective) error {
	err := eff.Config.Git.Relay().CheckPushWithinAllow()
	if err == nil {
		return nil
	}
	src := eff.Sources["git.pushAllow"]
	e := &InvalidError{File: src.File, Line: src.Line, Field: "git.pushAllow", Msg: err.Error()}
	if fe := (*field.Error)(nil); errors.As(err, &fe) {
		e.Field, e.Msg = fe.Key, fe.Msg
	}
	if a := eff.Sources["git.allow"]; a.File != "" && a.File != src.File {
		e.Msg += " (git.allow is set in " + a.File + ")"
	}
	return e
}

// Files returns the files Load reads, whether or not they exist yet: the user config (unless
// PolicyOnly) and the system policy, each as named (a link is not resolved). The daemon reads
// them at every launch, and a box that could write one would set the next launch's
// configuration (a credential command the relay runs on the host), so no workspace may hold
// one, through a link either (review 19, F2). The user config cannot be found when neither
// HOME nor XDG_CONFIG_HOME is absolute (Load fails then too).
func (o LoadOptions) Files() []string {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var out []string
	if !o.PolicyOnly {
		user := o.UserFile
		if user == "" {
			user, _, _ = UserFile(getenv)
		}
		if user != "" {
			if a, err := filepath.Abs(user); err == nil {
				user = a // (a relative $AGENTBOX_CONFIG is read from the daemon's folder)
			}
			out = append(out, user)
		}
	}
	policy := o.PolicyFile
	if policy == "" {
		policy = DefaultPolicyFile
	}
	return append(out, policy)
}

// UserFile returns the path of the user config: $AGENTBOX_CONFIG (then required says the file
// must exist), else $XDG_CONFIG_HOME/agentbox/config.yaml, else ~/.config/agentbox/config.yaml.
func UserFile(getenv func(string) string) (path string, required bool, err error) {
	if p := getenv("AGENTBOX_CONFIG"); p != "" {
		return p, true, nil
	}
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "agentbox", "config.yaml"), false, nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", false, errors.New("cannot find the user config: neither XDG_CONFIG_HOME nor HOME is an absolute path (set AGENTBOX_CONFIG)")
	}
	return filepath.Join(home, ".config", "agentbox", "config.yaml"), false, nil
}

// Validate reads and strictly decodes one config or policy file, as `agentbox config validate`
// does, and applies the rules across keys to it alone. It does not check the file's owner,
// nor the credential files it names (CheckCredentialFiles).
func Validate(path string) (Config, error) {
	data, err := readFile(path)
	if err != nil {
		return Config{}, err
	}
	l, err := decode(path, data)
	if err != nil {
		return Config{}, err
	}
	eff := merge(l)
	if err := checkMerged(eff); err != nil {
		return Config{}, err
	}
	return eff.Config, nil
}

func readUser(path string, required bool) (*layer, error) {
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) && !required {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := decode(path, data)
	if err != nil {
		return nil, err
	}
	if err := refusePolicyOnly(l); err != nil {
		return nil, err
	}
	l.kind = SourceUser
	return l, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	return readAll(f, path)
}

func readAll(f *os.File, path string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read config %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return data, nil
}

// readPolicy reads the system policy after checking that it, the directory it is in and the
// directory of the file it resolves to are owned by owner and not writable by group or others.
// The file is checked through the descriptor it is read from.
func readPolicy(path string, owner int) (*layer, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", path, err)
	}
	if err := checkTrusted(path, fi, owner); err != nil {
		return nil, err
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		di, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("read policy %s: %w", path, err)
		}
		if err := checkTrusted(d, di, owner); err != nil {
			return nil, fmt.Errorf("policy %s: %w", path, err)
		}
	}
	data, err := readAll(f, path)
	if err != nil {
		return nil, err
	}
	l, err := decode(path, data)
	if err != nil {
		return nil, err
	}
	l.kind = SourcePolicy
	return l, nil
}

// checkTrusted refuses a policy file or directory that owner does not own or that group or
// others may write.
func checkTrusted(path string, fi fs.FileInfo, owner int) error {
	uid, err := fileOwner(fi)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafePolicy, path, err)
	}
	if uid != owner {
		return fmt.Errorf("%w: %s is owned by uid %d, not %s; only an administrator may write system policy (fix: sudo chown %d %s)",
			ErrUnsafePolicy, path, uid, ownerName(owner), owner, path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %04o, writable by group or others (fix: sudo chmod go-w %s)",
			ErrUnsafePolicy, path, fi.Mode().Perm(), path)
	}
	return nil
}

func ownerName(uid int) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprintf("uid %d", uid)
}

// merge lays the layers over the defaults in order, key by key.
func merge(layers ...*layer) *Effective {
	e := &Effective{Config: Defaults(), Sources: map[string]Source{}}
	for _, l := range leaves() {
		e.Sources[l.path] = Source{Kind: SourceDefault}
	}
	for _, ly := range layers {
		e.files = append(e.files, ly.file)
		for _, l := range leaves() {
			line, ok := ly.set[l.path]
			if !ok {
				continue
			}
			e.Config.fieldByIndex(l.index).Set(ly.cfg.fieldByIndex(l.index))
			e.Sources[l.path] = Source{Kind: ly.kind, File: ly.file, Line: line}
		}
	}
	return e
}
