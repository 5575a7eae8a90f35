package integrity

import (
	"path"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/agentbox/agentbox/internal/plan"
)

// lefthook reads the lefthook configuration files at the workspace's top (pinned: the
// lefthook names of plan.HookManagerFiles) and protects what they name that lefthook reads at
// each hook run (its config/loader.go): the files of extends (paths or globs, relative to the
// repository's top, merged into the configuration, and those their own extends name), and the
// script folders source_dir and source_dir_local (the scripts of its `scripts:` run from
// there; .lefthook/ and .lefthook-local/ unless named otherwise). A file named but absent is
// guarded, like any absent protected path. A config it cannot read (TOML, which agentbox has
// no parser for, or text YAML refuses) is named in a launch note: what it names is not pinned.
func (r *resolver) lefthook() {
	seen := map[string]bool{}
	var read func(rel string, depth int)
	read = func(rel string, depth int) {
		if seen[rel] || depth > maxIncludes {
			return
		}
		seen[rel] = true
		if k, err := r.fs.kind(rel); err != nil || k != KindFile {
			return
		}
		abs := filepath.Join(r.ws, rel)
		if strings.HasSuffix(rel, ".toml") {
			r.note("%s is not read (TOML): the files its extends and source_dir name are not pinned", abs)
			return
		}
		b, err := r.fs.read(rel, maxCheckedFile)
		var cfg struct {
			Extends        any    `yaml:"extends"`
			SourceDir      string `yaml:"source_dir"`
			SourceDirLocal string `yaml:"source_dir_local"`
		}
		if err == nil {
			err = yaml.Unmarshal(b, &cfg)
		}
		if err != nil {
			r.note("%s could not be read (%v): the files its extends and source_dir name are not pinned", abs, err)
			return
		}
		for _, d := range []string{cfg.SourceDir, cfg.SourceDirLocal} {
			if p, ok := r.lefthookPath(d); ok && d != "" {
				r.protect(p, true)
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
			p, ok := r.lefthookPath(e)
			if !ok {
				continue
			}
			if !strings.ContainsAny(e, "*?[\\") {
				r.protect(p, false)
				read(p, depth+1)
				continue
			}
			matches, _ := filepath.Glob(filepath.Join(r.ws, p))
			for _, m := range matches {
				if mrel, err := filepath.Rel(r.ws, m); err == nil && within(m, r.ws) {
					r.protect(mrel, false)
					read(mrel, depth+1)
				}
			}
			r.note("%s: extends names %q, a pattern: the files that match it now are pinned, others a box makes are not", abs, e)
		}
	}
	for _, f := range lefthookConfigs() {
		read(f, 0)
	}
}

// lefthookPath returns the workspace-relative path of a path lefthook's configuration names
// (relative to the repository's top, the workspace's), and whether it lies strictly beneath the
// workspace.
func (r *resolver) lefthookPath(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.ws, p)
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
