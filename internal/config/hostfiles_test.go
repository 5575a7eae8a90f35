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
	paths, index := CommandPaths([]string{"/bin/sh", "/ws/scripts/token", "-c", `cat "/ws/a" ~/k; x=$HOME/h:/p/q`, "--file=/f", "show", "rel/x"}, "/home/u")
	want := []string{"/ws/scripts/token", "/ws/a", "/home/u/k", "/home/u/h", "/p/q", "/f"}
	if !slices.Equal(paths, want) || !slices.Equal(index, []int{1, 3, 3, 3, 3, 4}) {
		t.Fatalf("CommandPaths = %q %v, want %q [1 3 3 3 3 4]", paths, index, want)
	}
	if p, _ := CommandPaths([]string{"/ws/helper"}, "/home/u"); p != nil {
		t.Fatalf("the program itself is no argument: %q", p)
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
