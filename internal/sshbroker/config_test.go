package sshbroker

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs (run with -update after review):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

const fpA = "SHA256:ODo3vCcupCo3kVuodvrQU4RTgYHRjLp/cFIDYnT7wQg"

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" means valid
	}{
		{"Zero", Config{}, ""},
		{"Hosts", Config{Hosts: []string{"github.com", "GitLab.example.com:2222", "[::1]:22", "10.0.0.1"}, Keys: []string{fpA}}, ""},
		{"UserInHost", Config{Hosts: []string{"git@github.com"}}, "git.ssh.hosts[0]: \"git@github.com\": write the host only"},
		{"URL", Config{Hosts: []string{"ssh://github.com"}}, "not a URL"},
		{"BadPort", Config{Hosts: []string{"github.com:0"}}, "port \"0\""},
		{"BadName", Config{Hosts: []string{"exa mple.com"}}, "not a valid host name"},
		{"OptionLike", Config{Hosts: []string{"-oProxyCommand=x"}}, "not a valid host name"},
		{"Duplicate", Config{Hosts: []string{"github.com", "GITHUB.com:2222"}}, "git.ssh.hosts[1]: \"GITHUB.com:2222\" names host github.com again"},
		{"MD5Key", Config{Keys: []string{"MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48"}}, "MD5 fingerprints are not accepted"},
		{"ShortKey", Config{Keys: []string{"SHA256:abc"}}, "git.ssh.keys[0]"},
		{"BareKey", Config{Keys: []string{"ODo3vCcupCo3kVuodvrQU4RTgYHRjLp/cFIDYnT7wQg"}}, "want a SHA-256 fingerprint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestHostNames(t *testing.T) {
	got := Config{Hosts: []string{"GitHub.com", "gitlab.example.com:2222"}}.HostNames()
	if !reflect.DeepEqual(got, []string{"github.com", "gitlab.example.com"}) {
		t.Fatalf("HostNames = %v", got)
	}
}

// TestDisabledAddsNothing guards "without git.ssh.hosts the plan is unchanged": a Config
// without hosts (keys or not) contributes the zero value, so the plan equals one built
// without the broker.
func TestDisabledAddsNothing(t *testing.T) {
	for _, c := range []Config{{}, {Keys: []string{fpA}}} {
		got, err := Contributions(c)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, plan.Contributions{}) {
			t.Fatalf("Contributions(%+v) = %+v, want zero", c, got)
		}
		in := plan.Input{ID: "x", Program: "/usr/bin/true", Workspace: "/w", Home: "/home/u", RunDir: "/r"}
		p1, err := plan.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		in.Brokers = got
		p2, _ := plan.Build(in)
		b1, _ := json.Marshal(p1)
		b2, _ := json.Marshal(p2)
		if string(b1) != string(b2) {
			t.Fatalf("the plan changed:\n%s\n%s", b1, b2)
		}
	}
	if _, err := Start(Options{RunDir: t.TempDir()}); err == nil {
		t.Fatal("Start with no host succeeded")
	}
}

// TestContributionsGolden pins what an enabled broker adds to the plan and the ssh_config it
// writes: ports mirror a configured port of 1024 or more, others count up from FirstLegPort.
func TestContributionsGolden(t *testing.T) {
	cfg := Config{Hosts: []string{"github.com", "gitlab.example.com:2222", "git.internal:7022", "[fd00::1]:22"}, Keys: []string{fpA}}
	c, err := Contributions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	golden(t, "contributions.json", append(b, '\n'))
	legs, _ := legsOf(cfg, "/r")
	golden(t, "ssh_config", sshConfigFile(legs))
}

func TestSeedKnownHosts(t *testing.T) {
	dir := t.TempDir()
	key := "AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ"
	salt := []byte("saltsaltsaltsaltsalt")
	user := strings.Join([]string{
		"# comment",
		"github.com,140.82.121.4 ssh-ed25519 " + key + " plain",
		hashName("[gitlab.example.com]:2222", salt) + " ssh-ed25519 " + key,
		hashName("gitlab.example.com", salt) + " ssh-rsa " + key + " (port 22: not the configured port)",
		"*.internal,!secret.internal ecdsa-sha2-nistp256 " + key,
		"@cert-authority *.corp ssh-ed25519 " + key,
		"@revoked github.com ssh-rsa " + key,
		"@bogus github.com ssh-rsa " + key,
		"unrelated.org ssh-ed25519 " + key,
		"github.com ssh-ed25519 not-base64!",
		"GITHUB.COM ssh-ed25519 " + key,
	}, "\n")
	f1 := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(f1, []byte(user), 0o600); err != nil {
		t.Fatal(err)
	}
	hosts := []Host{{"github.com", 22}, {"gitlab.example.com", 2222}, {"git.internal", 22}, {"secret.internal", 22}, {"git.corp", 22}, {"missing.org", 22}}
	got, found, err := seedKnownHosts(hosts, []string{f1, filepath.Join(dir, "absent")})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"github.com ssh-ed25519 " + key,
		"[gitlab.example.com]:2222 ssh-ed25519 " + key,
		"git.internal ecdsa-sha2-nistp256 " + key,
		"@cert-authority git.corp ssh-ed25519 " + key,
		"@revoked github.com ssh-rsa " + key,
	}, "\n") + "\n"
	if string(got) != want {
		t.Fatalf("seeded:\n%s\nwant:\n%s", got, want)
	}
	if found["missing.org"] != 0 || found["secret.internal"] != 0 || found["github.com"] != 1 || found["[gitlab.example.com]:2222"] != 1 {
		t.Fatalf("found = %v", found)
	}
}

func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "a", true}, {"*.com", "github.com", true}, {"*.com", "github.org", false},
		{"gi?hub.com", "github.com", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "aXbY", false},
		{"[h]:22", "[h]:22", true}, {"", "", true}, {"", "a", false},
	} {
		if got := wildcardMatch(c.p, c.s); got != c.want {
			t.Errorf("wildcardMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}
