package daemon

import (
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// maxGitIncludes bounds how deep gitStartupFiles follows include.path (git's own bound is 10).
const maxGitIncludes = 10

// startupFiles are the host's files that no workspace may hold (plan.CheckStartupFiles): the
// home's start-up files (plan.HomeStartup) and what the user's git configuration leads git
// to at every start (gitStartupFiles). home is the home as $HOME says it, env the caller's
// environment (XDG_CONFIG_HOME).
func startupFiles(home string, env []string) []plan.StartupFile {
	out := plan.HomeStartup(home)
	const why = "git reads it at every start"
	for _, f := range gitStartupFiles(home, env) {
		out = append(out, plan.StartupFile{Path: f, Why: why})
	}
	return out
}

// gitStartupFiles returns what the host's git reads or runs in every repository from the
// user's configuration: $XDG_CONFIG_HOME/git/config (else ~/.config/git/config) and
// ~/.gitconfig, each file they include (include.path and includeIf.*.path, whatever the
// condition, "~" expanded, a relative one beside the including file), and the absolute
// core.hooksPath and init.templateDir folders they name. A file that is not a regular file
// of at most 1 MiB is not read (a FIFO never holds the launch).
func gitStartupFiles(home string, env []string) []string {
	if home == "" {
		return nil
	}
	expand := func(v string) (string, bool) {
		if rest, ok := strings.CutPrefix(v, "~"); ok {
			if rest != "" && rest[0] != '/' {
				return "", false // ~user/…
			}
			v = home + rest
		}
		return v, true
	}
	xdg := envValue(env, "XDG_CONFIG_HOME")
	if !filepath.IsAbs(xdg) {
		xdg = filepath.Join(home, ".config")
	}
	var out []string
	seen := map[string]bool{}
	var read func(p string, depth int)
	read = func(p string, depth int) {
		p = filepath.Clean(p)
		if seen[p] || depth > maxGitIncludes {
			return
		}
		seen[p] = true
		out = append(out, p)
		b, err := readSmallFile(p, 1<<20)
		if err != nil {
			return
		}
		es, _ := integrity.ParseConfig(b) // what parses before a bad line is still git's
		for _, e := range es {
			name := e.Section + "." + e.Key
			switch {
			case e.Key == "path" && e.Value != "" && (e.Section == "include" && !e.HasSub || e.Section == "includeif" && e.HasSub):
				if v, ok := expand(e.Value); ok {
					if !filepath.IsAbs(v) {
						v = filepath.Join(filepath.Dir(p), v)
					}
					read(v, depth+1)
				}
			case !e.HasSub && (name == "core.hookspath" || name == "init.templatedir") && e.Value != "":
				if v, ok := expand(e.Value); ok && filepath.IsAbs(v) {
					out = append(out, filepath.Clean(v))
				}
			}
		}
	}
	read(filepath.Join(xdg, "git", "config"), 0)
	read(filepath.Join(home, ".gitconfig"), 0)
	read("/etc/gitconfig", 0)
	return out
}
