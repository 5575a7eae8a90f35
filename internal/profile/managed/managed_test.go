package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
)

func opts(t *testing.T) Options {
	d := t.TempDir()
	return Options{Dir: filepath.Join(d, "claude-code"), StateDir: filepath.Join(d, "agentbox")}
}

var locks = config.ClaudeCodeManaged{
	AllowManagedHooksOnly:      true,
	AllowManagedMcpServersOnly: true,
	AllowedMcpServers:          []config.McpServer{{ServerName: "github"}, {ServerURL: "https://*.example.com/mcp"}},
}

// The admin's file, with formatting, key order, unicode escapes and an env block of its own.
const adminFile = `{
    "permissions": {"deny": ["Read(./.env)"], "defaultMode": "default"},
	"model":"claude-opus-4-5" ,
    "env": {"HTTPS_PROXY": "http://proxy:3128", "X": "\u00e9"},
    "companyAnnouncements": ["Welcome"]
}
`

// TestMergeKeepsForeignKeys guards that agentbox changes only its own keys in
// managed-settings.json: every other value keeps its exact bytes, and a backup is saved.
func TestMergeKeepsForeignKeys(t *testing.T) {
	o := opts(t)
	file := filepath.Join(o.Dir, SettingsFile)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(adminFile), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(locks, ModeFile, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Backup == "" {
		t.Fatalf("result %+v", res)
	}
	if b, _ := os.ReadFile(res.Backup); string(b) != adminFile {
		t.Errorf("backup differs from the original:\n%s", b)
	}
	got, _ := os.ReadFile(file)
	for _, foreign := range []string{
		`"permissions": {"deny": ["Read(./.env)"], "defaultMode": "default"}`,
		`"model":"claude-opus-4-5"`,
		`"HTTPS_PROXY": "http://proxy:3128", "X": "\u00e9"`,
		`"companyAnnouncements": ["Welcome"]`,
	} {
		if !bytes.Contains(got, []byte(foreign)) {
			t.Errorf("foreign bytes %s lost:\n%s", foreign, got)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("merged file is not JSON: %v\n%s", err, got)
	}
	if doc["allowManagedHooksOnly"] != true || doc["allowManagedMcpServersOnly"] != true || len(doc["allowedMcpServers"].([]any)) != 2 {
		t.Errorf("locks missing: %s", got)
	}
	if env := doc["env"].(map[string]any); env["DISABLE_AUTOUPDATER"] != "1" || env["HTTPS_PROXY"] != "http://proxy:3128" {
		t.Errorf("env block: %v", env)
	}
	if p := Read(o); p.Source != api.PostureSourceFile || !p.AllowManagedHooksOnly || !p.AllowManagedMcpServersOnly || p.AllowedMcpServers != 2 || !p.AutoUpdatesDisabled {
		t.Errorf("posture %+v", p)
	}

	// Applying again changes nothing; dropping a lock from the policy removes only that key.
	if res, err := Apply(locks, ModeFile, o); err != nil || res.Changed {
		t.Fatalf("second apply: %+v, %v", res, err)
	}
	less := locks
	less.AllowManagedMcpServersOnly = false
	less.AllowedMcpServers = nil
	if _, err := Apply(less, ModeFile, o); err != nil {
		t.Fatal(err)
	}
	got2, _ := os.ReadFile(file)
	if bytes.Contains(got2, []byte("allowManagedMcpServersOnly")) || bytes.Contains(got2, []byte("allowedMcpServers")) || !bytes.Contains(got2, []byte(`"allowManagedHooksOnly": true`)) {
		t.Errorf("after dropping locks:\n%s", got2)
	}
	if !json.Valid(got2) {
		t.Errorf("not JSON:\n%s", got2)
	}
	// With every lock gone and auto-updates allowed, the file is the admin's again, byte for byte.
	if _, err := Apply(config.ClaudeCodeManaged{AutoUpdates: config.AutoUpdatesOn}, ModeFile, o); err != nil {
		t.Fatal(err)
	}
	if got3, _ := os.ReadFile(file); string(got3) != adminFile {
		t.Errorf("after removing every agentbox key, the file differs from the admin's:\n%s", got3)
	}
}

// TestMergeRefusesForeignKey guards that agentbox never overwrites a key an admin or MDM set,
// and leaves the file untouched when it refuses.
func TestMergeRefusesForeignKey(t *testing.T) {
	o := opts(t)
	file := filepath.Join(o.Dir, SettingsFile)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := `{"allowManagedHooksOnly": false, "model": "x"}`
	if err := os.WriteFile(file, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Apply(locks, ModeFile, o)
	if !errors.Is(err, ErrForeignKey) || !strings.Contains(err.Error(), "allowManagedHooksOnly") {
		t.Fatalf("got %v, want ErrForeignKey naming allowManagedHooksOnly", err)
	}
	if b, _ := os.ReadFile(file); string(b) != orig {
		t.Errorf("file changed: %s", b)
	}
	if _, err := os.Stat(file + BackupSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup made for a refused apply: %v", err)
	}
	// An admin value equal to the policy's is left theirs.
	if err := os.WriteFile(file, []byte(`{"allowManagedHooksOnly": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(config.ClaudeCodeManaged{AllowManagedHooksOnly: true, AutoUpdates: config.AutoUpdatesOn}, ModeFile, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(config.ClaudeCodeManaged{AutoUpdates: config.AutoUpdatesOn}, ModeFile, o); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != `{"allowManagedHooksOnly": true}` {
		t.Errorf("agentbox removed an admin's key: %s", b)
	}
}

func TestMergeRefusesInvalidFile(t *testing.T) {
	o := opts(t)
	file := filepath.Join(o.Dir, SettingsFile)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"a": `, `[1, 2]`, `"x"`} {
		if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(locks, ModeFile, o); !errors.Is(err, ErrInvalidFile) {
			t.Errorf("%s: got %v, want ErrInvalidFile", bad, err)
		}
		if b, _ := os.ReadFile(file); string(b) != bad {
			t.Errorf("file changed: %s", b)
		}
		if p := Read(o); p.Source != api.PostureSourceUnknown || p.AllowManagedHooksOnly || p.Error == "" {
			t.Errorf("%s: posture %+v, want unknown with the locks off", bad, p)
		}
	}
}

func TestDropIn(t *testing.T) {
	o := opts(t)
	if err := os.MkdirAll(filepath.Join(o.Dir, DropInDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, SettingsFile), []byte(adminFile), 0o644); err != nil {
		t.Fatal(err)
	}
	// An admin fragment earlier in the order, and a hidden file Claude Code skips.
	if err := os.WriteFile(filepath.Join(o.Dir, DropInDir, "10-security.json"), []byte(`{"allowManagedHooksOnly": false, "allowedMcpServers": [{"serverName": "jira"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, DropInDir, ".hidden.json"), []byte(`{"allowManagedMcpServersOnly": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(config.ClaudeCodeManaged{AllowManagedHooksOnly: true}, ModeDropIn, o)
	if err != nil || !res.Changed {
		t.Fatalf("%+v, %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(o.Dir, SettingsFile)); string(b) != adminFile {
		t.Errorf("drop-in mode touched managed-settings.json")
	}
	p := Read(o)
	if p.Source != api.PostureSourceFile || !p.AllowManagedHooksOnly || p.AllowManagedMcpServersOnly || p.AllowedMcpServers != 1 || len(p.Files) != 3 {
		t.Errorf("posture %+v", p)
	}
	// A drop-in agentbox did not write (or that changed since) is refused, untouched.
	f := filepath.Join(o.Dir, DropInDir, DropInFile)
	if err := os.WriteFile(f, []byte(`{"allowManagedHooksOnly": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(config.ClaudeCodeManaged{AllowManagedHooksOnly: true}, ModeDropIn, o); !errors.Is(err, ErrForeignKey) {
		t.Errorf("got %v, want ErrForeignKey", err)
	}
	if b, _ := os.ReadFile(f); string(b) != `{"allowManagedHooksOnly": false}` {
		t.Errorf("foreign drop-in changed: %s", b)
	}
}

func TestReadPosture(t *testing.T) {
	o := opts(t)
	if p := Read(o); p.Source != api.PostureSourceNone || p.AllowManagedHooksOnly {
		t.Errorf("no files: %+v", p)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory where the file should be: a read error, reported unknown and unlocked.
	if err := os.Mkdir(filepath.Join(o.Dir, SettingsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if p := Read(o); p.Source != api.PostureSourceUnknown || p.AllowManagedHooksOnly || p.AllowManagedMcpServersOnly || p.Error == "" {
		t.Errorf("read error: %+v", p)
	}
}

func TestJSONEdit(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		path []string
		val  string
		want string
	}{
		{`{}`, []string{"a"}, `1`, "{\n  \"a\": 1\n}"},
		{`{"b":2}`, []string{"a"}, `1`, "{\"b\":2,\n  \"a\": 1}"},
		{`{"a":[1,{"x":"}"}],"b":2}`, []string{"a"}, `true`, `{"a":true,"b":2}`},
		{`{"env":{"K":"v"}}`, []string{"env", "D"}, `"1"`, "{\"env\":{\"K\":\"v\",\n  \"D\": \"1\"}}"},
		{`{"x":1}`, []string{"env", "D"}, `"1"`, "{\"x\":1,\n  \"env\": {\"D\":\"1\"}}"},
	} {
		got, err := set([]byte(tc.doc), tc.path, []byte(tc.val))
		if err != nil || string(got) != tc.want || !json.Valid(got) {
			t.Errorf("set(%s, %v) = %q, %v; want %q", tc.doc, tc.path, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ doc, key, want string }{
		{`{"a":1}`, "a", `{}`},
		{`{"a":1, "b":2}`, "a", `{"b":2}`},
		{`{"a":1, "b":2}`, "b", `{"a":1}`},
		{`{"a":1, "b":"}", "c":3}`, "b", `{"a":1, "c":3}`},
	} {
		got, err := del([]byte(tc.doc), []string{tc.key})
		if err != nil || string(got) != tc.want {
			t.Errorf("del(%s, %s) = %q, %v; want %q", tc.doc, tc.key, got, err, tc.want)
		}
	}
}
