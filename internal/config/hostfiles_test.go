package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandPaths (review 19, F1): the paths a credential helper's arguments name, which the
// launch compares with the workspace: an absolute argument, an absolute path inside one (a
// shell's -c script, --file=/k, a list), and ~/ or $HOME/ read as the home; no relative word.
func TestCommandPaths(t *testing.T) {
	paths, index, err := CommandPaths([]string{"/bin/sh", "/ws/scripts/token", "-c", `cat "/ws/a" ~/k; x=$HOME/h:/p/q`, "--file=/f", "show", "rel/x", `"${HOME}"/b`, `"ho""me/u/c"`}, "/home/u")
	want := []string{"/ws/scripts/token", "/ws/a", "/home/u/k", "/home/u/h", "/p/q", "/f", "/rel/x", "/home/u/b", "/home/u/c"}
	if err != nil || !slices.Equal(paths, want) || !slices.Equal(index, []int{1, 3, 3, 3, 3, 4, 6, 7, 8}) {
		t.Fatalf("CommandPaths = %q %v %v, want %q [1 3 3 3 3 4 6 7 8]", paths, index, err, want)
	}
	if p, _, _ := CommandPaths([]string{"/ws/helper"}, "/home/u"); p != nil {
		t.Fatalf("the program itself is no argument: %q", p)
	}
}

// TestCheckCommand (review 19b, finding 1): the credential commands whose paths CommandPaths
// cannot read are refused, naming the argument and the fix; ordinary helpers pass.
func TestCheckCommand(t *testing.T) {
	for _, ok := range [][]string{
		{"gh", "auth", "token"},
		{"pass", "show", "anthropic/key"},
		{"op", "read", "op://vault/item/field"},
		{"/usr/local/bin/get-token"},
		{"sh", "-c", "cat ~/.keys/a"},
		{"/bin/sh", "-c", `cat "$HOME/.keys/a" | tr -d '\n'`},
		{"python3", "/opt/tools/token.py"},
		{"gawk", "-f", "/opt/tools/token.awk"},
		{"sh", "-c", "f() { cat ~/k; }; f"},
	} {
		if err := CheckCommand(ok); err != nil {
			t.Errorf("CheckCommand(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range [][]string{
		{"/bin/sh", "-c", "cd && exec ./proj/token"},
		{"/usr/bin/env", "-C", "/home/u", "proj/token"},
		{"/usr/bin/env", "--chdir=/home/u", "proj/token"},
		{"/bin/sh", "./proj/token"},
		{"/bin/sh", "-c", "sh ../u/proj/token"},
		{"/bin/sh", "-c", `D=/home/u; sh "$D"/proj/token`},
		{"/bin/sh", "-c", "sh $(printf /home/u/proj)/token"},
		{"/bin/sh", "-c", "sh `printf /home/u/proj`/token"},
		{"/bin/sh", "-c", `sh "$1"`, "x", "/home/u/proj/token"},
		{"/bin/sh", "-c", "sh ~u/proj/token"},
		{"/bin/sh", "-c", "sh /home/u/pr*/token"},
		{"/bin/bash", "-c", "sh /home/u/{proj,x}/token"},
		{"python3", "-c", "import os; os.system('sh home/u/' + 'proj/token')"},
		{"/bin/sh", "-c", "perl -e 'system q(sh home/u/) . q(proj/token)'"},
		{"awk", "BEGIN{system(\"sh home/u/\" \"proj/token\")}"},
	} {
		err := CheckCommand(bad)
		if err == nil || !strings.Contains(err.Error(), "absolute path") {
			t.Errorf("CheckCommand(%q) = %v, want refused with the fix", bad, err)
		}
	}
}

// TestLoadOptionsFiles (review 19, F2): the files the daemon reads its configuration from,
// whether or not they exist: $AGENTBOX_CONFIG (made absolute), else the XDG or home one, and
// the policy; none of the user's with PolicyOnly.
func TestLoadOptionsFiles(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	abs, _ := filepath.Abs("rel.yaml")
	for _, c := range []struct {
		name string
		o    LoadOptions
		want []string
	}{
		{"home", LoadOptions{Getenv: env(map[string]string{"HOME": "/h"})}, []string{"/h/.config/agentbox/config.yaml", DefaultPolicyFile}},
		{"xdg", LoadOptions{Getenv: env(map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/x"})}, []string{"/x/agentbox/config.yaml", DefaultPolicyFile}},
		{"AGENTBOX_CONFIG", LoadOptions{Getenv: env(map[string]string{"HOME": "/h", "AGENTBOX_CONFIG": "rel.yaml"})}, []string{abs, DefaultPolicyFile}},
		{"named", LoadOptions{UserFile: "/u.yaml", PolicyFile: "/p.yaml"}, []string{"/u.yaml", "/p.yaml"}},
		{"policy only", LoadOptions{PolicyOnly: true, UserFile: "/u.yaml"}, []string{DefaultPolicyFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.o.Files(); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("Files() = %q, want %q", got, c.want)
			}
		})
	}
}

// TestLoadRefusesUnreadableCommand (review 19b, finding 1): a credential helper CheckCommand
// refuses is refused when the configuration is loaded, at its key, with the fix.
func TestLoadRefusesUnreadableCommand(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, key string }{
		{"gateway:\n  anthropic:\n    credential:\n      command: [/bin/sh, -c, 'cd && exec ./proj/token']\n", "gateway.anthropic.credential.command"},
		{"git:\n  allow: [git.example.org/org]\n  credentials:\n    - {prefix: git.example.org/org, username: x, command: [/usr/bin/env, -C, /home/u, ./proj/token]}\n", "git.credentials[0].command"},
	} {
		user := writeFile(t, filepath.Join(dir, "config.yaml"), c.yaml, 0o600)
		_, err := Load(LoadOptions{UserFile: user, PolicyFile: filepath.Join(dir, "p.yaml")})
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), "absolute path") {
			t.Errorf("Load(%q) = %v, want refused at %s with the fix", c.yaml, err, c.key)
		}
	}
}
