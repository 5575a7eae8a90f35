package bwrap

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/engine/spec"
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

// TestRequestGolden pins the bwrap argv and spec byte for byte; run with -update after a
// reviewed change.
func TestRequestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*plan.Input)
		pmod func(*plan.Plan)
	}{
		{"pipe-deny", nil, nil},
		{"tty-deny-forwards", func(in *plan.Input) { in.Console = plan.ConsoleTTY }, func(p *plan.Plan) {
			p.Network.Forwards = []plan.Forward{{Port: 4100, Socket: "/run/agentbox/relay.sock"}}
		}},
		{"pipe-allow", func(in *plan.Input) { in.Egress = plan.EgressAllow }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := goldenInput()
			if tc.mod != nil {
				tc.mod(&in)
			}
			p, err := plan.Build(in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.pmod != nil {
				tc.pmod(p)
			}
			got, err := (&Engine{}).Request(p)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("request differs from %s (run with -update after review):\n%s", golden, got)
			}
			again, _ := (&Engine{}).Request(p)
			if !bytes.Equal(got, again) {
				t.Errorf("Request is not deterministic")
			}
			if _, err := ParseRequest(got); err != nil {
				t.Errorf("ParseRequest(Request) = %v", err)
			}
		})
	}
}

// TestRequestMatchesNativeSpec guards that the box-exec stage of a bwrap box applies exactly
// the native engine's spec for the same plan (same Landlock, seccomp, environment, program).
func TestRequestMatchesNativeSpec(t *testing.T) {
	p, err := plan.Build(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	nb, err := (&native.Engine{}).Request(p)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := (&Engine{}).Request(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRequest(bb)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := spec.Parse(nb)
	if r.Spec.Seccomp != ns.Seccomp || r.Spec.Landlock.MinABI != ns.Landlock.MinABI || len(r.Spec.Landlock.RW) != len(ns.Landlock.RW) ||
		r.Spec.Program != ns.Program || len(r.Spec.Env) != len(ns.Env) || len(r.Spec.Mounts) != len(ns.Mounts) {
		t.Errorf("bwrap spec %+v differs from native spec %+v", r.Spec, ns)
	}
}

func TestRequestRendersBeneath(t *testing.T) {
	p, err := plan.Build(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: "/home/alice/src/project/.git/config", Target: "/home/alice/src/project/.git/config", Beneath: "/home/alice/src/project", ReadOnly: true})
	b, err := (&Engine{}).Request(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	want := BeneathOption + " /home/alice/src/project --ro-bind /home/alice/src/project/.git/config /home/alice/src/project/.git/config"
	if !strings.Contains(strings.Join(r.Args, " "), want) {
		t.Errorf("args lack %q:\n%s", want, strings.Join(r.Args, " "))
	}
	if _, err := (&Engine{}).Request(&plan.Plan{}); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Request of an empty plan = %v", err)
	}
}

// TestRequestRendersOverlay: bwrap 0.8 builds no overlay, so a package cache's overlay is
// rendered as the box cache's writable layer alone, bound beneath the box cache (never the
// host's folder, which the box must not write), and one with LowerFallback (cargo's home) as
// the host's folder bound read-only.
func TestRequestRendersOverlay(t *testing.T) {
	p, err := plan.Build(goldenInput())
	if err != nil {
		t.Fatal(err)
	}
	p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountOverlay, Source: "/home/alice/.npm", Upper: "/state/cache/x/npm/upper",
		Work: "/state/cache/x/npm/work", Beneath: "/state/cache/x", Target: "/home/alice/.npm", Optional: true},
		plan.Mount{Kind: plan.MountOverlay, Source: "/home/alice/.cargo", Upper: "/state/cache/x/cargo/upper",
			Work: "/state/cache/x/cargo/work", Beneath: "/state/cache/x", Target: "/home/alice/.cargo", Optional: true, LowerFallback: true})
	b, err := (&Engine{}).Request(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(r.Args, " ")
	if want := BeneathOption + " /state/cache/x --bind /state/cache/x/npm/upper /home/alice/.npm"; !strings.Contains(args, want) {
		t.Errorf("args lack %q:\n%s", want, args)
	}
	if strings.Contains(args, " /home/alice/.npm /home/alice/.npm") {
		t.Errorf("the host's cache is bound:\n%s", args)
	}
	if want := "/home/alice/.npm --ro-bind-try /home/alice/.cargo /home/alice/.cargo"; !strings.Contains(args, want) {
		t.Errorf("args lack %q (the host's cargo home read-only, with no beneath option before it):\n%s", want, args)
	}
	if strings.Contains(args, "/state/cache/x/cargo") {
		t.Errorf("the cargo layer is bound in place of the host's cargo home:\n%s", args)
	}
}

// TestExpandArgs guards the one option of a request that is not bwrap's: a mask resolved
// against the host when the box starts.
func TestExpandArgs(t *testing.T) {
	stat := func(p string) (bool, bool) {
		switch p {
		case "/proc/acpi":
			return true, true
		case "/etc/shadow":
			return false, true
		}
		return false, false
	}
	open := func(src, beneath string) (string, error) {
		if src == "/w/.git/config" && beneath == "/w" {
			return "/proc/self/fd/9", nil
		}
		return "", fs.ErrNotExist
	}
	got, err := ExpandArgs([]string{"--proc", "/proc", MaskOption, "/proc/acpi", MaskOption, "/etc/shadow", MaskOption, "/proc/kcore",
		BeneathOption, "/w", "--ro-bind", "/w/.git/config", "/w/.git/config", BeneathOption, "/w", "--ro-bind-try", "/w/.envrc", "/w/.envrc",
		"--", "/x", MaskOption}, stat, open)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--proc", "/proc", "--perms", "0555", "--tmpfs", "/proc/acpi", "--remount-ro", "/proc/acpi",
		"--ro-bind", "/dev/null", "/etc/shadow", "--ro-bind", "/proc/self/fd/9", "/w/.git/config", "--", "/x", MaskOption}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ExpandArgs =\n%q\nwant\n%q", got, want)
	}
	if _, err := ExpandArgs([]string{MaskOption}, stat, open); err == nil {
		t.Error("a mask without a path was accepted")
	}
	if _, err := ExpandArgs([]string{BeneathOption, "/w", "--ro-bind", "/w/missing", "/w/missing"}, stat, open); err == nil {
		t.Error("a missing source of a required beneath bind was accepted")
	}
}
