package spec

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func goldenInput() plan.Input {
	return plan.Input{
		ID:        "0123456789abcdef0123456789abcdef",
		Profile:   "claude",
		Program:   "/home/alice/.local/bin/claude",
		Args:      []string{"-p", "fix the test"},
		Workspace: "/home/alice/src/project",
		Cwd:       "/home/alice/src/project/pkg",
		Home:      "/home/alice",
		UID:       1000,
		GID:       1000,
		Env:       []string{"PATH=/usr/bin:/bin", "TERM=xterm-256color", "LANG=C.UTF-8", "AWS_SECRET_ACCESS_KEY=x"},
		RunDir:    "/run/user/1000/agentbox/launches/0123456789abcdef0123456789abcdef/run",
	}
}

// request renders p as the native engine's request does (Build, then Render).
func request(p *plan.Plan) ([]byte, error) {
	s, err := Build(p)
	if err != nil {
		return nil, err
	}
	return s.Render()
}

func TestRequestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*plan.Input, *plan.Plan)
	}{
		{"pipe-deny", func(*plan.Input, *plan.Plan) {}},
		{"tty-deny-forwards", func(in *plan.Input, p *plan.Plan) {
			p.Network.Forwards = []plan.Forward{{Port: 4100, Socket: "/run/agentbox/relay.sock"}, {Port: 4200, Socket: "/run/agentbox/ssh-github.com.sock"}}
		}},
		{"pipe-allow", func(in *plan.Input, p *plan.Plan) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := goldenInput()
			switch tc.name {
			case "tty-deny-forwards":
				in.Console = plan.ConsoleTTY
			case "pipe-allow":
				in.Egress = plan.EgressAllow
			}
			p, err := plan.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			tc.mod(&in, p)
			got, err := request(p)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := request(p)
			if !bytes.Equal(got, again) {
				t.Fatal("Request is not deterministic")
			}
			path := filepath.Join("testdata", tc.name+".json")
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
				t.Errorf("Request differs from %s (review, then run with -update):\n%s", path, got)
			}
			if _, err := Parse(got); err != nil {
				t.Errorf("Parse of own request: %v", err)
			}
		})
	}
}

func TestRequestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*plan.Plan)
	}{
		{"ForwardsWithEgressAllow", func(p *plan.Plan) {
			p.Network.Egress = plan.EgressAllow
			p.Network.Forwards = []plan.Forward{{Port: 4100, Socket: "/run/agentbox/relay.sock"}}
		}},
		{"BadPort", func(p *plan.Plan) { p.Network.Forwards = []plan.Forward{{Port: 70000, Socket: "/run/agentbox/x"}} }},
		{"UnknownEgress", func(p *plan.Plan) { p.Network.Egress = "maybe" }},
		{"UnknownConsole", func(p *plan.Plan) { p.Console = "telnet" }},
		{"RelativeTarget", func(p *plan.Plan) { p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountTmpfs, Target: "tmp"}) }},
		{"RootTarget", func(p *plan.Plan) { p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountTmpfs, Target: "/"}) }},
		{"UnknownMountKind", func(p *plan.Plan) { p.Mounts = append(p.Mounts, plan.Mount{Kind: "unionfs", Target: "/x"}) }},
		// An overlay's writable layers must lie beneath the folder they are opened beneath (the
		// box cache), and every layer path is absolute.
		{"OverlayUpperOutsideBeneath", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountOverlay, Source: "/home/alice/.npm", Upper: "/home/alice/.ssh",
				Work: "/state/cache/x/npm/work", Beneath: "/state/cache/x", Target: "/home/alice/.npm"})
		}},
		{"OverlayRelativeLower", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountOverlay, Source: ".npm", Upper: "/state/cache/x/npm/upper",
				Work: "/state/cache/x/npm/work", Beneath: "/state/cache/x", Target: "/home/alice/.npm"})
		}},
		{"OverlayWithoutBeneath", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountOverlay, Source: "/home/alice/.npm", Upper: "/state/cache/x/npm/upper",
				Work: "/state/cache/x/npm/work", Target: "/home/alice/.npm"})
		}},
		// A dependency folder's lower layer must lie beneath the workspace it is opened beneath.
		{"OverlayLowerOutsideSourceBeneath", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountOverlay, Source: "/home/alice/.ssh", Upper: "/state/cache/x/dep/upper",
				Work: "/state/cache/x/dep/work", Beneath: "/state/cache/x", SourceBeneath: "/home/alice/proj", Target: "/home/alice/proj/node_modules"})
		}},
		{"NoLandlockABI", func(p *plan.Plan) { p.Landlock.MinABI = 0 }},
		{"SymlinkWithoutContent", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountSymlink, Target: "/home/alice/.claude.json"})
		}},
		// A link is made on the box's own tmpfs only: bwrap would make it in a host folder
		// bound in, or replace what is bound at its path.
		{"SymlinkInHostFolder", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: "/home/alice/.config", Target: "/home/alice/.config"},
				plan.Mount{Kind: plan.MountSymlink, Source: "x", Target: "/home/alice/.config/link"})
		}},
		{"SymlinkOverBind", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: "/home/alice/.x", Target: "/home/alice/.x"},
				plan.Mount{Kind: plan.MountSymlink, Source: "y", Target: "/home/alice/.x"})
		}},
		{"SymlinkReadOnly", func(p *plan.Plan) {
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountSymlink, Source: ".claude/.claude.json", Target: "/home/alice/.claude.json", ReadOnly: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Build(goldenInput())
			if err != nil {
				t.Fatal(err)
			}
			tc.mod(p)
			if _, err := request(p); !errors.Is(err, ErrInvalid) {
				t.Errorf("Request = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestParseRefusesOtherVersions(t *testing.T) {
	if _, err := Parse([]byte(`{"version": 2, "console": "pipe", "program": "/bin/true", "cwd": "/"}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse(version 2) = %v, want ErrInvalid", err)
	}
}

func TestParentsFirst(t *testing.T) {
	in := []plan.Mount{
		{Kind: plan.MountBind, Target: "/usr"},
		{Kind: plan.MountBind, Target: "/home/a/.local/bin/x"},
		{Kind: plan.MountMask, Target: "/etc/shadow"},
		{Kind: plan.MountTmpfs, Target: "/home/a"},
		{Kind: plan.MountTmpfs, Target: "/tmp"},
		{Kind: plan.MountBind, Target: "/home/a/src"},
		{Kind: plan.MountBind, Target: "/tmp/ws"},
		{Kind: plan.MountBind, Target: "/etc"},
	}
	var got []string
	for _, m := range parentsFirst(in) {
		got = append(got, m.Target)
	}
	want := []string{"/usr", "/home/a", "/home/a/.local/bin/x", "/tmp", "/home/a/src", "/tmp/ws", "/etc", "/etc/shadow"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestMaskedOnce guards a root-run box whose mount table grew without end: the root-only paths
// under /etc (plan.Input.Hidden) include the fixed masks (/etc/shadow, …), each was masked
// twice, and box-init's keeper, finding the lower mask not at its path, masked it again at
// every change of the mount table. A mask is made once; one after another mount at the same
// path (or above it) is kept, and a required mask keeps its mask required.
func TestMaskedOnce(t *testing.T) {
	in := goldenInput()
	in.Hidden = []string{"/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_rsa_key"}
	in.Brokers.Mounts = []plan.Mount{
		{Kind: plan.MountMask, Target: "/etc/ssh/ssh_host_rsa_key"},
		{Kind: plan.MountBind, Source: "/x", Target: "/home/alice/.codex/auth.json"},
		{Kind: plan.MountMask, Target: "/home/alice/.codex/auth.json", Optional: true},
	}
	p, err := plan.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, m := range s.Mounts {
		if m.Kind == KindMask {
			count[m.Target]++
			if m.Target == "/etc/ssh/ssh_host_rsa_key" && m.Optional {
				t.Errorf("mask of %s optional, want required (one of its two masks was)", m.Target)
			}
		}
	}
	for target, n := range count {
		if n > 1 {
			t.Errorf("%s masked %d times, want once", target, n)
		}
	}
	if count["/home/alice/.codex/auth.json"] != 1 {
		t.Errorf("the mask over a bind at the same path was dropped: %v", count)
	}
}

// TestInGitDir: only a file beneath a folder named .git is given to the box as a symlink to its
// staged copy; a work tree's file (which git compares by lstat) and a .git file are not.
func TestInGitDir(t *testing.T) {
	for p, want := range map[string]bool{
		"/w/.git/config":                true,
		"/w/.git/modules/sub/config":    true,
		"/w/.git/info/exclude":          true,
		"/w/.mcp.json":                  false,
		"/w/sub/.git":                   false,
		"/w/.github/workflows/ci.yml":   false,
		"/w/x.git/config":               false,
		"/w/.gitmodules":                false,
		"/w/.vscode/settings.json":      false,
		"/w/.git/worktrees/a/commondir": true,
	} {
		if got := InGitDir(p); got != want {
			t.Errorf("InGitDir(%q) = %v, want %v", p, got, want)
		}
	}
}
