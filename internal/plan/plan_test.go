package plan

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func baseInput() Input {
	return Input{
		ID: "0123456789abcdef0123456789abcdef", Program: "/usr/bin/sh", Args: []string{"-c", "true"},
		Workspace: "/home/u/src/p", Home: "/home/u", UID: 1000, GID: 1000,
		Env:    []string{"PATH=/usr/bin:/bin", "TERM=xterm", "AWS_SECRET_ACCESS_KEY=x", "ANTHROPIC_API_KEY=y", "SSH_AUTH_SOCK=/run/ssh", "DISPLAY=:0"},
		RunDir: "/run/user/1000/agentbox/launches/x/run",
	}
}

func TestBuildDeterministic(t *testing.T) {
	a, err := Build(baseInput())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build(baseInput())
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Build is not deterministic")
	}
}

func TestBuildEnvAllowlist(t *testing.T) {
	p, err := Build(baseInput())
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(p.Env, "\n")
	for _, leak := range []string{"AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY", "SSH_AUTH_SOCK", "DISPLAY"} {
		if strings.Contains(env, leak) {
			t.Errorf("env leaks %s:\n%s", leak, env)
		}
	}
	for _, want := range []string{"HOME=/home/u", "PATH=/usr/bin:/bin", "TERM=xterm"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}

func TestBuildMountOrder(t *testing.T) {
	p, err := Build(baseInput())
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, m := range p.Mounts {
		idx[m.Target] = i
	}
	// The home tmpfs must come before the workspace bound beneath it.
	if idx["/home/u"] > idx["/home/u/src/p"] {
		t.Fatal("workspace bound before the home tmpfs that would hide it")
	}
	if p.Network.Egress != EgressDeny {
		t.Fatalf("default egress = %q", p.Network.Egress)
	}
}

func TestBuildRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Input){
		"relative program": func(in *Input) { in.Program = "sh" },
		"no id":            func(in *Input) { in.ID = "" },
		"cwd outside":      func(in *Input) { in.Cwd = "/etc" },
		"relative ws":      func(in *Input) { in.Workspace = "p" },
	} {
		t.Run(name, func(t *testing.T) {
			in := baseInput()
			mut(&in)
			if _, err := Build(in); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestCheckWorkspaceContainingHarness: a workspace that contains a harness home (~/.local holds
// ~/.local/share/opencode and ~/.local/state) is refused, whatever agentbox's own directories.
func TestCheckWorkspaceContainingHarness(t *testing.T) {
	f := WorkspaceFacts{Home: "/home/u", Harness: []string{".cache/tool"}}
	for _, ws := range []string{"/home/u/.local", "/home/u/.local/share", "/home/u/.cache"} {
		err := CheckWorkspace(ws, f)
		if !errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), "contains /home/u/") {
			t.Errorf("CheckWorkspace(%s) = %v, want refused as containing a harness home", ws, err)
		}
	}
	if err := CheckWorkspace("/home/u/.local/bin", f); err != nil {
		t.Errorf("CheckWorkspace(/home/u/.local/bin) = %v", err)
	}
}

func TestCheckWorkspace(t *testing.T) {
	f := WorkspaceFacts{Home: "/home/u", RuntimeDir: "/run/user/1000", OwnDirs: []string{"/home/u/.local/state/agentbox", "/tmp/agentbox-1000"},
		Sockets: []string{"/home/u/src/sock/tmux-1000/default", "/run/dbus/system_bus_socket"}}
	for _, tc := range []struct {
		ws string
		ok bool
	}{
		{"/", false},
		{"/home", false},
		{"/home/u", false},
		{"/home/u/.ssh", false},
		{"/home/u/.claude/projects", false},
		{"/home/u/.config/x", false},
		{"/run/user/1000/x", false},
		{"/tmp", false}, // contains agentbox's runtime dir
		{"/home/u/src/p", true},
		{"/tmp/work", true},
		{"/home/u/.sshfoo", true},
		{"/home/u/.local/bin", true},
		// Shared temporary folders and system folders (issue 21, findings 2 and 3).
		{"/var/tmp", false},
		{"/dev/shm", false},
		{"/etc", false},
		{"/etc/ssh", false},
		{"/usr/local/src/p", false},
		{"/opt/p", false},
		{"/var/lib/p", false},
		{"/proc/self", false},
		{"/run/p", false},
		{"/var/tmp/p", true},
		{"/dev/shm/p", true},
		{"/etcetera/p", true},
		// A folder holding a host program's socket (issue 21, finding 2).
		{"/home/u/src/sock", false},
		{"/home/u/src/sock/sub", true},
	} {
		t.Run(tc.ws, func(t *testing.T) {
			err := CheckWorkspace(tc.ws, f)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckWorkspace(%s) = %v, want ok=%v", tc.ws, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrWorkspaceRefused) {
				t.Fatalf("error class: %v", err)
			}
		})
	}
}

// TestCheckStartupFolders (review 16, F6): a workspace is written by the box, so no folder
// whose files the host runs by itself may be one (a login shell's PATH, the shells' and
// editors' start-up folders), nor a folder on the launch's PATH; the refusal says why. Project
// folders, and those folders' neighbours, stay workspaces.
func TestCheckStartupFolders(t *testing.T) {
	path := []string{"/home/u/tools/bin", "/usr/bin", "/", "/home/u", "/home"}
	for ws, want := range map[string]string{
		"/home/u/bin":                     "front of PATH",
		"/home/u/bin/sub":                 "front of PATH",
		"/home/u/.local/bin":              "front of PATH",
		"/home/u/.vim":                    "vim runs its plugins",
		"/home/u/.vim/pack/x/start/y":     "vim runs its plugins",
		"/home/u/.local/share/nvim/site":  "neovim runs",
		"/home/u/.emacs.d":                "emacs runs",
		"/home/u/.oh-my-zsh":              "zsh runs",
		"/home/u/.zsh":                    "zsh's start-up files",
		"/home/u/.bashrc.d":               "bash's start-up files",
		"/home/u/.tmux/plugins/tpm":       "tmux runs",
		"/home/u/.local/share":            "contains /home/u/.local/share/nvim",
		"/home/u/tools/bin":               "is on your PATH",
		"/home/u/tools":                   "contains /home/u/tools/bin, a folder on your PATH",
		"/home/u/tools/bin/sub":           "is inside /home/u/tools/bin, a folder on your PATH",
		"/home/u/src/p":                   "",
		"/home/u/tools2":                  "",
		"/home/u/binaries":                "",
		"/home/u/.vimfiles":               "",
		"/home/u/src/p/bin":               "",
		"/home/u/src/dotfiles/.vim":       "",
		"/home/u/.local/share/nvim-notes": "",
	} {
		err := CheckStartupFolders(ws, "/home/u", path)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckStartupFolders(%s) = %v, want nil", ws, err)
		case want != "" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckStartupFolders(%s) = %v, want refused saying %q", ws, err, want)
		}
	}
	// A relative or empty entry is a folder of the shell's current folder, the workspace when
	// the user works there: every workspace is refused, the entry named.
	for _, entry := range []string{".", "", "node_modules/.bin"} {
		path := []string{"/usr/bin", entry, "/bin"}
		err := CheckStartupFolders("/home/u/src/p", "/home/u", path)
		if want := fmt.Sprintf("%q", entry); !errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "relative entry") {
			t.Errorf("CheckStartupFolders with PATH %q = %v, want refused naming the relative entry %s", path, err, want)
		}
	}
	if err := CheckWorkspace("/home/u/.local/bin", WorkspaceFacts{Home: "/home/u"}); err != nil {
		t.Errorf("CheckWorkspace, which also decides toolchains, refused ~/.local/bin: %v", err)
	}
}

// TestCheckHostPath (review 18, F1, F2): the daemon's own PATH, through which it finds the
// host programs it runs outside any box, is compared with every workspace as the launch's is,
// with no exemption for dependency folders, and a workspace holding a program found through
// it is refused; each refusal names the entry (or program), says it is the daemon's PATH and
// how to start a daemon without it.
func TestCheckHostPath(t *testing.T) {
	owner := PathOwner{Whose: "the daemon's PATH (pid 1)", Runs: "the daemon runs them", Fix: "restart the daemon without %s: agentbox daemon stop"}
	path := []string{"/home/u/src/p/node_modules/.bin", "/home/u/tools/bin", "/usr/bin", "/home/u"}
	for ws, want := range map[string]string{
		"/home/u/src/p":         "contains /home/u/src/p/node_modules/.bin, a folder on the daemon's PATH (pid 1)",
		"/home/u/tools/bin":     "is on the daemon's PATH (pid 1) (/home/u/tools/bin)",
		"/home/u/tools/bin/sub": "is inside /home/u/tools/bin",
		"/home/u/src/git":       "holds /home/u/src/git/git, a program agentbox runs on the host",
		"/home/u/src/q":         "",
	} {
		err := CheckHostPath(ws, "/home/u", path, []string{"/usr/bin/git", "/home/u/src/git/git"}, owner)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckHostPath(%s) = %v, want nil", ws, err)
		case want != "" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "agentbox daemon stop")):
			t.Errorf("CheckHostPath(%s) = %v, want refused saying %q and how to restart the daemon", ws, err, want)
		}
	}
	if err := CheckHostPath("/home/u/src/p", "/home/u", []string{"/usr/bin", "bin"}, nil, owner); !errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), `the daemon's PATH (pid 1) holds the relative entry "bin"`) {
		t.Errorf("CheckHostPath with a relative entry = %v, want refused naming it", err)
	}
}
