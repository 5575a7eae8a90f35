package git

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none means valid
	}{
		{"zero", Config{}, nil},
		{"full", Config{
			Allow:          []string{"github.com/org", "GitHub.com:443/other/", "http://mirror.internal:8080/git"},
			PushAllow:      []string{"github.com/org/repo"},
			Credentials:    []Credential{{Prefix: "github.com/org", Username: "x-access-token", File: "/run/token"}},
			EgressUpstream: "https://egress.corp/git/",
		}, nil},
		{"ssh-form", Config{Allow: []string{"git@github.com:org/repo"}}, []string{"git.allow[0]", "ssh remote"}},
		{"scheme", Config{Allow: []string{"ssh://github.com/org"}}, []string{"git.allow[0]", `scheme "ssh"`}},
		{"userinfo", Config{Allow: []string{"https://u:p@github.com/org"}}, []string{"git.allow[0]", "credentials in the URL"}},
		{"glob", Config{Allow: []string{"github.com/org/*"}}, []string{"git.allow[0]", "not as patterns"}},
		{"dotdot", Config{PushAllow: []string{"github.com/org/../x"}}, []string{"git.pushAllow[0]", `".."`}},
		{"port", Config{Allow: []string{"github.com:99999/x"}}, []string{"git.allow[0]", "port"}},
		{"query", Config{Allow: []string{"https://github.com/org?x=1"}}, []string{"git.allow[0]", "query"}},
		{"scheme-clash", Config{Allow: []string{"http://h:8080/a", "https://h:8080/b"}}, []string{"git.allow[1]", "one host and port is one remote"}},
		{"cred-missing", Config{Allow: []string{"github.com"}, Credentials: []Credential{{}}}, []string{
			"git.credentials[0].prefix: required", "git.credentials[0].username: required", "git.credentials[0]: set file or command"}},
		{"cred-both", Config{Allow: []string{"github.com"}, Credentials: []Credential{{Prefix: "github.com", Username: "u", File: "/f", Command: []string{"c"}}}},
			[]string{"git.credentials[0]: set one of file and command"}},
		{"cred-uncovered", Config{Allow: []string{"github.com/org"}, Credentials: []Credential{{Prefix: "gitlab.com", Username: "u", File: "/f"}}},
			[]string{"git.credentials[0].prefix", "not covered by any git.allow entry"}},
		{"cred-broader-ok", Config{Allow: []string{"github.com/org/repo"}, Credentials: []Credential{{Prefix: "github.com", Username: "u", File: "/f"}}}, nil},
		{"cred-scheme", Config{Allow: []string{"github.com/org"}, Credentials: []Credential{{Prefix: "http://github.com/org", Username: "u", File: "/f"}}},
			[]string{"not covered"}},
		{"egress-http", Config{EgressUpstream: "http://egress.corp"}, []string{"git.egressUpstream", "https"}},
		{"egress-userinfo", Config{EgressUpstream: "https://u:p@egress.corp"}, []string{"git.egressUpstream", "credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		entry        string
		scheme, host string
		port         string
		path         string
		want         bool
	}{
		{"github.com/org", "", "github.com", "", "org/repo.git", true},
		{"GitHub.COM/org", "", "github.com", "", "org/repo.git", true},        // host case-insensitive
		{"github.com/org", "", "github.com", "443", "org/repo.git", true},     // default port
		{"github.com:443/org", "", "github.com", "", "org/repo.git", true},    // default port in the entry
		{"github.com/org", "", "github.com", "8443", "org/repo.git", false},   // other port
		{"github.com/org", "", "github.com", "", "Org/repo.git", false},       // path case-sensitive
		{"github.com/org", "", "github.com", "", "organisation/repo", false},  // whole elements only
		{"github.com/org/repo", "", "github.com", "", "org/repo.git", true},   // .git optional
		{"github.com/org/repo.git", "", "github.com", "", "org/repo", true},   // both ways
		{"github.com/org/repo", "", "github.com", "", "org/repo-fork", false}, // not a string prefix
		{"github.com/org/repo", "", "github.com", "", "org/repo/sub.git", true},
		{"github.com", "", "github.com", "", "any/thing", true},
		{"github.com", "http", "github.com", "", "any/thing", false}, // scheme
		{"http://mirror:8080/git", "", "mirror", "8080", "git/x.git", true},
		{"http://mirror:8080/git", "", "mirror", "", "git/x.git", false}, // http default is 80
		{"http://mirror/git", "", "mirror", "80", "git/x.git", true},
	} {
		e, err := parseEntry(tc.entry)
		if err != nil {
			t.Fatalf("%s: %v", tc.entry, err)
		}
		host, port, err := splitHostPort(tc.host)
		if err != nil {
			t.Fatal(err)
		}
		if tc.port != "" {
			port = tc.port
		}
		if got := e.matches(tc.scheme, host, port, strings.Split(tc.path, "/")); got != tc.want {
			t.Errorf("%q matches %s %s:%s/%s = %v, want %v", tc.entry, tc.scheme, tc.host, tc.port, tc.path, got, tc.want)
		}
	}
}

func TestLongestMatch(t *testing.T) {
	p, err := compile(Config{
		Allow: []string{"github.com", "github.com/org"},
		Credentials: []Credential{
			{Prefix: "github.com", Username: "a", File: "/f"},
			{Prefix: "github.com/org/repo", Username: "b", File: "/f"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := match(p.allow, "", "github.com", "", []string{"org", "x"}); e == nil || e.raw != "github.com/org" {
		t.Errorf("allow match = %v", e)
	}
	if c := p.credentialFor("https", "github.com", "", []string{"org", "repo.git"}); c == nil || c.cred.Username != "b" {
		t.Errorf("credential = %+v", c)
	}
	if c := p.credentialFor("https", "github.com", "", []string{"org", "other"}); c == nil || c.cred.Username != "a" {
		t.Errorf("credential = %+v", c)
	}
	if c := p.credentialFor("http", "github.com", "", []string{"org", "repo"}); c != nil {
		t.Errorf("credential over plain http = %+v", c)
	}
}

func TestCredentialFileRefused(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	if err := os.WriteFile(loose, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("  secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cred Credential
		want string // "" means success with "secret"
	}{
		{"good", Credential{File: good}, ""},
		{"mode", Credential{File: loose}, "chmod 600"},
		{"missing", Credential{File: filepath.Join(dir, "nope")}, "does not exist"},
		{"dir", Credential{File: dir}, "not a regular file"},
		{"command", Credential{Command: []string{"echo", "secret"}}, ""},
		{"command-fails", Credential{Command: []string{"false"}}, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := newSource("git.credentials[0]", tc.cred).Get(t.Context())
			if tc.want == "" {
				if err != nil || v != "secret" {
					t.Fatalf("get = %q, %v", v, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "git.credentials[0]") {
				t.Fatalf("err = %v, want %q naming the key", err, tc.want)
			}
		})
	}
	// Another owner is refused: relay's TestCredentialSource (the uid is the one compared).
}
