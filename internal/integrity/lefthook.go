package integrity

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/pelletier/go-toml/v2"
	"github.com/tidwall/jsonc"

	"github.com/agentbox/agentbox/internal/plan"
)

// lefthookConfig is what of a lefthook configuration file names other files lefthook reads at
// each hook run (its config/loader.go, config/remote.go).
type lefthookConfig struct {
	Extends        any              `yaml:"extends" toml:"extends"`
	SourceDir      string           `yaml:"source_dir" toml:"source_dir"`
	SourceDirLocal string           `yaml:"source_dir_local" toml:"source_dir_local"`
	Remotes        []lefthookRemote `yaml:"remotes" toml:"remotes"`
}

// lefthookRemote is a remote configuration: a repository lefthook clones into
// COMMON/info/lefthook-remotes/ and whose configs (lefthook.yml unless named) it merges.
type lefthookRemote struct {
	GitURL  string   `yaml:"git_url" toml:"git_url"`
	Ref     string   `yaml:"ref" toml:"ref"`
	Configs []string `yaml:"configs" toml:"configs"`
	// Config is the single config of lefthook 1's remotes.
	Config string `yaml:"config" toml:"config"`
}

// lefthookRemotes is the folder, in the repository's common dir, where lefthook clones its
// remotes (git rev-parse --git-path info, then lefthook-remotes: internal/git/remote.go).
const lefthookRemotes = "info/lefthook-remotes"

// lefthookExtendsReads says what reads a later match of a lefthook extends pattern.
const lefthookExtendsReads = "a file an extends pattern of the workspace's lefthook configuration matches: lefthook merges it into the configuration at the host's next git commit"

// lefthook reads the lefthook configuration files at the workspace's top (pinned: the
// lefthook names of plan.HookManagerFiles, YAML, JSON, JSONC or TOML) and protects what they name that
// lefthook reads at each hook run (its config/loader.go): the files of extends (paths or globs,
// relative to the repository's top, merged into the configuration, and those their own extends
// name), the script folders source_dir and source_dir_local (the scripts of its `scripts:` run
// from there; .lefthook/ and .lefthook-local/ unless named otherwise), and, when remotes are
// configured, the folder lefthook clones them into (GITDIR/info/lefthook-remotes, in the common
// dir: each remote's configs are merged and its source_dir's scripts run, and a folder of a
// remote's name with another ref is what lefthook falls back to when it cannot fetch). A file
// named but absent is guarded, like any absent protected path; a later match of an extends
// pattern is a nested configuration file of the launch (Layout.Config), moved aside by the
// workspace scan. A config it cannot read (text its format refuses) is named in a launch note:
// what it names is not pinned.
func (r *resolver) lefthook() {
	seen := map[string]bool{}
	remotes := false
	var read func(rel, root string, depth int)
	read = func(rel, root string, depth int) {
		if seen[rel] || depth > maxIncludes {
			return
		}
		seen[rel] = true
		if k, err := r.fs.kind(rel); err != nil || k != KindFile {
			return
		}
		abs := filepath.Join(r.ws, rel)
		b, err := r.fs.read(rel, maxCheckedFile)
		var cfg lefthookConfig
		if err == nil {
			switch path.Ext(rel) {
			case ".toml":
				err = toml.Unmarshal(b, &cfg)
			case ".jsonc":
				// lefthook's own reading of JSONC (config/jsonc_parser.go): comments and
				// trailing commas blanked, then JSON.
				b = jsonc.ToJSON(b)
				err = yaml.Unmarshal(b, &cfg)
			default:
				err = yaml.Unmarshal(b, &cfg)
			}
		}
		if err != nil {
			r.note("%s could not be read (%v): the files its extends, source_dir and remotes name are not pinned", abs, err)
			return
		}
		r.hookTexts = append(r.hookTexts, managerCommands(rel, b)...)
		for _, d := range []string{cfg.SourceDir, cfg.SourceDirLocal} {
			if p, ok := r.lefthookPath(d, r.ws); ok && d != "" {
				r.protect(p, true)
			}
		}
		for _, rm := range cfg.Remotes {
			if rm.GitURL != "" {
				remotes = true
			}
		}
		var extends []string
		switch v := cfg.Extends.(type) {
		case string:
			extends = []string{v}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					extends = append(extends, s)
				}
			}
		}
		for _, e := range extends {
			p, ok := r.lefthookPath(e, root)
			if !ok {
				continue
			}
			if !strings.ContainsAny(e, "*?[\\") {
				r.protect(p, false)
				read(p, root, depth+1)
				continue
			}
			matches, _ := filepath.Glob(filepath.Join(r.ws, p))
			for _, m := range matches {
				if mrel, err := filepath.Rel(r.ws, m); err == nil && within(m, r.ws) {
					r.protect(mrel, false)
					read(mrel, root, depth+1)
				}
			}
			pat := filepath.ToSlash(p)
			r.lay.Config = append(r.lay.Config, NestedConfigFile{Dir: "/" + path.Dir(pat), Name: path.Base(pat), Reads: lefthookExtendsReads})
		}
	}
	for _, f := range lefthookConfigs() {
		read(f, r.ws, 0)
	}
	if !remotes {
		return
	}
	common, ok := r.commonRel()
	if !ok {
		r.note("lefthook's remotes are configured, and the repository's common dir is not beneath the workspace: the box cannot reach them")
		return
	}
	dir := filepath.Join(common, lefthookRemotes)
	r.protect(dir, true)
	// What a remote's configs extend, relative to the config's folder, when it lies in the
	// workspace outside the remotes' folder (an absolute path of the remote's choosing).
	for _, c := range lefthookRemoteConfigs(r, dir) {
		read(c, filepath.Join(r.ws, filepath.Dir(c)), 0)
	}
}

// lefthookRemoteConfigs returns the configs (workspace-relative) of the remotes cloned into
// dir that exist: every config file at each remote's top (lefthook reads those its remote
// names, lefthook.yml unless named otherwise; any of them may be named).
func lefthookRemoteConfigs(r *resolver, dir string) []string {
	names, err := readDirNames(filepath.Join(r.ws, dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		sub, err := readDirNames(filepath.Join(r.ws, dir, n))
		if err != nil {
			continue
		}
		for _, f := range sub {
			switch path.Ext(f) {
			case ".yml", ".yaml", ".json", ".jsonc", ".toml":
				out = append(out, filepath.Join(dir, n, f))
			}
		}
	}
	return out
}

// lefthookPath returns the workspace-relative path of a path lefthook's configuration names
// (relative to root: the repository's top, the workspace's, or a remote config's folder), and
// whether it lies strictly beneath the workspace.
func (r *resolver) lefthookPath(p, root string) (string, bool) {
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !within(p, r.ws) || p == r.ws {
		return "", false
	}
	rel, err := filepath.Rel(r.ws, p)
	return rel, err == nil
}

// lefthookConfigs are lefthook's configuration files among plan.HookManagerFiles (not its
// script folders).
func lefthookConfigs() []string {
	var out []string
	for _, f := range plan.HookManagerFiles() {
		switch path.Ext(f) {
		case ".yml", ".yaml", ".json", ".jsonc", ".toml":
			if strings.Contains(path.Base(f), "lefthook") {
				out = append(out, f)
			}
		}
	}
	return out
}

// commonRel returns the common dir (workspace-relative) of the workspace's own repository,
// and whether it lies beneath the workspace.
func (r *resolver) commonRel() (string, bool) {
	if r.gitdirRel == "" {
		return "", false
	}
	c, ok, err := commonDir(r.ws, filepath.Join(r.ws, r.gitdirRel))
	switch {
	case err != nil:
		return "", false
	case c == "":
		return r.gitdirRel, true
	case !ok:
		return "", false
	}
	return r.beneath(c)
}
