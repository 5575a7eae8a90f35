package integrity

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ExecKeys returns the keys of a git config file's text that make git run a program, or load
// more configuration, when an unboxed git (or a shell prompt that runs git) enters the
// repository: core.fsmonitor, core.hooksPath, core.sshCommand, core.pager, core.editor,
// core.askPass, sequence.editor, credential.helper, filter.*.{clean,smudge,process},
// diff.*.{textconv,command}, merge.*.driver, include.path, includeIf.*.path and aliases whose
// value starts with "!". The result is sorted and de-duplicated.
func ExecKeys(text []byte) []string {
	seen := map[string]bool{}
	section, sub := "", ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				continue
			}
			hdr := line[1:end]
			rest := strings.TrimSpace(line[end+1:])
			if name, q, ok := strings.Cut(hdr, " "); ok {
				section, sub = strings.ToLower(strings.TrimSpace(name)), strings.Trim(strings.TrimSpace(q), `"`)
			} else if name, s, ok := strings.Cut(hdr, "."); ok {
				section, sub = strings.ToLower(name), strings.ToLower(s)
			} else {
				section, sub = strings.ToLower(hdr), ""
			}
			if rest == "" || rest[0] == '#' || rest[0] == ';' {
				continue
			}
			line = rest // "[core] fsmonitor = x" on one line
		}
		key, val, hasVal := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.Trim(strings.TrimSpace(val), `"`)
		if !hasVal {
			val = "true" // a bare key is boolean true
		}
		if k := execKey(section, sub, key, val); k != "" {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func execKey(section, sub, key, val string) string {
	full := section + "." + key
	if sub != "" {
		full = section + "." + sub + "." + key
	}
	switch section {
	case "core":
		switch key {
		case "fsmonitor":
			if isFalse(val) {
				return ""
			}
			return "core.fsmonitor"
		case "hookspath", "sshcommand", "pager", "editor", "askpass", "gitproxy":
			if val == "" {
				return ""
			}
			return full
		}
	case "sequence":
		if key == "editor" && val != "" {
			return full
		}
	case "credential":
		if key == "helper" && val != "" {
			return full
		}
	case "filter":
		if sub != "" && (key == "clean" || key == "smudge" || key == "process") && val != "" {
			return full
		}
	case "diff":
		if sub != "" && (key == "textconv" || key == "command") && val != "" {
			return full
		}
	case "merge":
		if sub != "" && key == "driver" && val != "" {
			return full
		}
	case "include", "includeif":
		if key == "path" && val != "" {
			return full
		}
	case "alias":
		if strings.HasPrefix(val, "!") {
			return "alias." + key + " (!)"
		}
	}
	return ""
}

func isFalse(v string) bool {
	switch strings.ToLower(v) {
	case "", "false", "no", "off", "0":
		return true
	}
	return false
}

// Finding is executable configuration found in the workspace: a git config with ExecKeys, or
// an .envrc.
type Finding struct {
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// ScanExec walks ws (bounded by lim.ScanDirs directories, without following symlinks) and
// returns its executable configuration outside the paths in skip (the protected roots, which
// the watch covers itself): nested repositories' config and config.worktree, bare
// repositories' config, the config of a gitdir a .git file points to within ws, and .envrc
// files. The map is keyed by path.
func ScanExec(ws string, skip map[string]bool, lim Limits) map[string]string {
	lim = lim.withDefaults()
	out := map[string]string{}
	stack := []string{ws}
	visited := 0
	for len(stack) > 0 && visited < lim.ScanDirs {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visited++
		stack = append(stack, scanDir(ws, dir, skip, out)...)
	}
	return out
}

// scanDir records the findings of one directory's entries and returns its subdirectories to
// descend into (never into a .git directory: its config is what counts).
func scanDir(ws, dir string, skip map[string]bool, out map[string]string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var sub []string
	hasHEAD, hasObjects, hasConfig := false, false, false
	for _, de := range ents {
		name := de.Name()
		p := filepath.Join(dir, name)
		switch {
		case name == ".git" && de.IsDir():
			for _, c := range []string{"config", "config.worktree"} {
				checkConfig(filepath.Join(p, c), skip, out)
			}
			continue
		case name == ".git" && de.Type().IsRegular():
			if gd, ok := readGitdir(p); ok && within(gd, ws) {
				for _, c := range []string{"config", "config.worktree"} {
					checkConfig(filepath.Join(gd, c), skip, out)
				}
			}
		case name == ".envrc" && !skip[p]:
			if de.Type().IsRegular() || de.Type()&os.ModeSymlink != 0 {
				out[p] = "direnv script (.envrc)"
			}
		case name == "HEAD":
			hasHEAD = true
		case name == "objects" && de.IsDir():
			hasObjects = true
		case name == "config" && de.Type().IsRegular():
			hasConfig = true
		}
		if de.IsDir() && name != ".git" {
			sub = append(sub, p)
		}
	}
	if hasHEAD && hasObjects && hasConfig { // a bare repository
		checkConfig(filepath.Join(dir, "config"), skip, out)
	}
	return sub
}

func checkConfig(path string, skip map[string]bool, out map[string]string) {
	if skip[path] {
		return
	}
	f, err := openNoFollow(path)
	if err != nil {
		return
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, 1<<20)); err != nil {
		return
	}
	if keys := ExecKeys(b.Bytes()); len(keys) > 0 {
		out[path] = "executable git configuration: " + strings.Join(keys, ", ")
	}
}

// readGitdir reads a .git file ("gitdir: PATH") and returns the absolute, cleaned gitdir.
func readGitdir(dotGit string) (string, bool) {
	f, err := openNoFollow(dotGit)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var b bytes.Buffer
	b.ReadFrom(io.LimitReader(f, 4096))
	line, _, _ := strings.Cut(b.String(), "\n")
	gd, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return "", false
	}
	gd = strings.TrimSpace(gd)
	if gd == "" {
		return "", false
	}
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(filepath.Dir(dotGit), gd)
	}
	return filepath.Clean(gd), true
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
