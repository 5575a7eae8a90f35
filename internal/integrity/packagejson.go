package integrity

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// PackageHookKeys are the top-level keys of a package.json that a git hook the host has
// already installed reads when it runs (at git commit, git push), to decide what to run: husky
// 4's "husky" (husky.hooks), yorkie's "gitHooks", the pre-commit and pre-push packages'
// "pre-commit", "precommit" and "pre-push" (lists of npm scripts), "lint-staged" and
// "nano-staged" (commands a hook runs through npx lint-staged), and "simple-git-hooks" (the
// commands it writes into the hooks when the host's npm install runs it). "config" counts for
// ghooks' config.ghooks.
var PackageHookKeys = []string{"husky", "gitHooks", "pre-commit", "precommit", "pre-push", "lint-staged", "nano-staged", "simple-git-hooks", "config"}

// packageHooks returns what a package.json's text gives the hooks of PackageHookKeys to run:
// the values of those keys, and of the npm scripts (with their pre and post scripts) that any
// word of those values or of hookWords (the words of the hook files beside it: husky 5 and
// later's .husky/pre-commit running npm test) names (npm test, npm run lint,
// "pre-commit": ["lint"]), and of those that any word of a named script names in turn, as
// canonical JSON, and the names it took; "" when the package has
// none. The scan records its hash, so that a box's change to it is a change, while its other
// edits (dependencies, other scripts) are ordinary work. A text that is not JSON is an error:
// the scan takes it for one with hooks.
func packageHooks(text []byte, hookWords []string) (string, []string, error) {
	text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")) // node's tools strip a BOM
	// Numbers are kept as their text: node's JSON.parse reads any number (1e400 is Infinity),
	// where a float64 would refuse it and leave the hook part unread (review 15, F4).
	var pkg map[string]any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&pkg); err != nil {
		return "", nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", nil, errors.New("package.json: text after its JSON value")
	}
	hooks := map[string]any{}
	for _, k := range PackageHookKeys {
		v, ok := pkg[k]
		if k == "config" {
			m, _ := v.(map[string]any)
			v, ok = m["ghooks"]
			k = "config.ghooks"
		}
		if ok {
			hooks[k] = v
		}
	}
	names := slices.Sorted(maps.Keys(hooks))
	if scripts, ok := pkg["scripts"].(map[string]any); ok {
		// The scripts those words name, and those the named scripts name in turn (a hook's
		// npm run lint whose lint is npm run lint:js): a box's change to any of them is one
		// to what the hook runs.
		named := map[string]any{}
		for next := append(words(hooks), hookWords...); len(next) > 0; {
			var more []string
			for _, w := range next {
				if w == "t" || w == "tst" {
					w = "test" // npm t
				}
				for _, s := range []string{w, "pre" + w, "post" + w} {
					if _, done := named[s]; done {
						continue
					}
					if v, ok := scripts[s]; ok {
						named[s] = v
						more = append(more, words(v)...)
					}
				}
			}
			next = more
		}
		if len(named) > 0 {
			hooks["scripts"] = named
			for _, s := range slices.Sorted(maps.Keys(named)) {
				names = append(names, "scripts."+s)
			}
		}
	}
	if len(hooks) == 0 {
		return "", nil, nil
	}
	b, err := json.Marshal(hooks) // map keys sorted: the same content, the same text
	return string(b), names, err
}

// words returns the words of every string in v (a JSON value), split at anything but a
// letter, a digit or one of -_:.@/ (a script's name may hold them).
func words(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, strings.FieldsFunc(v, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_:.@/", r))
			})...)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				walk(k)
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// packageUnsettled is the finding of a package.json that is not JSON (packageHooks' error):
// mergeExec leaves what it recorded of the file as it was.
const packageUnsettled = "\x00package.json not read"

// packageUnreadAtExit is the finding, at the check at exit, of a package.json agentbox cannot
// read that changed since the launch began: no write is caught halfway then (the box is gone),
// and node may read what Go refuses (a nesting deeper than Go's decoder takes), so it is taken
// for one whose hook part changed and moved aside.
const packageUnreadAtExit = "npm package (package.json) that agentbox could not read as JSON and that changed while the box ran: taken for one whose git hook configuration changed"

// isPackageJSON reports whether a finding's path is a package.json: its hook part is watched,
// and the file's going is no change (an editor may save it by removing and writing it again;
// a package.json that is gone runs no hook).
func isPackageJSON(p string) bool { return filepath.Base(p) == "package.json" }

// checkPackageJSON records the package.json at path when it gives an installed git hook
// something to run (packageHooks), with a hash of that part of it: new or changed, the scan
// moves the file aside, so that the host's next git commit runs none of a box's hook commands.
// present reports whether a name is among the entries of the package.json's folder (nil: look);
// moved, what the launch's checks moved aside (hookFileWords).
func checkPackageJSON(ws, path string, present, moved func(string) bool, out map[string]string) {
	b, err := readBeneath(ws, path, maxCheckedFile)
	switch {
	case errors.Is(err, errOutside):
		out[path] = "npm package (package.json) that is a symlink leading out of the workspace: the git hook configuration a hook reads there is not checked"
		return
	case tooLarge(err) != nil:
		out[path] = "npm package (package.json) " + err.Error() + ": taken for one whose git hook configuration changed"
		return
	case err != nil:
		return
	}
	hooks, names, err := packageHooks(b, hookFileWords(ws, filepath.Dir(path), present, moved))
	switch {
	case err != nil:
		// Most often a write caught halfway (truncated, then written: an editor's save, npm's):
		// no verdict, neither a change nor a removal. One left so runs no hook either: node's
		// JSON.parse refuses it as well.
		out[path] = packageUnsettled
	case hooks != "":
		sum := sha256.Sum256([]byte(hooks))
		out[path] = "npm package's git hook configuration (package.json: " + strings.Join(names, ", ") + "), which an installed hook runs at git commit (sha256 " + hex.EncodeToString(sum[:6]) + ")"
	}
}

// hookFileWords returns the words of the git hooks installed beside a package.json in dir:
// the files of dir/.husky (husky 5 and later, run through core.hooksPath) and of
// dir/.git/hooks (but samples), the run commands of lefthook's configuration there and the
// entries of pre-commit's local hooks (hook managers' commands: run: npm run lint), and the
// commands of the agents' and editors' configuration and the .envrc there (agentCommandFiles:
// a Claude Code hook's npm run setup, which the host's next session runs), each read
// beneath ws up to maxCheckedFile. present, when not nil, says which names dir holds (the
// scan's listing), so that those absent are not opened; moved, when not nil, which hook files
// the launch's checks moved aside (passOver.moved), which are not read.
func hookFileWords(ws, dir string, present, moved func(string) bool) []string {
	var out []string
	for _, f := range append(lefthookConfigs(), ".pre-commit-config.yaml") {
		if present != nil && !present(strings.SplitN(f, "/", 2)[0]) {
			continue
		}
		if b, err := readBeneath(ws, filepath.Join(dir, f), maxCheckedFile); err == nil {
			for _, c := range managerCommands(f, b) {
				out = append(out, words(c)...)
			}
		}
	}
	// The agents' and editors' configuration and the .envrc there (agentTexts at the launch):
	// a SessionStart hook's npm run setup.
	files := append(slices.Clone(agentCommandFiles), ".envrc")
	for _, d := range agentCommandDirs {
		if present != nil && !present(strings.SplitN(d, "/", 2)[0]) {
			continue
		}
		names, _ := readDirNames(filepath.Join(dir, d))
		for _, n := range names {
			if filepath.Ext(n) == ".json" {
				files = append(files, filepath.Join(d, n))
			}
		}
	}
	for _, f := range files {
		if present != nil && !present(strings.SplitN(f, "/", 2)[0]) {
			continue
		}
		b, err := readBeneath(ws, filepath.Join(dir, f), maxCheckedFile)
		if err != nil {
			continue
		}
		if f == ".envrc" {
			out = append(out, words(envrcText(b))...)
			continue
		}
		for _, c := range agentCommands(f, b) {
			out = append(out, words(c)...)
		}
	}
	for _, hooks := range []string{filepath.Join(dir, ".husky"), filepath.Join(dir, ".git", "hooks")} {
		if present != nil && !present(strings.SplitN(strings.TrimPrefix(hooks, dir+"/"), "/", 2)[0]) {
			continue
		}
		names, err := readDirNames(hooks)
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(n, ".sample") || moved != nil && moved(filepath.Join(hooks, n)) {
				continue
			}
			if b, err := readBeneath(ws, filepath.Join(hooks, n), maxCheckedFile); err == nil {
				out = append(out, words(string(b))...)
			}
		}
	}
	return out
}

// changedAtExit reports whether the file at path (not followed) changed at or after since
// (its ctime, which a box cannot set).
func changedAtExit(path string, since int64) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	_, _, ctime := identity(fi)
	return ctime >= since
}
