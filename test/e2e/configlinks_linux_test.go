//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackConfigLinkedIntoWorkspace (review 19, F3, the general rule): beyond the agents'
// files of TestAttackHarnessConfigLinkedIntoWorkspace, any dot-entry of the home and any
// entry of a configuration folder linked into a dotfiles workspace refuses it, named with
// where it leads: a dot-file no list names (~/.bash_aliases, which Debian's ~/.bashrc
// sources), cargo's ~/.cargo/config.toml (a build.rustc-wrapper runs at every cargo build),
// docker's ~/.docker/config.json (credsStore names a helper docker runs), a folder
// (~/.config/systemd -> dotfiles/systemd, whose user units systemd runs at login), and a link
// that leads where no file is yet (~/.gitconfig -> dotfiles/gitconfig: the box would make
// it). A link leading out of the workspace does not refuse it (the control).
func TestAttackConfigLinkedIntoWorkspace(t *testing.T) {
	for _, c := range []struct{ name, home, target, write string }{
		{"bash_aliases", ".bash_aliases", "bash_aliases", "bash_aliases"},
		{"cargo config", ".cargo/config.toml", "cargo.toml", "cargo.toml"},
		{"docker config", ".docker/config.json", "docker.json", "docker.json"},
		{"systemd folder", ".config/systemd", "systemd/", "systemd/user/x.service"},
		{"dangling gitconfig", ".gitconfig", "-gitconfig", "gitconfig"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := NewEnv(t)
			dotfiles := filepath.Join(e.Work, "dotfiles")
			target := filepath.Join(dotfiles, strings.Trim(c.target, "-/"))
			if err := os.MkdirAll(dotfiles, 0o755); err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.HasSuffix(c.target, "/"):
				os.MkdirAll(filepath.Join(target, "user"), 0o755)
			case !strings.HasPrefix(c.target, "-"): // "-": the link dangles
				os.WriteFile(target, []byte("# mine\n"), 0o600)
			}
			link := filepath.Join(e.Home, c.home)
			os.MkdirAll(filepath.Dir(link), 0o700)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			written := filepath.Join(dotfiles, c.write)
			r := e.Box(fmt.Sprintf("echo pwned > %q", written))
			t.Logf("box: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			if b, _ := os.ReadFile(filepath.Join(link, strings.TrimPrefix(c.write, strings.Trim(c.target, "-/")))); strings.Contains(string(b), "pwned") {
				t.Fatalf("the box wrote the host's %s (a link to %s in the workspace), which the host reads at its next start", link, target)
			}
			if r.Code != 125 || !strings.Contains(r.Stderr, link) || !strings.Contains(r.Stderr, "leads to") {
				t.Errorf("the launch was not refused naming %s and where it leads: exit %d\n%s", link, r.Code, r.Stderr)
			}
		})
	}
	// The rules' facts are found once per launch, never kept from one to the next: a link
	// made after a launch of the same daemon refuses the next (speed19b, issue #23).
	t.Run("link made between two launches", func(t *testing.T) {
		e := NewEnv(t)
		dotfiles := filepath.Join(e.Work, "dotfiles")
		os.MkdirAll(dotfiles, 0o755)
		os.WriteFile(filepath.Join(dotfiles, "bash_aliases"), nil, 0o600)
		if r := e.Box("echo ok"); r.Code != 0 || !strings.Contains(r.Stdout, "ok") {
			t.Fatalf("the first launch, before the link: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
		link := filepath.Join(e.Home, ".bash_aliases")
		if err := os.Symlink(filepath.Join(dotfiles, "bash_aliases"), link); err != nil {
			t.Fatal(err)
		}
		r := e.Box("echo pwned > " + filepath.Join(dotfiles, "bash_aliases"))
		if b, _ := os.ReadFile(link); strings.Contains(string(b), "pwned") {
			t.Fatalf("the second launch wrote the host's %s, linked into the workspace after the first launch", link)
		}
		if r.Code != 125 || !strings.Contains(r.Stderr, link) {
			t.Errorf("the second launch, after %s was linked into the workspace, was not refused naming it: exit %d\n%s", link, r.Code, r.Stderr)
		}
	})
	// What the rule read of a folder is kept between launches while the folder is unchanged
	// (plan's linkCache), and never within 2 s of its last change (the racy rule). Here each
	// folder is older than that at both launches, so the second launch finds the first's
	// entry kept and must see that the folder changed: a link repointed from outside the
	// workspace into it, in the home (a dot-entry) and in a folder of the launch's PATH
	// (~/.local/bin, a program). Fails when the cache ignores the folder's times.
	t.Run("link repointed in a kept folder", func(t *testing.T) {
		e := NewEnv(t)
		bin := filepath.Join(e.Home, ".local/bin")
		elsewhere := filepath.Join(e.Root, "elsewhere")
		dotfiles := filepath.Join(e.Work, "dotfiles")
		for _, d := range []string{bin, elsewhere, dotfiles} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{elsewhere, dotfiles} {
			os.WriteFile(filepath.Join(d, "bash_aliases"), nil, 0o600)
			os.WriteFile(filepath.Join(d, "mytool"), []byte("#!/bin/sh\n"), 0o755)
		}
		links := map[string]string{filepath.Join(e.Home, ".bash_aliases"): "bash_aliases", filepath.Join(bin, "mytool"): "mytool"}
		for link, name := range links {
			if err := os.Symlink(filepath.Join(elsewhere, name), link); err != nil {
				t.Fatal(err)
			}
		}
		e.Vars = append(e.Vars, "PATH="+bin+":"+os.Getenv("PATH"))
		// The daemon's start changes the home (its readiness probe): started before.
		if r := e.Box("true"); r.Code != 0 {
			t.Fatalf("the first launch: exit %d\n%s", r.Code, r.Stderr)
		}
		for link, name := range links {
			t.Run(name, func(t *testing.T) {
				// Both folders' times (a change time cannot be set) past the racy two seconds.
				time.Sleep(2100 * time.Millisecond)
				if r := e.Box("echo ok"); r.Code != 0 || !strings.Contains(r.Stdout, "ok") {
					t.Fatalf("a launch with %s leading out of the workspace: exit %d\n%s\n%s", link, r.Code, r.Stdout, r.Stderr)
				}
				tmp := link + ".new"
				if err := os.Symlink(filepath.Join(dotfiles, name), tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, link); err != nil { // ln -sfn's way
					t.Fatal(err)
				}
				time.Sleep(2100 * time.Millisecond)
				r := e.Box("true")
				if r.Code != 125 || !strings.Contains(r.Stderr, link) {
					t.Errorf("the launch after %s was repointed into the workspace was not refused naming it: exit %d\n%s", link, r.Code, r.Stderr)
				}
				// Back out of the workspace for the next case.
				os.Symlink(filepath.Join(elsewhere, name), tmp)
				os.Rename(tmp, link)
			})
		}
	})
	t.Run("link out of the workspace", func(t *testing.T) {
		e := NewEnv(t)
		elsewhere := filepath.Join(e.Root, "dotfiles")
		os.MkdirAll(elsewhere, 0o755)
		os.WriteFile(filepath.Join(elsewhere, "bash_aliases"), nil, 0o600)
		if err := os.Symlink(filepath.Join(elsewhere, "bash_aliases"), filepath.Join(e.Home, ".bash_aliases")); err != nil {
			t.Fatal(err)
		}
		if r := e.Box("echo ok"); r.Code != 0 || !strings.Contains(r.Stdout, "ok") {
			t.Fatalf("a launch with ~/.bash_aliases linked out of the workspace: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}
