package integrity

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHookScriptsPinned: the files the host's hooks name by their path are protected (pinned,
// or guarded while absent), from every place hookScripts reads commands: the hooks folder, a
// core.hooksPath folder, lefthook's run commands (YAML and TOML), pre-commit's local entries,
// package.json's hook part (npm scripts named in turn) and what a named script names; words
// that are no path of the workspace are not.
func TestHookScriptsPinned(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\thooksPath = .husky\n")
	mustWrite(t, filepath.Join(ws, ".git/hooks/pre-push"), "#!/bin/sh\n./scripts/push.sh \"$@\"\n")
	mustWrite(t, filepath.Join(ws, ".husky/pre-commit"), "#!/bin/sh\n# sh scripts/commented.sh\nsh scripts/check.sh --fix >/dev/null\nnpm test\nnode node_modules/x/y.js\n$HOME/bin/z.sh\n[ -f ./package.json ] && grep -q x conf/settings.json\nsh tools/noext\n./tools/exe\n")
	mustWrite(t, filepath.Join(ws, "lefthook.yml"), "pre-commit:\n  commands:\n    a:\n      run: bash tools/a.sh {staged_files}\n  jobs:\n    - run: ./absent.sh\n    - run: npm run --silent fmt\n")
	mustWrite(t, filepath.Join(ws, "lefthook-local.toml"), "[pre-commit.commands.b]\nrun = \"python3 tools/b.py\"\n")
	mustWrite(t, filepath.Join(ws, ".pre-commit-config.yaml"), "repos:\n  - repo: local\n    hooks:\n      - id: c\n        entry: tools/c.rb\n        language: script\n  - repo: https://git.example.org/x/y\n    hooks:\n      - id: d\n        entry: tools/d.sh\n")
	mustWrite(t, filepath.Join(ws, "package.json"), `{"scripts":{"test":"npm run unit","unit":"node test/run.mjs","build":"node tools/build.js","fmt":"sh tools/fmt"}}`)
	for _, f := range []string{"scripts/push.sh", "scripts/commented.sh", "tools/a.sh", "tools/b.py", "tools/c.rb", "tools/d.sh", "tools/build.js", "node_modules/x/y.js", "test/lib.sh"} {
		mustWrite(t, filepath.Join(ws, f), "true\n")
	}
	mustWrite(t, filepath.Join(ws, "scripts/check.sh"), "#!/bin/sh\n. test/lib.sh\n")
	mustWrite(t, filepath.Join(ws, "conf/settings.json"), "{}\n")
	mustWrite(t, filepath.Join(ws, "tools/noext"), "true\n")
	mustWrite(t, filepath.Join(ws, "tools/fmt"), "true\n")
	mustWrite(t, filepath.Join(ws, "tools/exe"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(ws, "tools/exe"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "test/run.mjs"), "import './helper.mjs'\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "scripts/push.sh", "scripts/check.sh", "test/lib.sh", "tools/a.sh", "absent.sh", "tools/b.py", "tools/c.rb", "test/run.mjs", "tools/noext", "tools/exe", "tools/fmt")
	got := pinnedRels(lay)
	for _, f := range []string{"scripts/commented.sh", "tools/d.sh", "tools/build.js", "node_modules/x/y.js", "helper.mjs", "bin/z.sh", "package.json", "conf/settings.json"} {
		if got[f] {
			t.Errorf("%s is pinned: no hook runs it by that path", f)
		}
	}
}
