package git_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
	"github.com/agentbox/agentbox/internal/relay/session"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// A fixed, well-formed pairing for the golden file (never a live one).
const goldenPairing = session.Pairing("abp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")

func goldenGitconfig() gitrelay.Gitconfig {
	return gitrelay.Gitconfig{
		RelayURL: "http://127.0.0.1:7070",
		Pairing:  goldenPairing,
		Allow: []string{
			"github.com/org", "GitHub.com/other", "gitlab.com:8443/group",
			"http://mirror.internal:8080/git", "ssh-served.example/x",
		},
		SSHHosts: []string{"ssh-served.example"},
		Identity: gitrelay.Identity{
			"user.name":  `Jane "JD" Doe`,
			"user.email": "jane@example.com",
		},
	}
}

func TestGitconfigGolden(t *testing.T) {
	got, err := goldenGitconfig().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := goldenGitconfig().Bytes()
	if !bytes.Equal(got, again) {
		t.Fatal("Bytes is not deterministic")
	}
	golden := filepath.Join("testdata", "gitconfig.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGitconfigGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("gitconfig differs from %s (rerun with -update if intended):\n%s", golden, got)
	}
}

// TestGitconfigReadByGit checks git reads the generated file as meant: the values, the
// rewrites, and the emptied credential helper.
func TestGitconfigReadByGit(t *testing.T) {
	t.Parallel()
	gitBin, _ := gitPaths(t)
	b, err := goldenGitconfig().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	get := func(args ...string) string {
		cmd := exec.Command(gitBin, append([]string{"config", "--global"}, args...)...)
		cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, gitrelay.Env(p)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git config %v: %v", args, err)
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	if v := get("--get", "user.name"); v != `Jane "JD" Doe` {
		t.Errorf("user.name = %q", v)
	}
	if v := get("--get-all", "credential.helper"); v != "" {
		t.Errorf("credential.helper = %q", v)
	}
	if v := get("--get-urlmatch", "http.extraHeader", "http://127.0.0.1:7070/git/github.com/org/x"); v != "X-Agentbox-Pairing: "+goldenPairing.Reveal() {
		t.Errorf("extraHeader for the relay = %q", v)
	}
	// The header is scoped to the relay: another URL does not get it.
	cmd := exec.Command(gitBin, "config", "--global", "--get-urlmatch", "http.extraHeader", "https://github.com/org/x")
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, gitrelay.Env(p)...)
	if out, err := cmd.Output(); err == nil {
		t.Errorf("extraHeader also applies to github.com: %q", out)
	}
	for _, tc := range []struct{ from, to string }{
		{"https://github.com/", "http://127.0.0.1:7070/git/github.com/"},
		{"https://gitlab.com:8443/", "http://127.0.0.1:7070/git/gitlab.com:8443/"},
		{"http://mirror.internal:8080/", "http://127.0.0.1:7070/git/mirror.internal:8080/"},
		{"git@github.com:", "http://127.0.0.1:7070/git/.ssh/github.com/"},
	} {
		if !strings.Contains(get("--get-regexp", `^url\..*\.insteadof$`), tc.to+".insteadof "+tc.from) {
			t.Errorf("no rewrite of %s to %s", tc.from, tc.to)
		}
	}
	if strings.Contains(string(b), "git@ssh-served.example") {
		t.Error("an ssh-served host's ssh form is rewritten to the relay")
	}
}

func TestGitconfigRefuses(t *testing.T) {
	for name, g := range map[string]gitrelay.Gitconfig{
		"no-pairing":     {RelayURL: "http://127.0.0.1:1"},
		"remote-relay":   {RelayURL: "http://relay.example:1", Pairing: goldenPairing},
		"https-relay":    {RelayURL: "https://127.0.0.1:1", Pairing: goldenPairing},
		"bad-allow":      {RelayURL: "http://127.0.0.1:1", Pairing: goldenPairing, Allow: []string{"ftp://x"}},
		"foreign-key":    {RelayURL: "http://127.0.0.1:1", Pairing: goldenPairing, Identity: gitrelay.Identity{"core.sshCommand": "evil"}},
		"newline-in-key": {RelayURL: "http://127.0.0.1:1", Pairing: goldenPairing, Identity: gitrelay.Identity{"user.name": "a\n[core]\nfsmonitor=evil"}},
	} {
		if _, err := g.Bytes(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReadIdentity reads only the identity keys of a user's global config.
func TestReadIdentity(t *testing.T) {
	gitBin, _ := gitPaths(t)
	home := t.TempDir()
	cfg := "[user]\n\tname = Host User\n\temail = host@example.com\n[credential]\n\thelper = store\n[core]\n\tsshCommand = evil\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	id, err := gitrelay.ReadIdentity(t.Context(), gitBin)
	if err != nil {
		t.Fatal(err)
	}
	want := gitrelay.Identity{"user.name": "Host User", "user.email": "host@example.com"}
	if len(id) != len(want) || id["user.name"] != want["user.name"] || id["user.email"] != want["user.email"] {
		t.Errorf("identity = %v, want %v", id, want)
	}
}

// TestIdentityCache asks git again only when the global configuration changed, and every time
// when it includes other files.
func TestIdentityCache(t *testing.T) {
	gitBin, _ := gitPaths(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	// A git that counts its runs, then is the real one.
	calls := filepath.Join(home, "calls")
	wrapper := filepath.Join(home, "git")
	script := "#!/bin/sh\necho x >> '" + calls + "'\nexec '" + gitBin + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &gitrelay.IdentityCache{Git: wrapper}
	read := func() string {
		id, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return id["user.name"]
	}

	write("[user]\n\tname = First\n")
	if got := read(); got != "First" {
		t.Fatalf("user.name = %q, want First", got)
	}
	if got := read(); got != "First" || runs() != 1 {
		t.Fatalf("second read: user.name %q after %d git runs, want First after 1", got, runs())
	}
	write("[user]\n\tname = Second\n")
	if got := read(); got != "Second" || runs() != 2 {
		t.Fatalf("after a change: user.name %q after %d git runs, want Second after 2", got, runs())
	}
	// The XDG file counts too.
	if err := os.MkdirAll(filepath.Join(home, ".config", "git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "git", "config"), []byte("[user]\n\temail = x@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// (git reads it only when ~/.gitconfig is absent; the key does not need to know that).
	read()
	if runs() != 3 {
		t.Fatalf("after the XDG file changed: %d git runs, want 3", runs())
	}
	// Configuration from the environment is invisible to the key: git is asked every time.
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "user.name")
	t.Setenv("GIT_CONFIG_VALUE_0", "FromEnv")
	read()
	read()
	if runs() != 5 {
		t.Fatalf("with GIT_CONFIG_COUNT set: %d git runs, want 5", runs())
	}
}
