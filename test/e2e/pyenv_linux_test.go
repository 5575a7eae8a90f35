//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// makePyenv makes a pyenv at root of pyenv's own layout, minimal: shims/python3 is pyenv's
// shim (it runs `$PYENV_ROOT/libexec/pyenv exec python3`), libexec/pyenv runs the exec hooks of
// its plugins (plugins/*/etc/pyenv.d/exec/*.bash) and then the python3 of the version
// $PYENV_VERSION or root/version selects, versions/3.99.1/bin/python3, which runs the
// system's python3 with PYENV_SELECTED set to its version. sys is the system's python3.
func makePyenv(t *testing.T, root, sys string) {
	t.Helper()
	files := map[string]string{
		"shims/python3": `#!/usr/bin/env bash
set -e
program="${0##*/}"
export PYENV_ROOT="` + root + `"
exec "` + root + `/libexec/pyenv" exec "$program" "$@"
`,
		"libexec/pyenv": `#!/usr/bin/env bash
set -e
[ "$1" = exec ] || { echo "pyenv: only exec here" >&2; exit 1; }
shift; prog=$1; shift
for h in "$PYENV_ROOT"/plugins/*/etc/pyenv.d/exec/*.bash; do [ -e "$h" ] && . "$h"; done
v=${PYENV_VERSION:-$(cat "$PYENV_ROOT/version")}
exec "$PYENV_ROOT/versions/$v/bin/$prog" "$@"
`,
		"versions/3.99.1/bin/python3":             "#!/bin/sh\nPYENV_SELECTED=3.99.1 exec " + sys + " \"$@\"\n",
		"plugins/demo/etc/pyenv.d/exec/mark.bash": "export PYENV_HOOK_RAN=host\n",
		"version": "3.99.1\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.Contains(name, "bin/") || strings.HasPrefix(name, "shims/") || strings.HasPrefix(name, "libexec/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// pyenvProbe, run by python3 in a box, prints which version pyenv selected and whether the
// plugins' exec hook ran.
const pyenvProbe = `import os; print("SELECTED", os.environ.get("PYENV_SELECTED"), "HOOK", os.environ.get("PYENV_HOOK_RAN"))`

// pyenvAttack, run in a box by sh with $R the pyenv root, tries to change what the host's
// pyenv runs: the version file, a shim, a new shim, pyenv's own script, the selected
// version's python3, a plugin's exec hook, a new plugin, and the root itself (rename, chmod).
const pyenvAttack = `for f in "$R/version" "$R/shims/python3" "$R/libexec/pyenv" "$R/versions/3.99.1/bin/python3" "$R/plugins/demo/etc/pyenv.d/exec/mark.bash"; do
  echo "echo BOX-WROTE" >> "$f" 2>/dev/null && echo "WROTE append $f"
  mv "$f" "$f.moved" 2>/dev/null && echo "WROTE rename $f"
  rm -f "$f" 2>/dev/null; [ -e "$f" ] || echo "WROTE remove $f"
  chmod 777 "$f" 2>/dev/null && echo "WROTE chmod $f"
done
printf '#!/bin/sh\necho BOX-SHIM\n' > "$R/shims/pip" 2>/dev/null && echo "WROTE create shim"
mkdir -p "$R/plugins/evil/etc/pyenv.d/exec" 2>/dev/null && echo "WROTE create plugin"
echo 3.11 > "$R/versions/3.99.1/../version" 2>/dev/null && echo "WROTE version beside"
mv "$R" "$R.moved" 2>/dev/null && echo "WROTE rename root"
chmod 777 "$R" 2>/dev/null && echo "WROTE chmod root"
echo attack-done`

// TestPyenvShimsFirst: a user whose PATH has pyenv's shims first runs `agentbox run python3`
// and `agentbox run sh -c 'python3 --version'` in a workspace: the box runs pyenv's shim, pyenv
// (its script, its plugins' hooks, the version its version file selects) and that version's
// python3, and can change none of pyenv's files (the version file, the shims, pyenv's script,
// the versions, the plugins and their hooks; the root itself): they hash the same after, and
// the host's shim still selects the host's version without the box's lines. Three places of the
// pyenv root: ~/.pyenv under $HOME (bound read-only as the PATH entry's install prefix: passed
// before this change too); a pyenv root outside the home (a PYENV_ROOT elsewhere, a ~/.pyenv
// linked to another disk); and one in the account's home (the password database's) while
// $HOME is another folder, as root's ~/.pyenv was in every test environment and benchmark
// run as root. In the last two, before this change, the shim alone was in the box and
// `agentbox run python3` failed: exit 127, "libexec/pyenv: No such file or directory".
func TestPyenvShimsFirst(t *testing.T) {
	t.Parallel() // its own daemons
	sys := "/usr/bin/python3"
	if _, err := os.Stat(sys); err != nil {
		t.Skipf("no system python: %v", err)
	}
	cases := []struct {
		name string
		root func(t *testing.T, e *Env) string
		// viaPath: the shims' folder is in the box, so sh -c python3 finds pyenv's shim
		viaPath bool
	}{
		{"HomePyenv", func(t *testing.T, e *Env) string { return filepath.Join(e.Home, ".pyenv") }, true},
		{"OutsideHome", func(t *testing.T, e *Env) string { return filepath.Join(e.Root, "srv", "pyenv") }, false},
		{"AccountHome", func(t *testing.T, e *Env) string {
			u, err := user.Current()
			if err != nil || u.HomeDir == "" {
				t.Skipf("no account home: %v", err)
			}
			d, err := os.MkdirTemp(u.HomeDir, ".agentbox-test-pyenv")
			if err != nil {
				t.Skipf("cannot make a pyenv in the account's home %s: %v", u.HomeDir, err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := NewEnv(t)
			root := c.root(t, e)
			makePyenv(t, root, sys)
			for i, v := range e.Vars {
				if strings.HasPrefix(v, "PATH=") {
					e.Vars[i] = "PATH=" + filepath.Join(root, "shims") + ":/usr/local/bin:/usr/bin:/bin"
				}
			}
			before := treeHash(t, root)

			r := e.Run("", "run", "python3", "--", "-c", "print(1); "+pyenvProbe)
			if r.Code != 0 || !strings.HasPrefix(r.Stdout, "1\n") || !strings.Contains(r.Stdout, "SELECTED 3.99.1 HOOK host") {
				t.Fatalf("agentbox run python3 (pyenv's shim) did not run pyenv's python3: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
			}
			r = e.Run("", "run", "sh", "--", "-c", "python3 --version && command -v python3 && python3 -c '"+pyenvProbe+"'")
			if r.Code != 0 || !strings.HasPrefix(r.Stdout, "Python 3.") {
				t.Fatalf("agentbox run sh -c 'python3 --version': exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
			}
			if c.viaPath && (!strings.Contains(r.Stdout, filepath.Join(root, "shims", "python3")) || !strings.Contains(r.Stdout, "SELECTED 3.99.1 HOOK host")) {
				t.Errorf("sh -c python3 in the box did not run pyenv's shim and version:\n%s", r.Stdout)
			}

			// The attack, in a box whose program is pyenv's python3 (the prefix brought by the
			// program) and, where PATH brings the prefix, in a shell's.
			attack := "import subprocess, sys; sys.stdout.write(subprocess.run(['sh', '-c', " + pyQuote(pyenvAttack) + "], env={'R': " + pyQuote(root) + ", 'PATH': '/usr/bin:/bin'}, capture_output=True, text=True).stdout)"
			boxes := [][]string{{"run", "python3", "--", "-c", attack}}
			if c.viaPath {
				boxes = append(boxes, []string{"run", "sh", "--", "-c", "R=" + root + "; " + pyenvAttack})
			}
			for _, args := range boxes {
				r = e.Run("", args...)
				if r.Code != 0 || !strings.Contains(r.Stdout, "attack-done") {
					t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", args[1], r.Code, r.Stdout, r.Stderr)
				}
				if strings.Contains(r.Stdout, "WROTE") {
					t.Errorf("a box (%s) changed the host's pyenv:\n%s", args[1], r.Stdout)
				}
			}
			if after := treeHash(t, root); after != before {
				t.Errorf("the host's pyenv %s changed", root)
			}
			host := exec.Command(filepath.Join(root, "shims", "python3"), "-c", pyenvProbe)
			host.Env = []string{"HOME=" + e.Home, "PATH=/usr/bin:/bin"}
			if out, err := host.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "SELECTED 3.99.1 HOOK host" {
				t.Errorf("the host's pyenv after the boxes: %v\n%s", err, out)
			}
		})
	}
}

// pyQuote returns s as a Python string literal.
func pyQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}
