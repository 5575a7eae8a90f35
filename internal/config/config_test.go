package config

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite docs/config.schema.json")

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		line, col int
		field     string
		msg       string // substring of the message
	}{
		{"unknown key", "egress: deny\nfoo: 1\n", 2, 1, "foo", "unknown key (known keys: engine, egress, egressAllow, console, stopGrace, launches, audit, sessions, limits, integrity, protect, programs, models, gateway, git, managed, containment)"},
		{"nested unknown key", "console:\n  clipboard: deny\n  clip: allow\n", 3, 3, "console.clip", "unknown key (known keys of console: clipboard, detachKeys)"},
		{"nested unknown key flow", "sessions: {max: 3, min: 1}\n", 1, 20, "sessions.min", "unknown key"},
		{"wrong type string for int", "sessions:\n  max: many\n", 2, 8, "sessions.max", "wrong type: got string, want integer"},
		{"wrong type float for int", "sessions:\n  max: 3.5\n", 2, 8, "sessions.max", "wrong type: got number, want integer"},
		{"wrong type int for enum", "engine: 1\n", 1, 9, "engine", "wrong type: got integer, want string"},
		{"wrong type bool for enum", "egress: true\n", 1, 9, "egress", "wrong type: got boolean, want string"},
		{"wrong type scalar for section", "console: allow\n", 1, 10, "console", "wrong type: got string, want mapping"},
		{"wrong type list for section", "sessions:\n  - 1\n", 2, 3, "sessions", "wrong type: got list, want mapping"},
		{"wrong type mapping for enum", "egress:\n  mode: deny\n", 2, 3, "egress", "wrong type: got mapping, want string"},
		{"top level list", "- egress\n", 1, 1, "", "wrong type: got list, want mapping"},
		{"top level scalar", "egress\n", 1, 1, "", "wrong type: got string, want mapping"},
		{"invalid enum", "egress: open\n", 1, 9, "egress", `invalid value "open" (allowed: deny, allow)`},
		{"invalid engine", "engine: docker\n", 1, 9, "engine", `invalid value "docker" (allowed: native, bwrap)`},
		{"invalid nested enum", "console:\n  clipboard: maybe\n", 2, 14, "console.clipboard", `invalid value "maybe" (allowed: deny, allow)`},
		{"invalid protect.instructions", "protect:\n  instructions: ro\n", 2, 17, "protect.instructions", `invalid value "ro" (allowed: writable, readonly)`},
		{"enum is case sensitive", "egress: Deny\n", 1, 9, "egress", `invalid value "Deny"`},
		{"detachKeys not a key", "console:\n  detachKeys: ctrl-1\n", 2, 15, "console.detachKeys", `"ctrl-1" is not a key (each key is one printable character or ctrl-<a-z`},
		{"detachKeys empty key", "console: {detachKeys: 'ctrl-p,,ctrl-q'}\n", 1, 23, "console.detachKeys", `"" is not a key`},
		{"detachKeys alt", "console:\n  detachKeys: alt-x\n", 2, 15, "console.detachKeys", `"alt-x" is not a key`},
		{"retention zero", "launches:\n  retention: 0s\n", 2, 14, "launches.retention", "must be positive"},
		{"audit retention negative", "audit:\n  retention: -1h\n", 2, 14, "audit.retention", "must be positive"},
		{"retention below its minimum", "launches:\n  retention: 1ns\n", 2, 14, "launches.retention", "invalid value 1ns (allowed: 1h to 87600h)"},
		{"retention just below its minimum", "launches:\n  retention: 59m59s\n", 2, 14, "launches.retention", "invalid value 59m59s (allowed: 1h to 87600h)"},
		{"audit retention below its minimum", "audit:\n  retention: 10m\n", 2, 14, "audit.retention", "invalid value 10m0s (allowed: 1h to 87600h)"},
		{"audit retention above its maximum", "audit:\n  retention: 87601h\n", 2, 14, "audit.retention", "invalid value 87601h0m0s (allowed: 1h to 87600h)"},
		{"interval below its minimum", "integrity:\n  interval: 1ns\n", 2, 13, "integrity.interval", "invalid value 1ns (allowed: 1s to 24h)"},
		{"interval just below its minimum", "integrity:\n  interval: 999ms\n", 2, 13, "integrity.interval", "invalid value 999ms (allowed: 1s to 24h)"},
		{"interval above its maximum", "integrity:\n  interval: 25h\n", 2, 13, "integrity.interval", "invalid value 25h0m0s (allowed: 1s to 24h)"},
		{"bad duration", "stopGrace: 5q\n", 1, 12, "stopGrace", `invalid duration "5q"`},
		{"duration without unit", "stopGrace: 5\n", 1, 12, "stopGrace", "wrong type: got integer, want duration"},
		{"negative duration", "stopGrace: -1s\n", 1, 12, "stopGrace", "must be positive"},
		{"zero duration", "stopGrace: 0s\n", 1, 12, "stopGrace", "must be positive"},
		{"below minimum", "sessions:\n  max: 0\n", 2, 8, "sessions.max", "invalid value 0 (allowed: 1 to 1024)"},
		{"above maximum", "sessions:\n  max: 1025\n", 2, 8, "sessions.max", "invalid value 1025 (allowed: 1 to 1024)"},
		{"integer overflow", "sessions:\n  max: 99999999999999999999999\n", 2, 8, "sessions.max", "out of range"},
		{"duplicate key", "egress: deny\negress: allow\n", 2, 1, "", `mapping key "egress" already defined at [1:1]`},
		{"syntax error", "egress: [deny\n", 1, 9, "", "not found"},
		{"anchor", "egress: &e deny\n", 1, 9, "egress", "anchors, aliases and tags are not supported"},
		{"tag", "egress: !!str deny\n", 1, 9, "egress", "anchors, aliases and tags are not supported"},
		{"non-string key", "1: deny\n", 1, 1, "", `key "1" is not a plain string`},
		{"two documents", "egress: deny\n---\nengine: native\n", 3, 1, "", "more than one YAML document"},
		{"egressAllow wildcard over a public suffix", "egressAllow:\n  - registry.example.org\n  - '*.com'\n", 3, 5, "egressAllow[1]", "public suffix"},
		{"egressAllow wildcard over a single label", "egressAllow: ['*.internal']\n", 1, 15, "egressAllow[0]", "single label"},
		{"egressAllow bad port", "egressAllow:\n  - modules.example.com:99999\n", 2, 5, "egressAllow[0]", "invalid port"},
		{"egressAllow not a list", "egressAllow: registry.example.org\n", 1, 14, "egressAllow", "wrong type: got string, want list"},
		{"egressAllow in egress", "egress:\n  allow: [registry.example.org]\n", 2, 3, "egress", "wrong type: got mapping, want string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode("config.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("decode(%q) succeeded, want an error", tt.yaml)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T is not *InvalidError", err)
			}
			if ie.File != "config.yaml" || ie.Line != tt.line || ie.Column != tt.col || ie.Field != tt.field {
				t.Errorf("got %s:%d:%d field %q, want config.yaml:%d:%d field %q (%v)", ie.File, ie.Line, ie.Column, ie.Field, tt.line, tt.col, tt.field, err)
			}
			if !strings.Contains(ie.Msg, tt.msg) {
				t.Errorf("message %q does not contain %q", ie.Msg, tt.msg)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	_, err := decode("config.yaml", []byte("engine: native\n\n\nconsole:\n  clipboard: open\n"))
	want := `config.yaml:5:14: console.clipboard: invalid value "open" (allowed: deny, allow)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Config
		set  []string
	}{
		{"empty", "", Config{}, nil},
		{"comment only", "# nothing here\n", Config{}, nil},
		{"empty document", "---\n", Config{}, nil},
		{"null values are absent", "egress:\nconsole:\n", Config{}, nil},
		{"empty section", "console: {}\n", Config{}, nil},
		{"all keys", "engine: bwrap\negress: allow\nconsole:\n  clipboard: allow\nstopGrace: 1m30s\nsessions:\n  max: 1024\nintegrity:\n  interval: 5m\n",
			Config{Engine: EngineBwrap, Egress: EgressAllow, Console: Console{Clipboard: ClipboardAllow}, StopGrace: Duration(90 * time.Second), Sessions: Sessions{Max: 1024}, Integrity: Integrity{Interval: Duration(5 * time.Minute)}},
			[]string{"engine", "egress", "console.clipboard", "stopGrace", "sessions.max", "integrity.interval"}},
		{"egress deny with an allowlist", "egress: deny\negressAllow:\n  - registry.example.org\n  - '*.files.example.net'\n  - modules.example.com:443\n  - 10.0.0.5:8443\n",
			Config{Egress: EgressDeny, EgressAllow: []string{"registry.example.org", "*.files.example.net", "modules.example.com:443", "10.0.0.5:8443"}},
			[]string{"egress", "egressAllow"}},
		{"detach keys", "console:\n  detachKeys: 'ctrl-],q'\n", Config{Console: Console{DetachKeys: "ctrl-],q"}}, []string{"console.detachKeys"}},
		{"launch retention", "launches:\n  retention: 24h\n", Config{Launches: Launches{Retention: Duration(24 * time.Hour)}}, []string{"launches.retention"}},
		{"audit retention", "audit:\n  retention: 168h\n", Config{Audit: Audit{Retention: Duration(168 * time.Hour)}}, []string{"audit.retention"}},
		{"detach keys off", "console:\n  detachKeys: none\n", Config{Console: Console{DetachKeys: "none"}}, []string{"console.detachKeys"}},
		{"egress allow still accepted", "egress: allow\n", Config{Egress: EgressAllow}, []string{"egress"}},
		{"flow and quoted", `{"egress": "deny", sessions: {max: 1}, stopGrace: '250ms'}`,
			Config{Egress: EgressDeny, StopGrace: Duration(250 * time.Millisecond), Sessions: Sessions{Max: 1}},
			[]string{"egress", "sessions.max", "stopGrace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := decode("config.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l.cfg, tt.want) {
				t.Errorf("got %+v, want %+v", l.cfg, tt.want)
			}
			var set []string
			for _, k := range Keys() {
				if _, ok := l.set[k]; ok {
					set = append(set, k)
				}
			}
			if len(set) != len(l.set) {
				t.Errorf("set %v holds paths that are not keys", l.set)
			}
			var want []string
			for _, k := range Keys() {
				for _, s := range tt.set {
					if s == k {
						want = append(want, k)
					}
				}
			}
			if !reflect.DeepEqual(set, want) {
				t.Errorf("set keys %v, want %v", set, want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	if got := (Config{}).WithDefaults(); !reflect.DeepEqual(got, Defaults()) {
		t.Errorf("zero config with defaults = %+v, want %+v", got, Defaults())
	}
	c := Config{Egress: EgressAllow, Sessions: Sessions{Max: 3}}.WithDefaults()
	if c.Egress != EgressAllow || c.Sessions.Max != 3 || c.Engine != EngineNative || c.StopGrace != Duration(5*time.Second) {
		t.Errorf("WithDefaults changed a set field or missed a zero one: %+v", c)
	}
}

// writeFile writes a file with mode perm (umask ignored).
func writeFile(t *testing.T, path, data string, perm os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "config.yaml"), "egress: allow\nconsole:\n  clipboard: allow\nstopGrace: 10s\n", 0o600)
	pdir := filepath.Join(dir, "etc")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := writeFile(t, filepath.Join(pdir, "policy.yaml"), "# locked by IT\negress: deny\nsessions:\n  max: 8\n", 0o644)

	e, err := Load(LoadOptions{UserFile: user, PolicyFile: policy, PolicyOwner: os.Getuid()})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Engine: EngineNative, Egress: EgressDeny, Console: Console{Clipboard: ClipboardAllow, DetachKeys: "ctrl-p,ctrl-q"}, StopGrace: Duration(10 * time.Second), Launches: Launches{Retention: Duration(720 * time.Hour)}, Audit: Audit{Retention: Duration(720 * time.Hour), MaxRowsPerLaunch: 20000}, Sessions: Sessions{Max: 8}, Integrity: Integrity{Interval: Duration(60 * time.Second)},
		Limits:      Limits{TmpMiB: 2048, HomeMiB: 2048, ShmMiB: 64, Processes: 2048},
		Protect:     Protect{Instructions: InstructionsWritable},
		Managed:     Managed{ClaudeCode: ClaudeCodeManaged{AutoUpdates: AutoUpdatesOff}},
		Containment: Containment{Violations: ViolationsReport, ScanInterval: Duration(10 * time.Second)}}
	if !reflect.DeepEqual(e.Config, want) {
		t.Errorf("effective %+v, want %+v", e.Config, want)
	}
	wantSrc := map[string]Source{
		"engine":               {Kind: SourceDefault},
		"egress":               {Kind: SourcePolicy, File: policy, Line: 2},
		"egressAllow":          {Kind: SourceDefault},
		"console.clipboard":    {Kind: SourceUser, File: user, Line: 3},
		"console.detachKeys":   {Kind: SourceDefault},
		"launches.retention":   {Kind: SourceDefault},
		"audit.retention":      {Kind: SourceDefault},
		"stopGrace":            {Kind: SourceUser, File: user, Line: 4},
		"sessions.max":         {Kind: SourcePolicy, File: policy, Line: 4},
		"integrity.interval":   {Kind: SourceDefault},
		"protect.instructions": {Kind: SourceDefault},
		"programs":             {Kind: SourceDefault},
		"models":               {Kind: SourceDefault},

		"managed.claudeCode.allowManagedHooksOnly":      {Kind: SourceDefault},
		"managed.claudeCode.allowManagedMcpServersOnly": {Kind: SourceDefault},
		"managed.claudeCode.allowedMcpServers":          {Kind: SourceDefault},
		"managed.claudeCode.autoUpdates":                {Kind: SourceDefault},
	}
	for _, k := range []string{"sessions.idleTimeout", "sessions.allowedClients", "git.allow", "git.pushAllow", "git.credentials",
		"git.egressUpstream", "git.ssh.hosts", "git.ssh.keys", "containment.programs", "containment.violations", "containment.scanInterval",
		"limits.tmpMiB", "limits.homeMiB", "limits.shmMiB", "limits.processes", "audit.maxRowsPerLaunch"} {
		wantSrc[k] = Source{Kind: SourceDefault}
	}
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		for _, k := range []string{"url", "credential.file", "credential.command", "credential.ttl", "credential.header", "allow", "serverTools"} {
			wantSrc["gateway."+p+"."+k] = Source{Kind: SourceDefault}
		}
	}
	if !reflect.DeepEqual(e.Sources, wantSrc) {
		t.Errorf("sources %+v, want %+v", e.Sources, wantSrc)
	}
	if !e.Locked("egress") || e.Locked("stopGrace") {
		t.Errorf("Locked: egress %v (want true), stopGrace %v (want false)", e.Locked("egress"), e.Locked("stopGrace"))
	}
	if !reflect.DeepEqual(e.Files(), []string{user, policy}) {
		t.Errorf("files %v", e.Files())
	}
	entries := e.Entries()
	if len(entries) != len(Keys()) || entries[1].Key != "egress" || entries[1].Value != EgressDeny || !entries[1].Locked {
		t.Errorf("entries %+v", entries)
	}
}

func TestLoadDefaults(t *testing.T) {
	dir := t.TempDir()
	e, err := Load(LoadOptions{
		PolicyFile: filepath.Join(dir, "no-policy.yaml"),
		Getenv:     env(map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "xdg"), "HOME": dir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e.Config, Defaults()) || len(e.Files()) != 0 {
		t.Errorf("got %+v from %v, want defaults and no files", e.Config, e.Files())
	}
	for k, s := range e.Sources {
		if s.Kind != SourceDefault {
			t.Errorf("%s from %+v, want default", k, s)
		}
	}
}

func TestUserFile(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		want     string
		required bool
		err      bool
	}{
		{"AGENTBOX_CONFIG wins", map[string]string{"AGENTBOX_CONFIG": "/x/c.yaml", "XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/x/c.yaml", true, false},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/h"}, "/xdg/agentbox/config.yaml", false, false},
		{"relative XDG_CONFIG_HOME ignored", map[string]string{"XDG_CONFIG_HOME": "xdg", "HOME": "/h"}, "/h/.config/agentbox/config.yaml", false, false},
		{"HOME", map[string]string{"HOME": "/h"}, "/h/.config/agentbox/config.yaml", false, false},
		{"nothing", map[string]string{}, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, req, err := UserFile(env(tt.env))
			if (err != nil) != tt.err || got != tt.want || req != tt.required {
				t.Errorf("got %q, %v, %v; want %q, %v, error %v", got, req, err, tt.want, tt.required, tt.err)
			}
		})
	}
}

func TestLoadExplicitMissingIsError(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	_, err := Load(LoadOptions{PolicyFile: filepath.Join(dir, "p.yaml"), Getenv: env(map[string]string{"AGENTBOX_CONFIG": missing, "HOME": dir})})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("got %v, want a not-exist error naming %s", err, missing)
	}
}

func TestLoadInvalidAppliesNothing(t *testing.T) {
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "config.yaml"), "egress: allow\nsessions:\n  max: 0\n", 0o600)
	e, err := Load(LoadOptions{UserFile: user, PolicyFile: filepath.Join(dir, "p.yaml")})
	if !errors.Is(err, ErrInvalid) || e != nil {
		t.Fatalf("got %+v, %v; want nil and ErrInvalid", e, err)
	}
	// An invalid policy is refused the same way.
	good := writeFile(t, filepath.Join(dir, "good.yaml"), "egress: allow\n", 0o600)
	pol := writeFile(t, filepath.Join(dir, "policy.yaml"), "egress: deny\nbogus: 1\n", 0o644)
	if _, err := Load(LoadOptions{UserFile: good, PolicyFile: pol, PolicyOwner: os.Getuid()}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid policy: got %v, want ErrInvalid", err)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good.yaml"), "engine: bwrap\n", 0o600)
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "engine: runc\n", 0o600)
	if _, err := Validate(good); err != nil {
		t.Errorf("Validate(good) = %v", err)
	}
	_, err := Validate(bad)
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.File != bad || ie.Field != "engine" {
		t.Errorf("Validate(bad) = %v, want an InvalidError for %s field engine", err, bad)
	}
	if _, err := Validate(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Validate(dir) = %v, want not a regular file", err)
	}
	big := writeFile(t, filepath.Join(dir, "big.yaml"), "# "+strings.Repeat("x", maxFileSize)+"\n", 0o600)
	if _, err := Validate(big); !errors.Is(err, ErrInvalid) {
		t.Errorf("Validate(big) = %v, want ErrInvalid", err)
	}
}

// TestPolicyOwnership guards the admin-only channel: a policy that an ordinary user could have
// written must not lock (or unlock) anything.
func TestPolicyOwnership(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to create files owned by another uid (os.Chown)")
	}
	const other = 1001
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, file string)
		msg   string
	}{
		{"root owned 0644 is trusted", func(t *testing.T, dir, file string) {}, ""},
		{"file owned by user", func(t *testing.T, dir, file string) { chown(t, file, other) }, "is owned by uid 1001, not root"},
		{"file group writable", func(t *testing.T, dir, file string) { chmod(t, file, 0o664) }, "writable by group or others"},
		{"file world writable", func(t *testing.T, dir, file string) { chmod(t, file, 0o646) }, "writable by group or others"},
		{"dir owned by user", func(t *testing.T, dir, file string) { chown(t, dir, other) }, "is owned by uid 1001, not root"},
		{"dir world writable", func(t *testing.T, dir, file string) { chmod(t, dir, 0o777) }, "writable by group or others"},
		{"symlink to user owned file", func(t *testing.T, dir, file string) {
			target := filepath.Join(t.TempDir(), "p.yaml")
			writeFile(t, target, "egress: allow\n", 0o644)
			chown(t, target, other)
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 1001, not root"},
		{"symlink into user owned dir", func(t *testing.T, dir, file string) {
			udir := t.TempDir()
			target := writeFile(t, filepath.Join(udir, "p.yaml"), "egress: deny\n", 0o644)
			chown(t, udir, other)
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
		}, "is owned by uid 1001, not root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "etc")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			chmod(t, dir, 0o755)
			file := writeFile(t, filepath.Join(dir, "policy.yaml"), "egress: deny\n", 0o644)
			tt.setup(t, dir, file)
			e, err := Load(LoadOptions{UserFile: writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "egress: allow\n", 0o600), PolicyFile: file})
			if tt.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if e.Config.Egress != EgressDeny || !e.Locked("egress") {
					t.Errorf("policy not applied: %+v", e.Sources)
				}
				return
			}
			if !errors.Is(err, ErrUnsafePolicy) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want ErrUnsafePolicy with %q", err, tt.msg)
			}
		})
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaDeterministic(t *testing.T) {
	if a, b := Schema(), Schema(); !bytes.Equal(a, b) {
		t.Fatal("Schema() differs between calls")
	}
}

// TestSchemaUpToDate fails when docs/config.schema.json no longer matches the types; run
// `go test ./internal/config -run TestSchemaUpToDate -update` to rewrite it.
func TestSchemaUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "config.schema.json")
	got := Schema()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./internal/config -run TestSchemaUpToDate -update", path)
	}
}

func TestSchemaContent(t *testing.T) {
	s := string(Schema())
	for _, want := range []string{
		`"additionalProperties": false`,
		`"enum": [` + "\n" + `        "deny",` + "\n" + `        "allow"`,
		`"default": "5s"`,
		`"maximum": 1024`,
		`"default": 64`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("schema lacks %s", want)
		}
	}
	if strings.Contains(s, `"required"`) {
		t.Error("schema requires a key; every key is optional")
	}
}
