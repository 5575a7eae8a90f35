package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/integrity"
)

// Review 17's attack tests (REVIEW17.md says what each found and as whom). Each fails on main
// at the time of the review.

// withEnv returns vars with key set to value (replaced or added).
func withEnv(vars []string, key, value string) []string {
	var out []string
	for _, kv := range vars {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// TestAttackWorkspaceHoldsPathFolderBin (review 17, F1): plan.CheckStartupFolders refuses a
// workspace that IS a folder of the launch's PATH, not one that holds such a folder. A project
// whose bin/ is on PATH (direnv's PATH_add bin, a tools checkout, /opt/x with /opt/x/bin on
// PATH; outside the home a PATH folder is not even a read-only toolchain) is accepted; the box
// writes bin/git, and the host's next shell runs it for every git, the user's review included.
func TestAttackWorkspaceHoldsPathFolderBin(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	bin := filepath.Join(e.work, "bin")
	write(t, filepath.Join(bin, "hello"), "#!/bin/sh\necho hello\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "tools")
	path := bin + ":" + os.Getenv("PATH")
	e.vars = withEnv(e.vars, "PATH", path)
	mark, _ := e.marker("path-holds")
	out, stderr, code := e.runAll("run", "sh", "--", "-c",
		fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git && echo planted`, mark))
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if !strings.Contains(out, "planted") {
		t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
	}
	c := exec.Command("sh", "-c", "git --version")
	c.Dir = e.root
	c.Env = append(os.Environ(), "PATH="+path)
	c.Run()
	notRun(t, mark, "the host's shell running git with the workspace's bin/ on PATH (a workspace the daemon accepted)", out+stderr)
}

// TestAttackStartupFolderThroughSymlinkedHome (review 17, F2): the workspace is compared
// symlink-resolved, the home as $HOME says it (os.UserHomeDir, not resolved). Where $HOME is a
// symlink (/home -> /var/home on Fedora's atomic desktops, a home moved to a second disk), none
// of the home's rules hold: ~/bin is accepted as a workspace (the review 16 F6 attack again),
// and so are ~/.vim, ~/.ssh, ~/.config and the home itself.
func TestAttackStartupFolderThroughSymlinkedHome(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	link := filepath.Join(e.root, "homelink")
	if err := os.Symlink(e.home, link); err != nil {
		t.Fatal(err)
	}
	e.vars = withEnv(e.vars, "HOME", link)
	ws := filepath.Join(link, "bin")
	write(t, filepath.Join(ws, "backup.sh"), "#!/bin/sh\necho backup\n")
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "my scripts")
	mark, _ := e.marker("symhome")
	out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
		fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexec /usr/bin/git "$@"\n' > git && chmod +x git && echo planted`, mark))
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if !strings.Contains(out, "planted") {
		t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
	}
	c := exec.Command("sh", "-c", "git --version")
	c.Dir = e.root
	c.Env = append(os.Environ(), "HOME="+link, "PATH="+filepath.Join(link, "bin")+":"+os.Getenv("PATH"))
	c.Run()
	notRun(t, mark, "the host's login shell running git with ~/bin on PATH, $HOME a symlink (a workspace the daemon accepted)", out+stderr)
}

// TestAttackHostRenameLosesOldFiles (review 17, F3): the ignored-places rule takes whole a
// folder whose ctime is in the launch and that is not the folder recorded at its path when the
// launch began. The user's own rename of a folder of old files in an ignored place (data/old
// to data/archive) while a box runs makes data/archive such a folder: at the box's exit every
// one of the user's old files in it is moved out of the workspace, and past the bound
// (changes.MaxIgnoredFiles, 10,000) the rest are deleted, kept nowhere. Nothing the box did.
func TestAttackHostRenameLosesOldFiles(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), "data/\n")
	git(t, e.work, "add", ".gitignore")
	git(t, e.work, "commit", "-q", "-m", "ignore data")
	const n = 10_050
	old := filepath.Join(e.work, "data", "old")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(old, fmt.Sprintf("m%05d.csv", i)), []byte("measurement\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(e.work, "data", "archive")
	out := e.boxPlantDuring(`echo ready > `+syncFIFO+`; read go < `+syncFIFO+`; echo done`, func() {
		if err := os.Rename(old, archive); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(out, "done") {
		t.Fatalf("the box did not run to its end:\n%s", out)
	}
	kept := 0
	filepath.WalkDir(filepath.Join(e.state, "agentbox", "changes"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".csv") && strings.Contains(p, filepath.Join("data", "archive")) {
			kept++
		}
		return nil
	})
	left := 0
	if es, err := os.ReadDir(archive); err == nil {
		left = len(es)
	}
	// None may be lost. (The reviewer asked for all n left in the workspace; the fix keeps them
	// all, moved into the launch's proposed changes, where agentbox apply puts them back: a
	// folder renamed in the launch is taken whole, the old files of a recorded folder
	// included, since a record by inode that let a renamed folder keep them let an earlier
	// launch's quarantined node_modules/, an ignored place, renamed to dist/ keep its
	// x.test.js, and the host's npm test ran it: TestAttackIgnoredRenamedQuarantine failed.)
	if left+kept != n {
		t.Errorf("the user's %d old files in data/archive (renamed on the host while the box ran): %d left in the workspace, %d moved to the launch's proposed changes, %d deleted (kept nowhere)\nthe box said:\n%s",
			n, left, kept, n-left-kept, out)
	}
}

// TestAttackBranchRewriteLargePackedRefs (review 17, F5): the snapshot reads packed-refs
// through readBeneath with a bound of 1 MiB (maxCheckedFile) and, past it, as if it were empty,
// saying nothing. A repository with many remote-tracking branches or tags (20,000 packed refs
// here, 1.3 MB; monorepos and long-lived projects have more) has its own packed branches
// recorded not at all: a box rewrites main (amend, reflog expired) and the check at exit says
// nothing, while the host's git reads the rewritten main. With 100 packed refs (the control)
// the same rewrite is reported.
func TestAttackBranchRewriteLargePackedRefs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, n := range []int{100, 20_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			g := func(args ...string) string {
				t.Helper()
				c := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@example.org"}, args...)...)
				c.Dir = ws
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			g("init", "-q", "-b", "main")
			write(t, filepath.Join(ws, "f"), "one\n")
			g("add", "f")
			g("commit", "-qm", "one")
			g("commit", "-q", "--allow-empty", "-m", "two")
			id := g("rev-parse", "HEAD")
			// packed-refs as git pack-refs --all writes it: main and n remote-tracking branches.
			var b strings.Builder
			b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
			fmt.Fprintf(&b, "%s refs/heads/main\n", id)
			for i := range n {
				fmt.Fprintf(&b, "%s refs/remotes/origin/topic-%05d\n", id, i)
			}
			write(t, filepath.Join(ws, ".git", "packed-refs"), b.String())
			if err := os.Remove(filepath.Join(ws, ".git", "refs", "heads", "main")); err != nil {
				t.Fatal(err)
			}
			if got := g("rev-parse", "main"); got != id {
				t.Fatalf("git reads main as %s from the packed-refs written, want %s", got, id)
			}
			lay, err := integrity.Resolve(ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := integrity.Snapshot(lay, integrity.Limits{})
			// The box: its edit folded into the user's commit two, same message and date, reflog expired.
			write(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo BOX\n")
			g("add", "Makefile")
			g("commit", "-q", "--amend", "--no-edit", "--date="+g("log", "-1", "--format=%ad"))
			g("reflog", "expire", "--expire=now", "--all")
			for _, tr := range s.VerifyExit() {
				if tr.Alert && strings.Contains(tr.Detail, "main") {
					return
				}
			}
			t.Errorf("main rewritten from %s to %s (packed-refs of %d bytes at the snapshot, %d refs): no alert at exit", id, g("rev-parse", "main"), b.Len(), n+1)
		})
	}
}

// TestAttackDotfilesWorkspace (review 17, F6): a dotfiles repository linked into the home (GNU
// stow, rcm, chezmoi's symlink mode: ~/.gitconfig -> ~/dotfiles/gitconfig) is an ordinary
// workspace ("tidy up my git config"). The host's git reads ~/.gitconfig through the link at
// every start, so what a box writes in dotfiles/gitconfig runs in the very git status the user
// runs to review it. Neither CheckWorkspace nor CheckStartupFolders looks at what the home's
// start-up files (.gitconfig, .bashrc, .profile, .vimrc, …) resolve to.
func TestAttackDotfilesWorkspace(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ws := filepath.Join(e.home, "dotfiles")
	write(t, filepath.Join(ws, "gitconfig"), "[user]\n\tname = U\n\temail = u@example.org\n")
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "my dotfiles")
	if err := os.Symlink("dotfiles/gitconfig", filepath.Join(e.home, ".gitconfig")); err != nil {
		t.Fatal(err)
	}
	mark, touch := e.marker("dotfiles")
	out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
		fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s; false"\n' >> gitconfig && echo planted`, touch))
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if !strings.Contains(out, "planted") {
		t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
	}
	notRun(t, mark, "agentbox itself, before the host's git ran", out+stderr)
	c := exec.Command("git", "status", "--short")
	c.Dir = ws
	c.Env = append(os.Environ(), "HOME="+e.home, "XDG_CONFIG_HOME="+filepath.Join(e.home, ".config"))
	got, _ := c.CombinedOutput()
	notRun(t, mark, "the host's git status in ~/dotfiles (~/.gitconfig a link into the workspace)", out+stderr+"\ngit status said:\n"+string(got))
}

// TestAttackWorkspaceHoldsLinkedPathFolder (review 17, F1, the home's common form): ~/bin is a
// link into a dotfiles repository (~/bin -> dotfiles/bin), on PATH. The workspace ~/dotfiles
// holds the folder ~/bin leads to; CheckStartupFolders compares the PATH entry and ~/bin as
// written, not resolved, and toolchainRoots skips a PATH entry that is a symlink, so bin/ is
// neither refused nor read-only: the box writes bin/git and the host's shell runs it.
func TestAttackWorkspaceHoldsLinkedPathFolder(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ws := filepath.Join(e.home, "dotfiles")
	write(t, filepath.Join(ws, "bin", "backup.sh"), "#!/bin/sh\necho backup\n")
	git(t, ws, "init", "-q")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "my dotfiles")
	if err := os.Symlink("dotfiles/bin", filepath.Join(e.home, "bin")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.home, "bin") + ":" + os.Getenv("PATH")
	e.vars = withEnv(e.vars, "PATH", path)
	mark, _ := e.marker("linked-path")
	out, stderr, code := e.runAll("run", "--workspace", ws, "sh", "--", "-c",
		fmt.Sprintf(`printf '#!/bin/sh\ntouch %s\nexec /usr/bin/git "$@"\n' > bin/git && chmod +x bin/git && echo planted`, mark))
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if !strings.Contains(out, "planted") {
		t.Fatalf("exit %d: the plant failed (the test would prove nothing):\n%s%s", code, out, stderr)
	}
	c := exec.Command("sh", "-c", "git --version")
	c.Dir = e.root
	c.Env = append(os.Environ(), "HOME="+e.home, "PATH="+path)
	c.Run()
	notRun(t, mark, "the host's shell running git with ~/bin (a link into the workspace) on PATH", out+stderr)
}

// TestAttackOtherUserSocketRefusesWorkspace (review 17, F7): the daemon refuses a workspace
// that "contains" a unix socket by the path /proc/net/unix shows — the string the binding
// process gave, whoever it is — with the folder's symlinks resolved now. Another local user
// binds a socket at /tmp/THEIRS/l/s (l a link to a folder of theirs), then points l at the
// victim's workspace: no socket lies in the workspace, yet every launch on it is refused
// ("contains the unix socket …") for as long as the other user's process lives. Root runs the
// other user as nobody; an ordinary user cannot switch users, so the test skips there.
func TestAttackOtherUserSocketRefusesWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a second user (nobody)")
	}
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	theirs, err := os.MkdirTemp("/tmp", "r17other")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(theirs) })
	os.Chmod(theirs, 0o777)
	script := fmt.Sprintf(`mkdir %[1]s/real && ln -s real %[1]s/l &&
%[2]s -c 'import socket,sys,time;s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);s.listen();print("bound",flush=True);time.sleep(120)' %[1]s/l/s &
while ! [ -S %[1]s/real/s ]; do sleep 0.05; done; rm %[1]s/l && ln -s %[3]s %[1]s/l && echo swapped; wait`, theirs, py, e.work)
	other := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	stdout, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	buf := make([]byte, 0, 64)
	for !strings.Contains(string(buf), "swapped") {
		b := make([]byte, 64)
		n, err := stdout.Read(b)
		if err != nil {
			t.Fatalf("the other user's process: %v (%q)", err, buf)
		}
		buf = append(buf, b[:n]...)
	}
	out, stderr, code := e.runAll("run", "sh", "--", "-c", "echo ran")
	if !strings.Contains(out, "ran") {
		t.Errorf("the user's launch on %s, which holds no socket (another user bound one at %s/l/s and pointed l here): exit %d\n%s%s", e.work, theirs, code, out, stderr)
	}
}

// TestAttackIgnoredExecOnlyBinary (review 17, F8): changes.TakeIgnored copies a file into the
// store (review 16, F4): it must read it. A box leaves build/app, a program, with mode 0111
// (execute only: the kernel runs an ELF file its caller cannot read). The daemon of an ordinary
// user cannot open it: the take fails, the file stays in the workspace (an alert says it could
// not be moved; it could have been removed, or its owner's read bit given back, as
// restoreOwnerAccess does for folders), and the host's make test runs it. As root the daemon
// reads it anyway (DAC override), so this fails for an ordinary user only.
func TestAttackIgnoredExecOnlyBinary(t *testing.T) {
	goBin := hostGo()
	if goBin == "" {
		t.Skip("go not installed")
	}
	t.Parallel()
	e := newDaemonEnv(t)
	mark, _ := e.marker("exec-only")
	src := filepath.Join(e.root, "toolsrc")
	write(t, filepath.Join(src, "go.mod"), "module example.org/tool\n\ngo 1.21\n")
	write(t, filepath.Join(src, "main.go"), fmt.Sprintf("package main\n\nimport \"os\"\n\nfunc main() { os.WriteFile(%q, nil, 0o644) }\n", mark))
	c := exec.Command(goBin, "build", "-o", filepath.Join(e.work, "vendor-tool"), ".")
	c.Dir = src
	c.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	write(t, filepath.Join(e.work, ".gitignore"), "build/\n")
	write(t, filepath.Join(e.work, "Makefile"), "test:\n\t./build/app\n")
	git(t, e.work, "init", "-q", "-b", "main")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "tool")
	out := e.boxPlant(`mkdir -p build && cp vendor-tool build/app && chmod 0111 build/app && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the marker exists before the host ran anything:\n%s", out)
	}
	m := exec.Command("make", "-s", "test")
	m.Dir = e.work
	got, _ := m.CombinedOutput()
	notRun(t, mark, "the host's make test (build/app, mode 0111, which the check at exit could not read)", out+"\nmake said:\n"+string(got))
}

// TestAttackSubmoduleUntrackedHidden (review 17, F9): the check at exit takes what a box leaves
// in git-ignored places, and names the untracked files the user's git status does not
// (UntrackedUnlisted) — in the workspace's repository only: "a submodule's untracked files are
// its own git status's". A project whose .gitmodules sets ignore = untracked for a submodule
// (common for vendored code that builds in place) has the superproject's git status show
// nothing for a file the box adds in it, and the file is neither ignored nor a superproject
// untracked file: nothing is taken or said, and the host's go test ./... (the submodule is a
// folder of the module) runs the box's TestMain.
func TestAttackSubmoduleUntrackedHidden(t *testing.T) {
	goBin := hostGo()
	if goBin == "" {
		t.Skip("go not installed")
	}
	t.Parallel()
	e := newDaemonEnv(t)
	lib := filepath.Join(e.root, "libsrc")
	write(t, filepath.Join(lib, "lib.go"), "package lib\n\nfunc F() int { return 1 }\n")
	git(t, lib, "init", "-q", "-b", "main")
	git(t, lib, "add", "-A")
	git(t, lib, "commit", "-q", "-m", "lib")
	write(t, filepath.Join(e.work, "go.mod"), "module example.org/app\n\ngo 1.21\n")
	write(t, filepath.Join(e.work, "app.go"), "package app\n\nfunc G() int { return 2 }\n")
	git(t, e.work, "init", "-q", "-b", "main")
	git(t, e.work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	git(t, e.work, "config", "-f", ".gitmodules", "submodule.lib.ignore", "untracked")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "app with lib")
	mark, _ := e.marker("submodule-untracked")
	out := e.boxPlant(fmt.Sprintf(`printf 'package lib\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.WriteFile(%q, nil, 0o644)\n\tos.Exit(m.Run())\n}\n' > lib/lib_test.go && echo planted`, mark))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	st, _ := hostGit(e.work, "status", "--porcelain")
	c := exec.Command(goBin, "test", "./...")
	c.Dir = e.work
	c.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	got, _ := c.CombinedOutput()
	notRun(t, mark, fmt.Sprintf("the host's go test ./... (lib/lib_test.go in a submodule with ignore = untracked; git status said %q)", st), out+"\ngo test said:\n"+string(got))
}

// TestAttackHarnessHomeThroughSymlinkedHome (review 17, F2, credentials): with $HOME a symlink,
// CheckWorkspace's harness homes (~/.ssh, ~/.aws, ~/.claude, …) are compared as $HOME says them
// with the workspace resolved: ~/.ssh is accepted as a workspace and the box reads the user's
// private key (and could replace authorized_keys).
func TestAttackHarnessHomeThroughSymlinkedHome(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	link := filepath.Join(e.root, "homelink")
	if err := os.Symlink(e.home, link); err != nil {
		t.Fatal(err)
	}
	e.vars = withEnv(e.vars, "HOME", link)
	write(t, filepath.Join(e.home, ".ssh", "id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----\nSECRET-r17\n")
	out, stderr, code := e.runAll("run", "--workspace", filepath.Join(link, ".ssh"), "sh", "--", "-c", "cat id_ed25519")
	if code == 125 && strings.Contains(stderr, "workspace_refused") {
		return
	}
	if strings.Contains(out, "SECRET-r17") {
		t.Errorf("a box on ~/.ssh ($HOME a symlink) read the user's private key: exit %d\n%s%s", code, out, stderr)
	} else {
		t.Errorf("~/.ssh ($HOME a symlink) was not refused as a workspace: exit %d\n%s%s", code, out, stderr)
	}
}

// TestAttackIgnoredCheckHangs (review 17, F4): the check at exit lists the ignored places of
// every submodule checked out (at most 64), each with git ls-files through a private git
// directory whose index is the submodule's own (GIT_INDEX_FILE), each git bounded by 2
// minutes, under context.Background. A box makes two nested repositories, adds them as
// gitlinks, and replaces each one's index with a FIFO: git's open of the index blocks (no
// writer is left once the box is gone) until its 2 minutes are up, one after the other. With 64
// gitlinks the check at exit (and agentbox run, which waits for it) takes over two hours; the
// launch's end, its alerts and the user's terminal wait for it. The bound here is a hang guard
// of 60 s for a box that did nothing else (without the plant the run takes a few seconds).
func TestAttackIgnoredCheckHangs(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	start := time.Now()
	out := e.boxPlant(`for s in s1 s2; do (git init -q $s && cd $s && ` + boxGit + ` commit -q --allow-empty -m x) && git update-index --add --cacheinfo 160000,$(git -C $s rev-parse HEAD),$s && rm -f $s/.git/index && mkfifo $s/.git/index; done; echo planted`)
	took := time.Since(start)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	t.Logf("took %v:\n%s", took, out)
	if strings.Contains(out, "signal: killed") {
		t.Errorf("the check at exit ran git on a box's FIFO index until git was killed at its time bound:\n%s", out)
	}
	if !strings.Contains(out, "not a regular file") {
		t.Errorf("the end of the run does not say that the submodules' index (a FIFO) was not read:\n%s", out)
	}
	if took > 60*time.Second {
		t.Errorf("agentbox run of a box that made 2 gitlinks with a FIFO for an index took %v to return (each FIFO holds the check at exit for git's 2-minute bound)\n%s", took.Round(time.Second), out)
	}
}

// TestAttackOtherProjectThroughPathParent (review 17, F10): every PATH entry beneath the home
// named bin/ has its parent bound read-only into every box as a toolchain (docs/toolchains.md,
// meant for ~/go, ~/.nvm/versions/node/vX). A project of the user's whose bin/ is on PATH
// (~/work/client-a/bin: its scripts) is then the parent: the box of any other workspace reads
// that whole project, its .env and the token in its .git/config remote URL included.
func TestAttackOtherProjectThroughPathParent(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	other := filepath.Join(e.home, "work", "client-a")
	write(t, filepath.Join(other, "bin", "deploy"), "#!/bin/sh\necho deploy\n")
	os.Chmod(filepath.Join(other, "bin", "deploy"), 0o755)
	write(t, filepath.Join(other, ".env"), "STRIPE_SECRET_KEY=sk_live_r17secret\n")
	e.vars = withEnv(e.vars, "PATH", filepath.Join(other, "bin")+":"+os.Getenv("PATH"))
	out, stderr, code := e.runAll("run", "sh", "--", "-c", "cat "+filepath.Join(other, ".env")+" 2>&1; true")
	if strings.Contains(out, "sk_live_r17secret") {
		t.Errorf("a box of %s read another project's .env (%s/.env) because %s/bin is on PATH: exit %d\n%s%s", e.work, other, other, code, out, stderr)
	}
}
