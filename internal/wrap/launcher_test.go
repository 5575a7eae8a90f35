package wrap

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestLauncherGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Launcher
	}{
		{"claude-path-lookup", Launcher{Name: "claude", Agentbox: "/usr/bin/agentbox"}},
		{"claude-managed-install", Launcher{Name: "claude", Agentbox: "/usr/bin/agentbox", Vendor: "/opt/claude-code/bin/claude"}},
		{"quoted-paths", Launcher{Name: "codex", Agentbox: "/opt/agent box/agentbox", Vendor: "/opt/it's/codex"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.l)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(got, []byte("\r")) {
				t.Error("launcher holds a CR; launchers are LF-only")
			}
			golden := filepath.Join("testdata", tc.name+".sh")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/wrap -run TestLauncherGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("launcher differs from %s (a change to a launcher is a reviewed change; -update rewrites it):\n%s", golden, got)
			}
			if !isLauncher(bytes.NewReader(got)) {
				t.Error("a rendered launcher is not recognised as one")
			}
		})
	}
}

func TestRenderRefuses(t *testing.T) {
	for _, l := range []Launcher{
		{Name: "", Agentbox: "/usr/bin/agentbox"},
		{Name: "a/b", Agentbox: "/usr/bin/agentbox"},
		{Name: "-x", Agentbox: "/usr/bin/agentbox"},
		{Name: "claude", Agentbox: "agentbox"},
		{Name: "claude", Agentbox: "/usr/bin/agentbox", Vendor: "claude"},
		{Name: "claude", Agentbox: "/usr/bin/agentbox", Vendor: "/opt/x\n/claude"},
	} {
		if _, err := Render(l); err == nil {
			t.Errorf("Render(%+v) rendered", l)
		}
	}
}

// TestLauncherRuns runs a rendered launcher with sh: it execs agentbox with the program name and
// every argument intact, returns agentbox's exit code, and refuses (125) when agentbox is gone.
func TestLauncherRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-agentbox")
	// A stand-in agentbox: prints its arguments one per line, exits 42.
	os.WriteFile(fake, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\nexit 42\n"), 0o755)
	for _, tc := range []struct {
		name, vendor, want string
	}{
		{"lookup", "", "[run]\n[--wait]\n[claude]\n[--]\n[-p]\n[two words]\n[$HOME]\n[]\n"},
		{"managed", "/opt/v/claude", "[run]\n[--wait]\n[--program-path]\n[/opt/v/claude]\n[claude]\n[--]\n[-p]\n[two words]\n[$HOME]\n[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(Launcher{Name: "claude", Agentbox: fake, Vendor: tc.vendor})
			if err != nil {
				t.Fatal(err)
			}
			l := filepath.Join(dir, "claude-"+tc.name)
			os.WriteFile(l, b, 0o755)
			out, err := exec.Command(sh, l, "-p", "two words", "$HOME", "").Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 42 {
				t.Fatalf("launcher: %v, want agentbox's exit code 42", err)
			}
			if string(out) != tc.want {
				t.Errorf("agentbox got\n%s\nwant\n%s", out, tc.want)
			}
		})
	}
	t.Run("AgentboxMissing", func(t *testing.T) {
		b, _ := Render(Launcher{Name: "claude", Agentbox: filepath.Join(dir, "gone")})
		l := filepath.Join(dir, "claude-missing")
		os.WriteFile(l, b, 0o755)
		c := exec.Command(sh, l)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		err := c.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 125 {
			t.Fatalf("launcher without agentbox: %v, want exit 125", err)
		}
		if !strings.Contains(stderr.String(), "runs only boxed") {
			t.Errorf("no reason printed: %q", stderr.String())
		}
	})
}

// TestLookPathSkipsLaunchers puts a launcher first on PATH: the lookup must find the vendor's
// executable behind it, never the launcher.
func TestLookPathSkipsLaunchers(t *testing.T) {
	dir := t.TempDir()
	wrapDir, vendorDir, otherDir := filepath.Join(dir, "wrap"), filepath.Join(dir, "vendor"), filepath.Join(dir, "other")
	for _, d := range []string{wrapDir, vendorDir, otherDir} {
		os.Mkdir(d, 0o755)
	}
	if _, err := Install(wrapDir, "/usr/bin/agentbox", []Program{{Name: "claude"}}); err != nil {
		t.Fatal(err)
	}
	vendor := filepath.Join(vendorDir, "claude")
	os.WriteFile(vendor, []byte("\x7fELF not really"), 0o755)
	os.WriteFile(filepath.Join(otherDir, "claude"), []byte("not executable"), 0o644)
	path := strings.Join([]string{"relative", otherDir, wrapDir, vendorDir}, string(filepath.ListSeparator))
	if got := LookPath("claude", path); got != vendor {
		t.Errorf("LookPath = %q, want the vendor's %q", got, vendor)
	}
	if got := shellLookPath("claude", path); got != filepath.Join(wrapDir, "claude") {
		t.Errorf("a shell would run %q, want the launcher first", got)
	}
	if got := LookPath("claude", wrapDir); got != "" {
		t.Errorf("LookPath with only the launcher on PATH = %q, want none", got)
	}
	for _, bad := range []string{"", "../claude", "a/b"} {
		if got := LookPath(bad, path); got != "" {
			t.Errorf("LookPath(%q) = %q", bad, got)
		}
	}
}

func TestInstallUninstall(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "bin")
	progs := []Program{{Name: "claude"}, {Name: "codex", Vendor: "/opt/codex/codex"}}
	ch, err := Install(prefix, "/usr/bin/agentbox", progs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch) != 2 || ch[0].Action != "installed" || ch[1].Action != "installed" {
		t.Fatalf("install: %+v", ch)
	}
	st, _ := os.Stat(filepath.Join(prefix, "claude"))
	if st.Mode().Perm() != 0o755 {
		t.Errorf("launcher mode %v, want 0755", st.Mode().Perm())
	}
	if ch, _ = Install(prefix, "/usr/bin/agentbox", progs); ch[0].Action != "unchanged" {
		t.Errorf("second install: %+v", ch)
	}
	// The policy drops codex: its launcher goes; a foreign file next to it stays.
	os.WriteFile(filepath.Join(prefix, "tool"), []byte("#!/bin/sh\necho mine\n"), 0o755)
	ch, err = Install(prefix, "/usr/bin/agentbox", progs[:1])
	if err != nil || len(ch) != 2 || ch[1] != (Change{filepath.Join(prefix, "codex"), "removed"}) {
		t.Errorf("install after the policy dropped codex: %+v %v", ch, err)
	}
	s := Check(prefix, "/usr/bin/agentbox", progs, prefix)
	if s[0].State != "installed" || !s[0].FirstOnPath || s[1].State != "missing" {
		t.Errorf("status: %+v", s)
	}
	if s := Check(prefix, "/usr/local/bin/agentbox", progs[:1], ""); s[0].State != "stale" {
		t.Errorf("status against another agentbox: %+v, want stale", s)
	}

	// Never replace the vendor's own file.
	os.WriteFile(filepath.Join(prefix, "gemini"), []byte("#!/usr/bin/env node\n"), 0o755)
	if _, err := Install(prefix, "/usr/bin/agentbox", []Program{{Name: "claude"}, {Name: "gemini"}}); !errors.Is(err, ErrForeignFile) {
		t.Errorf("install over a vendor file: %v, want ErrForeignFile", err)
	}
	if b, _ := os.ReadFile(filepath.Join(prefix, "gemini")); string(b) != "#!/usr/bin/env node\n" {
		t.Error("the vendor file was changed")
	}
	if !IsLauncher(filepath.Join(prefix, "claude")) {
		t.Error("a refused install removed the existing launcher")
	}

	ch, err = Uninstall(prefix)
	if err != nil || len(ch) != 1 || ch[0].Path != filepath.Join(prefix, "claude") {
		t.Errorf("uninstall: %+v %v", ch, err)
	}
	for _, keep := range []string{"tool", "gemini"} {
		if _, err := os.Stat(filepath.Join(prefix, keep)); err != nil {
			t.Errorf("uninstall removed %s, which is not a launcher", keep)
		}
	}
	if ch, err := Uninstall(filepath.Join(dir, "absent")); err != nil || len(ch) != 0 {
		t.Errorf("uninstall of an absent prefix: %+v %v", ch, err)
	}
}
