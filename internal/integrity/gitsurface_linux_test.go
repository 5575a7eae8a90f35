package integrity

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/profile"
)

// exampleValues are, for each GitValue, a value that makes git run something and one that
// does not.
var exampleValues = map[GitValue][2]string{
	ValueAny:      {"/opt/x/prog", ""},
	ValueNotFalse: {"/opt/x/prog", "false"},
	ValueNotBool:  {"less -R", "true"},
	ValueBang:     {"!sh -c evil", "checkout"},
	ValueNotNever: {"always", "never"},
	ValueAlways:   {"always", "user"},
	ValuePath:     {"/usr/sbin/sendmail", "smtp.example.org"},
}

// exampleConfig writes key (a GitProgramKey name, "*" standing for "x") = value as a config
// file's text, with the section header spelled as given by spell.
func exampleConfig(name, value string, spell func(string) string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if p == "*" {
			parts[i] = "x"
		}
	}
	if len(parts) == 3 {
		return "[" + spell(parts[0]) + ` "` + parts[1] + `"]` + "\n\t" + parts[2] + " = " + value + "\n"
	}
	return "[" + spell(parts[0]) + "]\n\t" + parts[1] + " = " + value + "\n"
}

// TestGitProgramKeys: every key of the table is found by ExecKeys with a value that runs
// something — also behind a UTF-8 BOM (git skips it), with the section in upper case and
// after a harmless section — and not with one that does not.
func TestGitProgramKeys(t *testing.T) {
	for _, k := range GitProgramKeys {
		t.Run(k.Name, func(t *testing.T) {
			vals, ok := exampleValues[k.Value]
			if !ok {
				t.Fatalf("no example values for rule %d", k.Value)
			}
			for _, text := range []string{
				exampleConfig(k.Name, vals[0], func(s string) string { return s }),
				"\xef\xbb\xbf" + exampleConfig(k.Name, vals[0], func(s string) string { return s }),
				"[user]\n\tname = x\n" + exampleConfig(k.Name, vals[0], strings.ToUpper),
			} {
				if got, err := ExecKeys([]byte(text)); len(got) != 1 || err != nil {
					t.Errorf("ExecKeys(%q) = %v, %v, want the key", text, got, err)
				}
			}
			if vals[1] != "" || k.Value == ValueAny {
				text := exampleConfig(k.Name, vals[1], func(s string) string { return s })
				if got, err := ExecKeys([]byte(text)); len(got) != 0 || err != nil {
					t.Errorf("ExecKeys(%q) = %v, %v, want nothing", text, got, err)
				}
			}
		})
	}
}

// gitRun is how TestGitProgramKeysRunByGit makes the host's git run one key.
type gitRun struct {
	config string     // the repository's config (PROG: a program that touches the marker)
	attrs  string     // .git/info/attributes
	prep   [][]string // git commands before the trigger
	git    []string   // the trigger
	stdin  string
	tty    bool // run on a terminal (script(1))
}

// gitRuns are the keys whose program the host's git 2.39 runs in an ordinary command without
// a network. The others are checked against git-config(1) only (notRunHere says why).
var gitRuns = map[string]gitRun{
	"core.fsmonitor":  {config: "[core]\n\tfsmonitor = PROG\n", git: []string{"status"}},
	"core.hookspath":  {config: "[core]\n\thooksPath = HOOKS\n", git: []string{"commit", "-q", "--allow-empty", "-m", "x"}},
	"core.sshcommand": {config: "[core]\n\tsshCommand = PROG\n", git: []string{"ls-remote", "ssh://example.invalid/r"}},
	"core.editor":     {config: "[core]\n\teditor = PROG\n", git: []string{"commit", "--allow-empty"}},
	"core.pager":      {config: "[core]\n\tpager = PROG\n", git: []string{"log"}, tty: true},
	"core.askpass": {config: "[core]\n\taskPass = PROG\n", git: []string{"credential", "fill"},
		stdin: "protocol=https\nhost=example.org\n\n"},
	"core.gitproxy": {config: "[core]\n\tgitProxy = PROG\n", git: []string{"ls-remote", "git://example.invalid/r"}},
	"core.alternaterefscommand": {config: "[core]\n\talternateRefsCommand = PROG\n", prep: [][]string{{"clone", "-q", "--bare", ".", "alt.git"},
		{"clone", "-q", "--bare", "--reference", "alt.git", ".", "b.git"}, {"-C", "b.git", "config", "core.alternateRefsCommand", "PROG"}},
		git: []string{"-C", "b.git", "fetch", "-q", "..", "HEAD"}},
	"sequence.editor": {config: "[sequence]\n\teditor = PROG\n", prep: [][]string{{"checkout", "-q", "."}}, git: []string{"rebase", "-q", "-i", "HEAD~1"}},
	"pager.*":         {config: "[pager]\n\tstatus = PROG\n", git: []string{"status"}, tty: true},
	"diff.external":   {config: "[diff]\n\texternal = PROG\n", git: []string{"diff"}},
	"diff.*.command":  {config: "[diff \"x\"]\n\tcommand = PROG\n", attrs: "f diff=x\n", git: []string{"diff"}},
	"diff.*.textconv": {config: "[diff \"x\"]\n\ttextconv = PROG\n", attrs: "f diff=x\n", git: []string{"diff"}},
	"difftool.*.cmd":  {config: "[difftool \"x\"]\n\tcmd = PROG\n", git: []string{"difftool", "-y", "-t", "x"}},
	"difftool.*.path": {config: "[difftool \"vimdiff\"]\n\tpath = PROG\n", git: []string{"difftool", "-y", "-t", "vimdiff"}},
	"mergetool.*.cmd": {config: "[mergetool \"x\"]\n\tcmd = PROG\n", prep: [][]string{{"checkout", "-q", "."}, {"merge", "other"}},
		git: []string{"mergetool", "-y", "-t", "x"}},
	"mergetool.*.path": {config: "[mergetool \"vimdiff\"]\n\tpath = PROG\n", prep: [][]string{{"checkout", "-q", "."}, {"merge", "other"}},
		git: []string{"mergetool", "-y", "-t", "vimdiff"}},
	"merge.*.driver":   {config: "[merge \"x\"]\n\tdriver = PROG\n", attrs: "f merge=x\n", prep: [][]string{{"checkout", "-q", "."}}, git: []string{"merge", "other"}},
	"filter.*.clean":   {config: "[filter \"x\"]\n\tclean = FILTER\n", attrs: "f filter=x\n", git: []string{"add", "f"}},
	"filter.*.smudge":  {config: "[filter \"x\"]\n\tsmudge = FILTER\n", attrs: "f filter=x\n", prep: [][]string{{"rm", "-q", "--cached", "f"}}, git: []string{"checkout", "HEAD", "--", "f"}},
	"filter.*.process": {config: "[filter \"x\"]\n\tprocess = PROG\n", attrs: "f filter=x\n", git: []string{"add", "f"}},
	"credential.helper": {config: "[credential]\n\thelper = PROG\n", git: []string{"credential", "fill"},
		stdin: "protocol=https\nhost=example.org\nusername=u\n\n"},
	"credential.*.helper": {config: "[credential \"https://example.org\"]\n\thelper = PROG\n", git: []string{"credential", "fill"},
		stdin: "protocol=https\nhost=example.org\nusername=u\n\n"},
	"gpg.program":               {config: "[gpg]\n\tprogram = PROG\n", git: []string{"commit", "-q", "-S", "--allow-empty", "-m", "x"}},
	"gpg.*.program":             {config: "[gpg \"openpgp\"]\n\tprogram = PROG\n", git: []string{"commit", "-q", "-S", "--allow-empty", "-m", "x"}},
	"gpg.ssh.defaultkeycommand": {config: "[gpg]\n\tformat = ssh\n[gpg \"ssh\"]\n\tdefaultKeyCommand = PROG\n", git: []string{"commit", "-q", "-S", "--allow-empty", "-m", "x"}},
	"remote.*.uploadpack":       {config: "[remote \"o\"]\n\turl = .\n\tuploadpack = PROG\n", git: []string{"fetch", "-q", "o"}},
	"remote.*.receivepack":      {config: "[remote \"o\"]\n\turl = .\n\treceivepack = PROG\n", git: []string{"push", "-q", "o", "HEAD:refs/heads/y"}},
	"submodule.*.update": {config: "[submodule \"s\"]\n\tupdate = !PROG\n", prep: [][]string{{"-c", "protocol.file.allow=always", "submodule", "add", "-q", "./", "s"}, {"commit", "-q", "-m", "s"}, {"-C", "s", "checkout", "-q", "HEAD~1"}},
		git: []string{"submodule", "update"}},
	"interactive.difffilter": {config: "[interactive]\n\tdiffFilter = FILTER\n", git: []string{"add", "-p"}, stdin: "q\n", tty: true},
	"alias.*":                {config: "[alias]\n\tx = !PROG\n", git: []string{"x"}},
	"include.path":           {config: "[include]\n\tpath = INC\n", git: []string{"status"}},
	"includeif.*.path":       {config: "[includeIf \"gitdir:/\"]\n\tpath = INC\n", git: []string{"status"}},
	"browser.*.cmd":          {config: "[browser \"x\"]\n\tcmd = PROG\n", git: []string{"web--browse", "-b", "x", "http://example.org/"}},
	"browser.*.path":         {config: "[browser \"firefox\"]\n\tpath = PROG\n", git: []string{"web--browse", "-b", "firefox", "http://example.org/"}},
	"man.*.cmd":              {config: "[man]\n\tviewer = x\n[man \"x\"]\n\tcmd = PROG\n", git: []string{"help", "-m", "status"}},
	"tar.*.command":          {config: "[tar \"x\"]\n\tcommand = FILTER\n", git: []string{"archive", "-o", "/dev/null", "--format=x", "HEAD"}},
	"protocol.ext.allow":     {config: "[protocol \"ext\"]\n\tallow = always\n", git: []string{"ls-remote", "ext::PROG"}},
	"protocol.allow":         {config: "[protocol]\n\tallow = always\n", git: []string{"ls-remote", "ext::PROG"}},
	"trailer.*.command":      {config: "[trailer \"x\"]\n\tcommand = PROG\n", git: []string{"commit", "-q", "--allow-empty", "-m", "x", "--trailer", "x: y"}},
	"trailer.*.cmd":          {config: "[trailer \"x\"]\n\tcmd = PROG\n", git: []string{"commit", "-q", "--allow-empty", "-m", "x", "--trailer", "x: y"}},
}

// notRunHere are the keys TestGitProgramKeysRunByGit does not run, and why.
var notRunHere = map[string]string{
	"init.templatedir":           "read by git init and clone from the user's configuration; a re-init did not use a repository's own (git 2.39)",
	"uploadpack.packobjectshook": "read from protected (system, global, command-line) configuration only",
	"man.*.path":                 "used by the konqueror and woman viewers only",
	"guitool.*.cmd":              "needs git gui (Tk)",
	"instaweb.httpd":             "needs a web server and gitweb",
	"imap.tunnel":                "needs a mailbox to send",
	"sendemail.sendmailcmd":      "git send-email is a separate package",
	"sendemail.*.sendmailcmd":    "git send-email is a separate package",
	"sendemail.smtpserver":       "git send-email is a separate package",
	"sendemail.*.smtpserver":     "git send-email is a separate package",
	"sendemail.tocmd":            "git send-email is a separate package",
	"sendemail.cccmd":            "git send-email is a separate package",
	"sendemail.headercmd":        "git send-email is a separate package",
	"hook.*.command":             "config-based hooks are newer than this machine's git",
}

// TestGitProgramKeysRunByGit proves the table against the host's real git: for each key, a
// repository whose config sets it makes an ordinary git command run the program (a marker
// appears), and ExecKeys finds the key in that config. Every key is either run here or says
// why not.
func TestGitProgramKeysRunByGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	for _, k := range GitProgramKeys {
		run, ok := gitRuns[k.Name]
		if !ok {
			if notRunHere[k.Name] == "" {
				t.Errorf("%s: neither run by this test nor said why not (notRunHere)", k.Name)
			}
			continue
		}
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			mark := filepath.Join(dir, "ran")
			prog := filepath.Join(dir, "prog")
			mustWrite(t, prog, "#!/bin/sh\ntouch "+mark+"\nexit 0\n")
			filter := filepath.Join(dir, "filter")
			mustWrite(t, filter, "#!/bin/sh\ntouch "+mark+"\nexec cat\n")
			hooks := filepath.Join(dir, "hooks")
			mustWrite(t, filepath.Join(hooks, "pre-commit"), "#!/bin/sh\ntouch "+mark+"\n")
			for _, p := range []string{prog, filter, filepath.Join(hooks, "pre-commit")} {
				os.Chmod(p, 0o755)
			}
			inc := filepath.Join(dir, "inc")
			mustWrite(t, inc, "[core]\n\tfsmonitor = "+prog+"\n")
			subst := strings.NewReplacer("PROG", prog, "FILTER", filter, "HOOKS", hooks, "INC", inc)
			hostRepo(t, ws)
			cfg := subst.Replace(run.config)
			f, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(cfg)
			f.Close()
			if run.attrs != "" {
				mustWrite(t, filepath.Join(ws, ".git", "info", "attributes"), run.attrs)
			}
			for _, p := range run.prep {
				// A copy: the table is shared by every run of the test (-count).
				args := make([]string, len(p))
				for i := range p {
					args[i] = subst.Replace(p[i])
				}
				gitIn(ws, "", false, args...)
			}
			os.Remove(mark)
			args := make([]string, len(run.git))
			for i, a := range run.git {
				args[i] = subst.Replace(a)
			}
			out := gitIn(ws, run.stdin, run.tty, args...)
			if _, err := os.Stat(mark); err != nil {
				t.Errorf("git %v did not run %s's program: the table's entry is not proven\n%s", args, k.Name, out)
			}
			want := ""
			entries, err := ParseConfig([]byte(cfg))
			if err != nil {
				t.Errorf("ParseConfig of the config that ran: %v\n%s", err, cfg)
			}
			for _, e := range entries {
				if k.match(e) {
					want = e.Name()
				}
			}
			keys, _ := ExecKeys([]byte(cfg))
			got := strings.Join(keys, ",")
			if want == "" || !strings.Contains(","+got+",", ","+want+",") && !strings.Contains(","+got+",", ","+want+" (!),") {
				t.Errorf("ExecKeys finds %q in the config that ran, want %s:\n%s", got, k.Name, cfg)
			}
		})
	}
}

// hostRepo makes a repository at ws: f committed as 1 then 2 on main, as 3 on branch other
// (from 1), and f changed to 4 in the worktree.
func hostRepo(t *testing.T, ws string) {
	t.Helper()
	os.MkdirAll(ws, 0o755)
	steps := [][]string{{"init", "-q", "-b", "main"}}
	for _, s := range steps {
		gitIn(ws, "", false, s...)
	}
	mustWrite(t, filepath.Join(ws, "f"), "1\n")
	gitIn(ws, "", false, "add", "f")
	gitIn(ws, "", false, "commit", "-q", "-m", "1")
	gitIn(ws, "", false, "branch", "other")
	mustWrite(t, filepath.Join(ws, "f"), "2\n")
	gitIn(ws, "", false, "commit", "-q", "-am", "2")
	gitIn(ws, "", false, "checkout", "-q", "other")
	mustWrite(t, filepath.Join(ws, "f"), "3\n")
	gitIn(ws, "", false, "commit", "-q", "-am", "3")
	gitIn(ws, "", false, "checkout", "-q", "main")
	mustWrite(t, filepath.Join(ws, "f"), "4\n")
}

// gitIn runs the host's git in dir with no global or system configuration, no editor or
// pager from the environment, and returns its output (errors are part of it).
func gitIn(dir, stdin string, tty bool, args ...string) string {
	out, err := gitOut(dir, stdin, tty, args...)
	if err != nil {
		return out + "\n(" + err.Error() + ")"
	}
	return out
}

// gitOK is gitIn (no terminal) that fails the test when git fails, its output trimmed.
func gitOK(t testing.TB, dir, stdin string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, stdin, false, args...)
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return strings.TrimSpace(out)
}

// gitOut is gitIn, its error apart.
func gitOut(dir, stdin string, tty bool, args ...string) (string, error) {
	var cmd *exec.Cmd
	if tty {
		line := "git"
		for _, a := range args {
			line += " '" + a + "'"
		}
		cmd = exec.Command("script", "-qec", line, "/dev/null")
	} else {
		cmd = exec.Command("git", args...)
	}
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	env := []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "TERM=xterm", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PATH", "HOME", "LANG":
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pinnedRels returns what lay pins, relative to its workspace.
// pinnedRels returns the workspace-relative paths lay protects: bound read-only when present,
// guarded when absent (what a box writes there is moved into its proposed changes).
func pinnedRels(lay *Layout) map[string]bool {
	out := map[string]bool{}
	for _, p := range lay.Protected {
		rel, _ := filepath.Rel(lay.Workspace, p.Path)
		out[rel] = true
	}
	for _, g := range lay.Guards {
		rel, _ := filepath.Rel(lay.Workspace, g.Path)
		out[rel] = true
	}
	return out
}

func wantPinned(t *testing.T, lay *Layout, rels ...string) {
	t.Helper()
	got := pinnedRels(lay)
	for _, r := range rels {
		if !got[r] {
			t.Errorf("%s not pinned (notes %q)", r, lay.Notes)
		}
	}
}

// newWS returns a symlink-resolved temporary workspace holding a git repository (.git/HEAD,
// .git/config, .git/hooks/pre-commit, .git/info/exclude).
func newWS(t *testing.T) string {
	t.Helper()
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	mustWrite(t, filepath.Join(ws, ".git/HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\trepositoryformatversion = 0\n")
	mustWrite(t, filepath.Join(ws, ".git/hooks/pre-commit"), "#!/bin/sh\n")
	mustWrite(t, filepath.Join(ws, ".git/info/exclude"), "")
	return ws
}

func resolveWS(t *testing.T, ws string) *Layout {
	t.Helper()
	lay, err := Resolve(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	return lay
}

// movedAside checks that a verification after the snapshot reports path created or modified
// and moved aside, and that the file is gone from path.
// keptAside reports whether what was at path lies where the first move aside puts it:
// beside it renamed (a file) or under its name in .agentbox-quarantined-1 (a folder).
func keptAside(path string) error {
	if _, err := os.Lstat(AsidePath(path, 1)); err == nil {
		return nil
	}
	_, err := os.Lstat(AsideDirPath(path, 1))
	return err
}

func movedAside(t *testing.T, s *State, path string) {
	t.Helper()
	for _, tr := range s.VerifyExec() {
		if tr.Path == path && (tr.Kind == Created || tr.Kind == Modified) && strings.Contains(tr.Detail, "moved aside to") {
			if _, err := os.Lstat(path); err == nil {
				t.Errorf("%s still there after the move aside", path)
			}
			if err := keptAside(path); err != nil {
				t.Errorf("%s not kept aside: %v", path, err)
			}
			return
		}
	}
	t.Errorf("%s not moved aside", path)
}

// gitSurfaceTests prove each GitSurfaceFiles entry's cover.
var gitSurfaceTests = map[string]func(t *testing.T){
	"GITDIR/config": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/config")
	},
	"GITDIR/config.worktree": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/config.worktree")
	},
	"GITDIR/hooks/": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/hooks")
	},
	"GITDIR/commondir": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/commondir")
	},
	"GITDIR/info/attributes": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/info/attributes")
	},
	"GITDIR/refs/replace/": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/refs/replace")
	},
	"GITDIR/packed-refs (refs/replace/ lines)": func(t *testing.T) {
		ws := newWS(t)
		const a, b, c = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
		head := "# pack-refs with: peeled fully-peeled sorted \n" + a + " refs/heads/main\n" +
			b + " refs/replace/" + c + "\n"
		mustWrite(t, filepath.Join(ws, ".git/packed-refs"), head)
		s := Snapshot(resolveWS(t, ws), Limits{})
		// A box packs a replace ref of its own (with a peeled line) and a tag.
		added := b + " refs/replace/" + a + "\n^" + c + "\n" + c + " refs/tags/v1\n"
		mustWrite(t, filepath.Join(ws, ".git/packed-refs"), head+added)
		ts := s.VerifyExec()
		if len(ts) != 1 || !strings.Contains(ts[0].Detail, "the 1 replace refs added") {
			t.Fatalf("transitions: %+v", ts)
		}
		got, _ := os.ReadFile(filepath.Join(ws, ".git/packed-refs"))
		if want := head + c + " refs/tags/v1\n"; string(got) != want {
			t.Errorf("packed-refs after the check:\n%s\nwant:\n%s", got, want)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git/packed-refs.lock")); err == nil {
			t.Error("git's lock was left behind")
		}
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Errorf("a second check found more: %+v", ts)
		}
		// A lock that stays longer than git waits for one is a box's (made so that no strip
		// could take it, review 12 F7): moved aside, and the ref stripped.
		packedLockWait = 100 * time.Millisecond
		t.Cleanup(func() { packedLockWait = 2 * time.Second })
		mustWrite(t, filepath.Join(ws, ".git/packed-refs"), head+added)
		mustWrite(t, filepath.Join(ws, ".git/packed-refs.lock"), "the box's")
		if ts := s.VerifyExec(); len(ts) != 1 || !strings.Contains(ts[0].Detail, "the 1 replace refs added") ||
			!strings.Contains(ts[0].Detail, "packed-refs.lock held longer than git waits") {
			t.Errorf("with a lock the box made: %+v", ts)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, ".git/packed-refs")); strings.Contains(string(got), "refs/replace/"+a) {
			t.Errorf("the box's replace ref stayed behind its lock:\n%s", got)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git/packed-refs.lock")); err == nil {
			t.Error("the box's lock is still in place")
		}
		if m, _ := filepath.Glob(filepath.Join(ws, ".git/packed-refs.lock.*")); len(m) != 1 {
			t.Errorf("the box's lock was not moved aside (found %v)", m)
		}
		// packed-refs made a symlink to a workspace file (git reads through it): read through,
		// and replaced by the file without the box's line.
		mustWrite(t, filepath.Join(ws, "notes.txt"), head+added)
		os.Remove(filepath.Join(ws, ".git/packed-refs"))
		if err := os.Symlink("../notes.txt", filepath.Join(ws, ".git/packed-refs")); err != nil {
			t.Fatal(err)
		}
		if ts := s.VerifyExec(); len(ts) != 1 || !strings.Contains(ts[0].Detail, "the 1 replace refs added") {
			t.Errorf("through a symlink: %+v", ts)
		}
		if fi, err := os.Lstat(filepath.Join(ws, ".git/packed-refs")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("packed-refs after the check: %v, %v (want a regular file)", fi, err)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, ".git/packed-refs")); strings.Contains(string(got), "refs/replace/"+a) {
			t.Errorf("the box's replace ref is still read through packed-refs:\n%s", got)
		}
		// Leading out of the workspace, where nothing can be filtered: the link is moved aside.
		out := filepath.Join(t.TempDir(), "refs")
		mustWrite(t, out, head+added)
		os.Remove(filepath.Join(ws, ".git/packed-refs"))
		if err := os.Symlink(out, filepath.Join(ws, ".git/packed-refs")); err != nil {
			t.Fatal(err)
		}
		if ts := s.VerifyExec(); len(ts) != 1 || !strings.Contains(ts[0].Detail, "moved aside") {
			t.Errorf("a symlink leading out: %+v", ts)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git/packed-refs")); err == nil {
			t.Error("packed-refs leading out of the workspace is still there")
		}
	},
	"GITDIR/info/grafts": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/info/grafts")
	},
	"GITDIR/objects/info/alternates, http-alternates": func(t *testing.T) {
		// Absent: guarded, in the workspace's gitdir and a submodule's; present: pinned.
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, ".git/modules/s/HEAD"), "0\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/s/objects/info/alternates"), "../../../../objects\n")
		wantPinned(t, resolveWS(t, ws), ".git/objects/info/alternates", ".git/objects/info/http-alternates",
			".git/modules/s/objects/info/alternates", ".git/modules/s/objects/info/http-alternates")
		// A nested repository's, and a bare one's, that a box writes or changes: moved aside.
		mustWrite(t, filepath.Join(ws, "old/.git/objects/info/alternates"), "/srv/shared/objects\n")
		mustWrite(t, filepath.Join(ws, "b.git/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "b.git/config"), "[core]\n\tbare = true\n")
		mustWrite(t, filepath.Join(ws, "b.git/objects/info/packs"), "")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("transitions without a change: %+v", ts)
		}
		mustWrite(t, filepath.Join(ws, "old/.git/objects/info/alternates"), "/home/u/.local/state/agentbox/cache/x/objects\n")
		movedAside(t, s, filepath.Join(ws, "old/.git/objects/info/alternates"))
		mustWrite(t, filepath.Join(ws, "a/.git/objects/info/http-alternates"), "https://evil.example.org/objects\n")
		movedAside(t, s, filepath.Join(ws, "a/.git/objects/info/http-alternates"))
		// A bare repository's, at the event of its objects/info folder.
		p := filepath.Join(ws, "b.git/objects/info/alternates")
		mustWrite(t, p, "/tmp/box/objects\n")
		if ts := s.VerifyExecIn([]string{filepath.Join(ws, "b.git")}); len(ts) != 1 || ts[0].Path != p || !strings.Contains(ts[0].Detail, "moved aside to") {
			t.Errorf("a bare repository's new alternates at the scan of the repository: %+v", ts)
		}
	},
	"GITDIR/info/exclude": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".git/info/exclude")
	},
	"include.path, includeIf.*.path targets": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, ".git/config"), "[include]\n\tpath = \"../team.gitconfig\" ; shared\n\tpath = ~/.gitconfig-x\n[includeIf \"gitdir:/\"]\n\tpath = ../conf/b.cfg\n")
		mustWrite(t, filepath.Join(ws, "team.gitconfig"), "[include]\n\tpath = conf/c.cfg\n")
		mustWrite(t, filepath.Join(ws, "conf/b.cfg"), "[user]\n")
		mustWrite(t, filepath.Join(ws, "conf/c.cfg"), "[user]\n[include]\n\tpath = local.cfg\n")
		// conf/local.cfg is absent: guarded, so that what a box writes there never stays.
		lay := resolveWS(t, ws)
		wantPinned(t, lay, "team.gitconfig", "conf/b.cfg", "conf/c.cfg", "conf/local.cfg")
	},
	"core.hooksPath folder": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\thooksPath = .githooks\n")
		mustWrite(t, filepath.Join(ws, ".githooks/pre-commit"), "#!/bin/sh\n")
		wantPinned(t, resolveWS(t, ws), ".githooks")
		// husky 9: .husky/_/pre-commit runs .husky/pre-commit.
		mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\thooksPath = .husky/_\n")
		mustWrite(t, filepath.Join(ws, ".husky/_/pre-commit"), "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n")
		mustWrite(t, filepath.Join(ws, ".husky/pre-commit"), "npm test\n")
		wantPinned(t, resolveWS(t, ws), ".husky/_", ".husky")
		// A relative hooksPath in the user's ~/.gitconfig is each repository's folder.
		home := t.TempDir()
		t.Setenv("HOME", home)
		t.Setenv("XDG_CONFIG_HOME", "")
		mustWrite(t, filepath.Join(home, ".gitconfig"), "[core]\n\thooksPath = .hooks-of-mine\n")
		mustWrite(t, filepath.Join(ws, ".hooks-of-mine/pre-push"), "#!/bin/sh\n")
		wantPinned(t, resolveWS(t, ws), ".hooks-of-mine")
		os.Remove(filepath.Join(home, ".gitconfig"))
		// Through an included file, and absent: a guarded folder.
		mustWrite(t, filepath.Join(ws, ".git/config"), "[include]\n\tpath = ../hooks.cfg\n")
		mustWrite(t, filepath.Join(ws, "hooks.cfg"), "[core]\n\thooksPath = tools/hooks\n")
		wantPinned(t, resolveWS(t, ws), "hooks.cfg", "tools/hooks")
		// Each work tree's own folder (review 32): a linked worktree beneath the workspace,
		// with its config.worktree, and a checked-out submodule (its core.worktree).
		mustWrite(t, filepath.Join(ws, ".git/config"), "[core]\n\thooksPath = .githooks\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/feat/gitdir"), filepath.Join(ws, "wt/feat/.git")+"\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/feat/commondir"), "../..\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/feat/HEAD"), "ref: refs/heads/feat\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/feat/config.worktree"), "[core]\n\thooksPath = own-hooks\n")
		mustWrite(t, filepath.Join(ws, "wt/feat/.git"), "gitdir: "+filepath.Join(ws, ".git/worktrees/feat")+"\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/sub/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/sub/config"), "[core]\n\tworktree = ../../../sub\n\thooksPath = sub-hooks\n")
		mustWrite(t, filepath.Join(ws, "sub/.git"), "gitdir: ../.git/modules/sub\n")
		wantPinned(t, resolveWS(t, ws), ".githooks", "wt/feat/.githooks", "wt/feat/own-hooks", "sub/sub-hooks")
	},
	"a nested repository's core.hooksPath folder": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, "nested/.git/HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(ws, "nested/.git/objects"), 0o755)
		os.MkdirAll(filepath.Join(ws, "nested/.git/refs"), 0o755)
		mustWrite(t, filepath.Join(ws, "nested/.git/config"), "[core]\n\thooksPath = hk\n")
		mustWrite(t, filepath.Join(ws, "nested/hk/pre-push"), "#!/bin/sh\n")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Errorf("the folder's hooks there at launch are a change: %+v", ts)
		}
		mustWrite(t, filepath.Join(ws, "nested/hk/pre-commit"), "#!/bin/sh\necho box\n")
		movedAside(t, s, filepath.Join(ws, "nested/hk/pre-commit"))
		// Through an include of its configuration (review 32 C, F3).
		ws = newWS(t)
		mustWrite(t, filepath.Join(ws, "inc/.git/HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(ws, "inc/.git/objects"), 0o755)
		os.MkdirAll(filepath.Join(ws, "inc/.git/refs"), 0o755)
		mustWrite(t, filepath.Join(ws, "inc/.git/config"), "[include]\n\tpath = hooks.conf\n")
		mustWrite(t, filepath.Join(ws, "inc/.git/hooks.conf"), "[core]\n\thooksPath = hk\n")
		os.MkdirAll(filepath.Join(ws, "inc/hk"), 0o755)
		// A linked worktree whose git directory does not name it back (no gitdir file): its
		// .git file does (review 32 C, F4).
		mustWrite(t, filepath.Join(ws, "inc/.git/worktrees/w/HEAD"), "ref: refs/heads/w\n")
		mustWrite(t, filepath.Join(ws, "inc/.git/worktrees/w/commondir"), "../..\n")
		mustWrite(t, filepath.Join(ws, "wt/.git"), "gitdir: "+filepath.Join(ws, "inc/.git/worktrees/w")+"\n")
		os.MkdirAll(filepath.Join(ws, "wt/hk"), 0o755)
		s = Snapshot(resolveWS(t, ws), Limits{})
		mustWrite(t, filepath.Join(ws, "inc/hk/pre-commit"), "#!/bin/sh\necho box\n")
		movedAside(t, s, filepath.Join(ws, "inc/hk/pre-commit"))
		mustWrite(t, filepath.Join(ws, "wt/hk/pre-commit"), "#!/bin/sh\necho box\n")
		movedAside(t, s, filepath.Join(ws, "wt/hk/pre-commit"))
	},
	"GITDIR/rr-cache/*": func(t *testing.T) {
		ws := newWS(t)
		const id = "0123456789abcdef0123456789abcdef01234567"
		mustWrite(t, filepath.Join(ws, ".git/rr-cache/"+id+"/preimage"), "<<<<<<<\na\n=======\nb\n>>>>>>>\n")
		mustWrite(t, filepath.Join(ws, ".git/rr-cache/"+id+"/postimage"), "a b\n")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Errorf("an entry there at launch is a change: %+v", ts)
		}
		// A new entry, and the old one's postimage rewritten.
		const id2 = "89abcdef0123456789abcdef0123456789abcdef"
		mustWrite(t, filepath.Join(ws, ".git/rr-cache/"+id2+"/preimage"), "x\n")
		mustWrite(t, filepath.Join(ws, ".git/rr-cache/"+id2+"/postimage"), "evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/rr-cache/"+id2))
		mustWrite(t, filepath.Join(ws, ".git/rr-cache/"+id+"/postimage"), "a b evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/rr-cache/"+id))
		// In a nested repository, and rr-cache as a symlink out of the workspace.
		out := t.TempDir()
		mustWrite(t, filepath.Join(ws, "n/.git/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "n/.git/rr-cache/"+id+"/postimage"), "evil\n")
		movedAside(t, s, filepath.Join(ws, "n/.git/rr-cache/"+id))
		os.RemoveAll(filepath.Join(ws, "n/.git/rr-cache"))
		if err := os.Symlink(out, filepath.Join(ws, "n/.git/rr-cache")); err != nil {
			t.Fatal(err)
		}
		movedAside(t, s, filepath.Join(ws, "n/.git/rr-cache"))
	},
	"GitPathKeys (core.worktree, core.excludesFile, core.attributesFile) leading out of the workspace": func(t *testing.T) {
		ws := newWS(t)
		out, _ := filepath.EvalSymlinks(t.TempDir())
		// A submodule's own core.worktree (relative to its gitdir, beneath the workspace) and
		// a nested repository's leading into the workspace are no finding.
		mustWrite(t, filepath.Join(ws, ".git/modules/s/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/s/config"), "[core]\n\tworktree = ../../../s\n")
		mustWrite(t, filepath.Join(ws, "n/.git/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "n/.git/config"), "[core]\n\tworktree = ../../w\n\texcludesFile = ../x/ignore\n")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Errorf("values beneath the workspace are a finding: %+v", ts)
		}
		for i, c := range []string{
			"[core]\n\tworktree = " + out + "\n",
			"[core]\n\tworktree = ../../../" + filepath.Base(filepath.Dir(ws)) + "\n", // relative, out
			"[core]\n\tworktree = ../../link\n",                                       // a symlink beneath the workspace leading out
			"[core]\n\texcludesFile = " + out + "/ignore\n",
			"[core]\n\tattributesFile = ~/attrs\n",
			"[core]\n\tworktree = ~someone/w\n",
		} {
			ws := newWS(t)
			os.Symlink(out, filepath.Join(ws, "link"))
			mustWrite(t, filepath.Join(ws, "n/.git/HEAD"), "ref: refs/heads/main\n")
			s := Snapshot(resolveWS(t, ws), Limits{})
			mustWrite(t, filepath.Join(ws, "n/.git/config"), c)
			t.Run(itoa(i), func(t *testing.T) { movedAside(t, s, filepath.Join(ws, "n/.git/config")) })
		}
	},
	"the user's configuration: include targets, init.templateDir, core.excludesFile, core.attributesFile, core.hooksPath beneath the workspace": func(t *testing.T) {
		// A folder of repositories with no git directory at its top, and the user's
		// configuration includes a file in it (review 14, F17): "~" expanded, a relative
		// include beside the including file, nested includes, whatever the condition.
		ws, _ := filepath.EvalSymlinks(t.TempDir())
		home, _ := filepath.EvalSymlinks(t.TempDir())
		xdg := t.TempDir()
		t.Setenv("HOME", home)
		t.Setenv("XDG_CONFIG_HOME", xdg)
		rel, _ := filepath.Rel(home, ws)
		mustWrite(t, filepath.Join(xdg, "git/config"), "[include]\n\tpath = ~/inc.cfg\n[init]\n\ttemplateDir = "+ws+"/tmpl\n")
		mustWrite(t, filepath.Join(home, "inc.cfg"), "[includeIf \"gitdir:/nowhere/\"]\n\tpath = "+rel+"/.gitconfig\n")
		mustWrite(t, filepath.Join(home, ".gitconfig"), "[core]\n\texcludesFile = ~/"+rel+"/ignore\n\tattributesFile = "+ws+"/attrs\n\thooksPath = "+ws+"/hooks\n"+
			"\tfsmonitor = ~/"+rel+"/tools/fsmon --flag\n[alias]\n\tx = !"+ws+"/tools/alias.sh\n[filter \"f\"]\n\tclean = tools/rel.sh\n")
		mustWrite(t, filepath.Join(ws, ".gitconfig"), "[include]\n\tpath = team/more.cfg\n")
		mustWrite(t, filepath.Join(ws, "repo/.git/HEAD"), "ref: refs/heads/main\n")
		// team/more.cfg, tmpl, attrs, hooks and the programs are absent: guarded.
		lay := resolveWS(t, ws)
		wantPinned(t, lay, ".gitconfig", "team/more.cfg", "tmpl", "ignore", "attrs", "hooks", "tools/fsmon", "tools/alias.sh")
		if pinnedRels(lay)["tools/rel.sh"] {
			t.Error("a program git looks up on PATH (or in each repository) is pinned by its name in the workspace")
		}
		// Through symlinks: $HOME a link, an include target a link into the workspace.
		// Review 17, F2 and F6: the paths git reaches through a link are compared resolved.
		ws, _ = filepath.EvalSymlinks(t.TempDir())
		root, _ := filepath.EvalSymlinks(t.TempDir())
		home = filepath.Join(root, "real")
		os.Mkdir(home, 0o755)
		link := filepath.Join(root, "homelink")
		if err := os.Symlink(home, link); err != nil {
			t.Fatal(err)
		}
		t.Setenv("HOME", link)
		t.Setenv("XDG_CONFIG_HOME", "")
		// ~/inc.cfg -> WS/dot/inc.cfg (stow's way), which sets a hooks folder by "~" through
		// the linked home, and ~/ws-link -> WS.
		mustWrite(t, filepath.Join(ws, "dot/inc.cfg"), "[core]\n\thooksPath = ~/ws-link/hooks\n")
		if err := os.Symlink(filepath.Join(ws, "dot/inc.cfg"), filepath.Join(home, "inc.cfg")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ws, filepath.Join(home, "ws-link")); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(home, ".gitconfig"), "[include]\n\tpath = ~/inc.cfg\n\tpath = ~/ws-link/team.cfg\n")
		mustWrite(t, filepath.Join(ws, "repo/.git/HEAD"), "ref: refs/heads/main\n")
		wantPinned(t, resolveWS(t, ws), "dot/inc.cfg", "hooks", "team.cfg")
	},
	".git (a file)": func(t *testing.T) {
		ws, _ := filepath.EvalSymlinks(t.TempDir())
		mustWrite(t, filepath.Join(ws, "gd/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, ".git"), "gitdir: gd\n")
		wantPinned(t, resolveWS(t, ws), ".git", "gd/config", "gd/hooks")
	},
	".gitmodules": func(t *testing.T) {
		wantPinned(t, resolveWS(t, newWS(t)), ".gitmodules")
	},
	"GITDIR/modules/**/ (submodule gitdirs, any depth)": func(t *testing.T) {
		ws := newWS(t)
		// HEAD a symlink (git accepts one into refs/), nested submodules, and 70 decoy gitdirs
		// sorted before the submodule .gitmodules names.
		mustWrite(t, filepath.Join(ws, ".git/modules/sub/refs/heads/old"), "0\n")
		os.Symlink("refs/heads/old", filepath.Join(ws, ".git/modules/sub/HEAD"))
		mustWrite(t, filepath.Join(ws, ".git/modules/sub/modules/inner/HEAD"), "0\n")
		for i := 0; i < 70; i++ {
			mustWrite(t, filepath.Join(ws, ".git/modules", "a"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i), "HEAD"), "0\n")
		}
		mustWrite(t, filepath.Join(ws, ".gitmodules"), "[submodule \"sub\"]\n\tpath = sub\n\turl = ../x\n")
		wantPinned(t, resolveWS(t, ws), ".git/modules/sub/config", ".git/modules/sub/hooks",
			".git/modules/sub/modules/inner/hooks", ".git/modules/sub/modules/inner/config")
	},
	"SUBMODULE/.git (a file)": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, ".gitmodules"), "[submodule \"s\"]\n\tpath = lib/s\n\turl = ../x\n")
		mustWrite(t, filepath.Join(ws, "lib/s/.git"), "gitdir: ../../.git/modules/s\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/s/HEAD"), "0\n")
		wantPinned(t, resolveWS(t, ws), "lib/s/.git", ".git/modules/s/hooks")
		// Absent (review 13, F9): an uninitialised submodule of .gitmodules, and a gitlink of
		// the index only, are guarded.
		ws, _ = filepath.EvalSymlinks(t.TempDir())
		for _, args := range [][]string{{"init", "-q"}, {"update-index", "--add", "--cacheinfo", "160000," + strings.Repeat("1", 40) + ",vend/x"}} {
			if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		mustWrite(t, filepath.Join(ws, ".gitmodules"), "[submodule \"u\"]\n\tpath = lib/u\n\turl = ../x\n")
		os.MkdirAll(filepath.Join(ws, "lib/u"), 0o755)
		lay := resolveWS(t, ws)
		wantPinned(t, lay, "lib/u/.git", "vend/x/.git")
		for _, g := range lay.Guards {
			if strings.HasSuffix(g.Path, "/.git") && g.Dir {
				t.Errorf("%s is guarded as a folder, want a file", g.Path)
			}
		}
	},
	"GITDIR/worktrees/*/commondir, gitdir, config.worktree": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, ".git/worktrees/wt/commondir"), "../..\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/wt/gitdir"), "/elsewhere/wt/.git\n")
		mustWrite(t, filepath.Join(ws, ".git/worktrees/wt/HEAD"), "ref: refs/heads/wt\n")
		wantPinned(t, resolveWS(t, ws), ".git/worktrees/wt/commondir", ".git/worktrees/wt/gitdir", ".git/worktrees/wt/config.worktree")
	},
	"nested repositories: DIR/.git (folder, file or symlink), bare repositories": func(t *testing.T) {
		ws := newWS(t)
		mustWrite(t, filepath.Join(ws, "old/.git/config"), "[core]\n\tfsmonitor = user-tool\n")
		mustWrite(t, filepath.Join(ws, "old/.git/hooks/pre-push"), "#!/bin/sh\n")
		s := Snapshot(resolveWS(t, ws), Limits{})
		// Present at the snapshot and unchanged: left alone.
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("transitions without a change: %+v", ts)
		}
		mustWrite(t, filepath.Join(ws, "a/.git/config"), "[diff]\n\texternal = evil\n")
		movedAside(t, s, filepath.Join(ws, "a/.git/config"))
		mustWrite(t, filepath.Join(ws, "a/.git/hooks/post-checkout"), "evil\n")
		movedAside(t, s, filepath.Join(ws, "a/.git/hooks/post-checkout"))
		mustWrite(t, filepath.Join(ws, "old/.git/hooks/pre-push"), "#!/bin/sh\nevil\n")
		movedAside(t, s, filepath.Join(ws, "old/.git/hooks/pre-push"))
		// A bare repository, and a .git file whose gitdir lies elsewhere in the workspace.
		mustWrite(t, filepath.Join(ws, "b.git/HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(ws, "b.git/objects"), 0o755)
		mustWrite(t, filepath.Join(ws, "b.git/config"), "[core]\n\tsshCommand = evil\n")
		movedAside(t, s, filepath.Join(ws, "b.git/config"))
		mustWrite(t, filepath.Join(ws, "c/.git"), "gitdir: ../store/c\n")
		mustWrite(t, filepath.Join(ws, "store/c/config"), "[gpg]\n\tprogram = evil\n")
		movedAside(t, s, filepath.Join(ws, "store/c/config"))
		// A gitdir whose commondir points to a common dir the box made.
		mustWrite(t, filepath.Join(ws, "d/.git/commondir"), "../../common\n")
		mustWrite(t, filepath.Join(ws, "common/config"), "[core]\n\talternateRefsCommand = evil\n")
		movedAside(t, s, filepath.Join(ws, "common/config"))
		// A bare repository without a config (git needs none): its hooks; and a folder that is
		// one through the commondir it names, whose config is the common dir's.
		mustWrite(t, filepath.Join(ws, "e.git/HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(ws, "e.git/objects"), 0o755)
		os.MkdirAll(filepath.Join(ws, "e.git/refs"), 0o755)
		mustWrite(t, filepath.Join(ws, "e.git/hooks/pre-receive"), "evil\n")
		movedAside(t, s, filepath.Join(ws, "e.git/hooks/pre-receive"))
		os.MkdirAll(filepath.Join(ws, "cd/objects"), 0o755)
		os.MkdirAll(filepath.Join(ws, "cd/refs"), 0o755)
		mustWrite(t, filepath.Join(ws, "cd/config"), "[core]\n\tpager = evil\n")
		mustWrite(t, filepath.Join(ws, "src/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "src/commondir"), "../cd\n")
		movedAside(t, s, filepath.Join(ws, "cd/config"))
		// Submodule and worktree gitdirs beneath the workspace's own .git, beyond what is pinned.
		mustWrite(t, filepath.Join(ws, ".git/modules/late/HEAD"), "0\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/late/hooks/post-checkout"), "evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/modules/late/hooks/post-checkout"))
		mustWrite(t, filepath.Join(ws, ".git/worktrees/new/config.worktree"), "[core]\n\tpager = evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/worktrees/new/config.worktree"))
	},
	"GITDIR/rebase-merge/git-rebase-todo, GITDIR/sequencer/todo (with exec lines)": func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("git not installed")
		}
		dir, _ := filepath.EvalSymlinks(t.TempDir())
		ws := filepath.Join(dir, "ws")
		hostRepo(t, ws)
		gitIn(ws, "", false, "checkout", "-q", "--", "f")
		for _, c := range []string{"5", "6", "7"} {
			mustWrite(t, filepath.Join(ws, "f"), c+"\n")
			gitIn(ws, "", false, "commit", "-q", "-am", c)
		}
		mark := filepath.Join(dir, "ran")
		seq := filepath.Join(dir, "seq")
		todo := filepath.Join(ws, ".git/rebase-merge/git-rebase-todo")
		// The box's own git rebase -i --exec, begun during the launch: it stops at an edit,
		// a full scan runs, and its git rebase --continue goes on, exec lines and all. Before,
		// the scan moved the list aside and git had no rebase to continue.
		own := Snapshot(resolveWS(t, ws), Limits{})
		mustWrite(t, seq, "#!/bin/sh\nsed -i '1s/^pick/edit/' \"$1\"\necho 'exec touch "+mark+".own' >> \"$1\"\n")
		os.Chmod(seq, 0o755)
		gitIn(ws, "", false, "-c", "sequence.editor="+seq, "rebase", "-q", "-i", "HEAD~3")
		if ts := own.VerifyExec(); len(ts) != 0 {
			t.Errorf("the box's own stopped rebase, at a full scan while it runs: %+v", ts)
		}
		out := gitIn(ws, "", false, "rebase", "--continue")
		if _, err := os.Stat(mark + ".own"); err != nil {
			t.Errorf("the box's own git rebase --continue did not run its exec line:\n%s", out)
		}
		if _, err := os.Stat(filepath.Dir(todo)); err == nil {
			t.Errorf("the box's own rebase did not end:\n%s", out)
		}
		// Stopped again when the box ends: the check at exit moves the list aside (reported
		// as created, never seen by the host), and the host's git rebase --continue runs none
		// of it.
		gitIn(ws, "", false, "-c", "sequence.editor="+seq, "rebase", "-q", "-i", "HEAD~3")
		if ts := own.VerifyExec(); len(ts) != 0 {
			t.Errorf("the box's own stopped rebase, at a full scan while it runs: %+v", ts)
		}
		os.Remove(mark + ".own")
		moved := false
		for _, tr := range own.VerifyExit() {
			moved = moved || tr.Path == todo && tr.Kind == Created && strings.Contains(tr.Detail, "moved aside to")
		}
		if _, err := os.Lstat(todo); err == nil || !moved {
			t.Errorf("the box's stopped rebase was not moved aside at exit")
		}
		out = gitIn(ws, "", false, "rebase", "--continue")
		if _, err := os.Stat(mark + ".own"); err == nil {
			t.Errorf("the host's git rebase --continue after the box ran the box's exec line:\n%s", out)
		}
		gitIn(ws, "", false, "rebase", "--abort")
		// A rebase the host stopped, exec line and all: present at the snapshot, left alone.
		mustWrite(t, seq, "#!/bin/sh\nsed -i '1s/^pick/edit/' \"$1\"\necho 'exec touch "+mark+".host' >> \"$1\"\n")
		os.Chmod(seq, 0o755)
		gitIn(ws, "", false, "-c", "sequence.editor="+seq, "rebase", "-q", "-i", "HEAD~3")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("the host's own stopped rebase: %+v", ts)
		}
		gitIn(ws, "", false, "rebase", "--abort")
		// The box stops a rebase at its first commit, with an exec line after the next two
		// commands (git status shows those two only).
		mustWrite(t, seq, "#!/bin/sh\nsed -i '1s/^pick/edit/' \"$1\"\necho 'exec touch "+mark+"' >> \"$1\"\n")
		gitIn(ws, "", false, "-c", "sequence.editor="+seq, "rebase", "-q", "-i", "HEAD~3")
		if b, err := os.ReadFile(todo); err != nil || !strings.Contains(string(b), "exec touch") {
			t.Fatalf("the box's todo list: %q, %v", b, err)
		}
		movedAside(t, s, todo)
		out = gitIn(ws, "", false, "rebase", "--continue")
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("the host's git rebase --continue ran the box's exec line:\n%s", out)
		}
		// A cherry-pick sequence's todo list is judged the same: none at the snapshot, so the
		// launch's own, moved aside at exit.
		seqTodo := filepath.Join(ws, ".git/sequencer/todo")
		mustWrite(t, seqTodo, "pick 0000000 x\n  x touch "+mark+"\n")
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Errorf("a cherry-pick sequence begun while the box runs, at a full scan: %+v", ts)
		}
		for _, tr := range s.VerifyExit() {
			if tr.Path == seqTodo && !strings.Contains(tr.Detail, "moved aside to") {
				t.Errorf("%s at exit: %s", seqTodo, tr.Detail)
			}
		}
		if _, err := os.Lstat(seqTodo + QuarantineSuffix + "1"); err != nil {
			t.Errorf("%s not moved aside at exit: %v", seqTodo, err)
		}
	},
	"a git directory a box makes (GITDIR/modules/NAME of git submodule update --init, a nested repository's): its hooks folder as a symlink, its replace refs": func(t *testing.T) {
		// A submodule's git directory the host made before the launch, with a hooks folder
		// that is a symlink and a replace ref, is left alone; in one the box makes, the hooks
		// symlink and the replace refs folder are moved aside (e2e: TestAttackBoxMadeSubmoduleGitDir).
		ws := newWS(t)
		host := filepath.Join(ws, ".git/modules/host")
		mustWrite(t, filepath.Join(host, "HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "hk/x"), "")
		os.Symlink("../../../hk", filepath.Join(host, "hooks"))
		mustWrite(t, filepath.Join(host, "refs/replace/"+strings.Repeat("a", 40)), strings.Repeat("b", 40)+"\n")
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("transitions without a change: %+v", ts)
		}
		gd := filepath.Join(ws, ".git/modules/lib")
		mustWrite(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "bx/post-checkout"), "#!/bin/sh\n")
		os.Symlink("../../../bx", filepath.Join(gd, "hooks"))
		mustWrite(t, filepath.Join(gd, "refs/replace/"+strings.Repeat("c", 40)), strings.Repeat("d", 40)+"\n")
		ts := s.VerifyExec()
		for _, p := range []string{filepath.Join(gd, "hooks"), filepath.Join(gd, "refs/replace")} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s still there: %+v", p, ts)
			}
		}
		for _, p := range []string{".git/modules/host/hooks", ".git/modules/host/refs/replace"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
				t.Errorf("the host's own %s: %v", p, err)
			}
		}
	},
	"symlinks in GITDIR/modules/ (modules itself, or a folder on the way to a gitdir)": func(t *testing.T) {
		// One the host made before the launch is left alone; those a box makes are moved
		// aside: a submodule's gitdir, a folder on the way to one named a/b, and a nested
		// repository's modules folder.
		ws := newWS(t)
		far := t.TempDir() // the box cache, say
		mustWrite(t, filepath.Join(far, "gd/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(far, "a/b/HEAD"), "ref: refs/heads/main\n")
		mustWrite(t, filepath.Join(ws, "n/.git/HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(ws, ".git/modules"), 0o755)
		os.Symlink(filepath.Join(far, "gd"), filepath.Join(ws, ".git/modules/host"))
		s := Snapshot(resolveWS(t, ws), Limits{})
		if ts := s.VerifyExec(); len(ts) != 0 {
			t.Fatalf("transitions without a change: %+v", ts)
		}
		os.Symlink(filepath.Join(far, "gd"), filepath.Join(ws, ".git/modules/lib"))
		movedAside(t, s, filepath.Join(ws, ".git/modules/lib"))
		os.Symlink(filepath.Join(far, "a"), filepath.Join(ws, ".git/modules/a"))
		movedAside(t, s, filepath.Join(ws, ".git/modules/a"))
		os.Symlink(far, filepath.Join(ws, "n/.git/modules"))
		movedAside(t, s, filepath.Join(ws, "n/.git/modules"))
		if _, err := os.Lstat(filepath.Join(ws, ".git/modules/host")); err != nil {
			t.Errorf("the host's own symlink: %v", err)
		}
	},
	"symlinked config files and .git entries": func(t *testing.T) {
		ws := newWS(t)
		s := Snapshot(resolveWS(t, ws), Limits{})
		mustWrite(t, filepath.Join(ws, "notes.cfg"), "\xef\xbb\xbf[core]\n\tfsmonitor = evil\n")
		os.MkdirAll(filepath.Join(ws, "sub/.git"), 0o755)
		os.Symlink("../../notes.cfg", filepath.Join(ws, "sub/.git/config"))
		movedAside(t, s, filepath.Join(ws, "sub/.git/config"))
		if _, err := os.Stat(filepath.Join(ws, "notes.cfg")); err != nil {
			t.Errorf("the symlink's target was moved instead of the link: %v", err)
		}
		// A symlinked .git leading to a gitdir in the workspace.
		mustWrite(t, filepath.Join(ws, "hidden/gd/config"), "[filter \"x\"]\n\tclean = evil\n")
		os.MkdirAll(filepath.Join(ws, "e"), 0o755)
		os.Symlink("../hidden/gd", filepath.Join(ws, "e/.git"))
		movedAside(t, s, filepath.Join(ws, "hidden/gd/config"))
		// A config symlinked out of the workspace is moved aside too.
		os.MkdirAll(filepath.Join(ws, "f/.git"), 0o755)
		os.Symlink("/etc/hostname", filepath.Join(ws, "f/.git/config"))
		movedAside(t, s, filepath.Join(ws, "f/.git/config"))
	},
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestGitSurfaceFiles runs each entry's test; every entry of the table has one.
func TestGitSurfaceFiles(t *testing.T) {
	for _, f := range GitSurfaceFiles {
		test, ok := gitSurfaceTests[f.Path]
		if !ok {
			t.Errorf("%s has no test", f.Path)
			continue
		}
		t.Run(f.Path, test)
	}
}

// TestNestedConfigFiles: each agent's or editor's configuration file of the table that a box
// creates or rewrites in a folder beneath the workspace is moved aside; at the top, where it
// is pinned, the scan leaves it to the roots (the user's own edit is drift, not moved).
func TestNestedConfigFiles(t *testing.T) {
	for _, f := range NestedConfigFiles {
		t.Run(f.Dir+"/"+f.Name, func(t *testing.T) {
			name := strings.NewReplacer("*", "x").Replace(f.Name)
			if f.Name == "" { // every file beneath the folder, at any depth
				name = "sub/x.json"
			}
			rel := filepath.Join("pkg", f.Dir, name)
			ws := newWS(t)
			mustWrite(t, filepath.Join(ws, "old", f.Dir, name), "{}\n")
			top := filepath.Join(ws, f.Dir, name)
			mustWrite(t, top, "{}\n")
			lay, err := Resolve(ws, profilePins(t))
			if err != nil {
				t.Fatal(err)
			}
			s := Snapshot(lay, Limits{})
			mustWrite(t, filepath.Join(ws, rel), `{"evil": true}`+"\n")
			movedAside(t, s, filepath.Join(ws, rel))
			mustWrite(t, filepath.Join(ws, "old", f.Dir, name), `{"evil": true}`+"\n")
			movedAside(t, s, filepath.Join(ws, "old", f.Dir, name))
			// Found by the scan of the file's own folder too (a file event there).
			mustWrite(t, filepath.Join(ws, rel), `{"evil": 2}`+"\n")
			ts := s.VerifyExecIn([]string{filepath.Dir(filepath.Join(ws, rel))})
			if len(ts) != 1 || !strings.Contains(ts[0].Detail, "moved aside") {
				t.Errorf("the scan of %s: %+v", filepath.Dir(rel), ts)
			}
			mustWrite(t, top, `{"mine": true}`+"\n")
			for _, tr := range s.VerifyExec() {
				if tr.Path == top {
					t.Errorf("the pinned file at the top was taken for a finding: %+v", tr)
				}
			}
			if _, err := os.Stat(top); err != nil {
				t.Errorf("the pinned file at the top was moved: %v", err)
			}
		})
	}
}

// TestNestedConfigRemovedAtEvent: a file of a profile's configuration folder in a subfolder
// that the user had before the launch (sub/.claude/hooks/x.sh) is reported removed at the
// event of its own folder, and an event in the folder above it does not report it removed
// while it is there. Before, the scan took the folder above a folder named hooks for the
// owner of its files (as for a bare repository's hooks): a removal in sub/.claude/hooks and
// sub/.github/hooks was reported only by the next full scan, and an event in sub/.claude
// alone reported the hook removed, after which the next scan took it for new and moved the
// user's hook aside.
func TestNestedConfigRemovedAtEvent(t *testing.T) {
	for _, f := range NestedConfigFiles {
		if f.Name != "" {
			continue
		}
		t.Run(f.Dir, func(t *testing.T) {
			ws := newWS(t)
			p := filepath.Join(ws, "pkg", f.Dir, "x.sh")
			mustWrite(t, p, "#!/bin/sh\n")
			s := Snapshot(resolveWS(t, ws), Limits{})
			if _, ok := s.Exec[p]; !ok {
				t.Fatalf("%s is not configuration at the snapshot: the test would prove nothing", p)
			}
			if ts := s.VerifyExecIn([]string{filepath.Dir(filepath.Dir(p))}); len(ts) != 0 {
				t.Errorf("an event in the folder above reports: %+v", ts)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			ts := s.VerifyExecIn([]string{filepath.Dir(p)})
			if len(ts) != 1 || ts[0].Kind != Removed || ts[0].Path != p {
				t.Errorf("the event of its own folder reports %+v, want %s removed", ts, p)
			}
		})
	}
}

// TestPythonBytecodeMovedAside: a .pyc file that appears or changes in the workspace while a
// box runs — in a __pycache__ folder at the top or deeper, or a sourceless one beside the
// modules — is moved aside, so the host's python compiles the source again instead of
// importing the box's bytecode (review 10, F1; e2e TestPipInstallFromHostCache runs the
// host's python after a box planted one). A .pyc that was there before and is left alone
// stays, and a rewrite that keeps the size and puts the mtime back is still a change (its
// ctime moved).
func TestPythonBytecodeMovedAside(t *testing.T) {
	ws := newWS(t)
	kept := filepath.Join(ws, "lib", "__pycache__", "kept.cpython-311.pyc")
	old := filepath.Join(ws, "pkg", "__pycache__", "mod.cpython-311.pyc")
	mustWrite(t, kept, "host bytecode\n")
	mustWrite(t, old, "host bytecode\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("unchanged bytecode taken for a change: %+v", ts)
	}
	fi, err := os.Stat(old)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, old, "box bytecode!\n")
	if err := os.Chtimes(old, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	movedAside(t, s, old)
	for _, rel := range []string{"__pycache__/top.cpython-311.pyc", "pkg/sub/__pycache__/new.cpython-311.pyc", "json.pyc"} {
		p := filepath.Join(ws, rel)
		mustWrite(t, p, "box bytecode\n")
		movedAside(t, s, p)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the host's untouched bytecode was moved: %v", err)
	}
	// A __pycache__ made a symlink to a folder elsewhere (the box cache: review 12 F10), whose
	// bytecode the scan does not see, is moved aside whole.
	cache := t.TempDir()
	mustWrite(t, filepath.Join(cache, "mod.cpython-311.pyc"), "box bytecode\n")
	linked := filepath.Join(ws, "app", "__pycache__")
	os.MkdirAll(filepath.Dir(linked), 0o755)
	if err := os.Symlink(cache, linked); err != nil {
		t.Fatal(err)
	}
	movedAside(t, s, linked)
}

// TestPythonExtensionMovedAside guards review 12, F2: python's FileFinder imports an extension
// module (NAME.cpython-3XY-PLATFORM.so, NAME.abi3.so, NAME.so) before NAME.py, and
// NAME/__init__ with those suffixes before NAME/__init__.py; git ignores *.so. One that appears
// or changes beside a NAME.py or a folder NAME is moved aside like bytecode; one the host had
// there at the snapshot stays, and so do extension modules with no source beside them (a
// venv's site-packages, which a box's pip install fills).
func TestPythonExtensionMovedAside(t *testing.T) {
	ws := newWS(t)
	const tag = ".cpython-311-x86_64-linux-gnu.so"
	for _, rel := range []string{"app/mymod.py", "app/other.py", "app/flat.py", "pkg/__init__.py", "pkg/sub/__init__.py", "ns/x.py", "app/old.py"} {
		mustWrite(t, filepath.Join(ws, rel), "print('reviewed source')\n")
	}
	hostBuilt := filepath.Join(ws, "app", "old"+tag)
	mustWrite(t, hostBuilt, "host-built extension\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Fatalf("unchanged files taken for a change: %+v", ts)
	}
	for _, rel := range []string{"app/mymod" + tag, "app/other.abi3.so", "app/flat.so", "pkg/sub/__init__" + tag, "pkg" + tag, "ns.abi3.so"} {
		p := filepath.Join(ws, rel)
		mustWrite(t, p, "\x7fELF box extension\n")
		movedAside(t, s, p)
	}
	mustWrite(t, hostBuilt, "\x7fELF box rebuilt it\n")
	movedAside(t, s, hostBuilt)
	// No source beside them: a venv's compiled dependencies, a build's output, a library.
	for _, rel := range []string{".venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath" + tag, "build/lib/_speedups" + tag, "app/libfoo.so", "app/mymod.so.1"} {
		mustWrite(t, filepath.Join(ws, rel), "\x7fELF\n")
	}
	for _, tr := range s.VerifyExec() {
		t.Errorf("an extension module with no source beside it was taken for executable configuration: %s %s (%s)", tr.Kind, tr.Path, tr.Detail)
	}
}

// profilePins returns every built-in profile's workspaceConfig entries, as the daemon pins
// them at the workspace's top (folders with their trailing slash).
func profilePins(t *testing.T) []string {
	t.Helper()
	ps, err := profile.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.WorkspaceConfig...)
	}
	return out
}

// TestNestedConfigCoversProfiles guards review 11's F1: every built-in profile's
// workspaceConfig entry, pinned at the workspace's top, is nested configuration in any
// subfolder too (Codex reads .codex/config.toml in every folder between the project's root and
// its working folder). Before, the scan knew Claude's and the editors' files only: a box's
// sub/.codex/config.toml, sub/.gemini/settings.json, sub/opencode.json and
// sub/.github/copilot/settings.json stayed, and the host's Codex ran the MCP server it named.
func TestNestedConfigCoversProfiles(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "target/x.toml"), "x\n")
	want := map[string]string{} // path → the workspaceConfig entry
	for _, w := range profilePins(t) {
		rel := path.Join("a/b", w)
		if strings.HasSuffix(w, "/") {
			rel = path.Join(rel, "deep/x.toml")
		}
		mustWrite(t, filepath.Join(ws, rel), "x\n")
		want[filepath.Join(ws, rel)] = w
		// A symlink where the entry's first folder would be (l/N/.github -> ../../target).
		if first, _, ok := strings.Cut(w, "/"); ok {
			l := filepath.Join(ws, "l", strconv.Itoa(len(want)), first)
			os.MkdirAll(filepath.Dir(l), 0o755)
			if err := os.Symlink("../../target", l); err != nil {
				t.Fatal(err)
			}
			want[l] = w
		}
	}
	for _, rel := range []string{"src/main.go", "a/.github/workflows/ci.yml", "a/README.md"} {
		mustWrite(t, filepath.Join(ws, rel), "x\n")
	}
	found, notChecked := ScanExec(ws, nil, nil, Limits{})
	for p, w := range want {
		if _, ok := found[p]; !ok {
			t.Errorf("workspaceConfig %q: the scan does not take %s for configuration", w, p)
		}
	}
	for p, d := range found {
		if _, ok := want[p]; !ok && !strings.Contains(p, "/.git/") {
			t.Errorf("%s taken for configuration: %s", p, d)
		}
	}
	if notChecked != 0 {
		t.Errorf("scan incomplete: %d", notChecked)
	}
}

// TestNestedConfigSymlinkedFolder guards review 11's F2: a symlink in a subfolder that stands
// where a folder of configuration lies (crate/.cargo -> ../stuff/cfg, sub/.claude, sub/.vscode,
// sub/.github -> a folder holding copilot/) is moved aside itself, the link and not its target;
// one present at the snapshot stays until what it leads to changes. Before, the scan named a
// file by its folder's name, did not follow the link, and the host's cargo ran the
// rustc-wrapper the box's config.toml named.
func TestNestedConfigSymlinkedFolder(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "stuff/cfg/config.toml"), "[build]\nrustc-wrapper = \"/tmp/pwned\"\n")
	mustWrite(t, filepath.Join(ws, "stuff/gh/copilot/settings.json"), "{}\n")
	mustWrite(t, filepath.Join(ws, "old/cfg/config.toml"), "[build]\n")
	for link, target := range map[string]string{"old/.cargo": "cfg"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	lay, err := Resolve(ws, profilePins(t))
	if err != nil {
		t.Fatal(err)
	}
	s := Snapshot(lay, Limits{})
	links := map[string]string{
		"crate/.cargo":  "../stuff/cfg",
		"sub/.claude":   "../stuff/cfg",
		"sub/.vscode":   "../stuff/cfg",
		"sub/.github":   "../stuff/gh",
		"sub/.codex":    "../stuff/cfg",
		"sub/.opencode": "/etc",
	}
	for link, target := range links {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, link)), 0o755)
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range s.VerifyExec() {
		t.Logf("%s %s: %s", tr.Kind, tr.Path, tr.Detail)
	}
	for link := range links {
		if _, err := os.Lstat(filepath.Join(ws, link)); err == nil {
			t.Errorf("%s (a new symlinked config folder) is still there", link)
		}
		if fi, err := os.Lstat(filepath.Join(ws, link+QuarantineSuffix+"1")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: the link itself is not kept aside: %v", link, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "stuff/cfg/config.toml")); err != nil {
		t.Errorf("the link's target was moved: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "old/.cargo")); err != nil {
		t.Errorf("the symlinked folder present at the snapshot was moved: %v", err)
	}
	// What an old link leads to changes: the link is moved aside.
	mustWrite(t, filepath.Join(ws, "old/cfg/config.toml"), "[build]\nrustc-wrapper = \"/tmp/pwned\"\n")
	movedAside(t, s, filepath.Join(ws, "old/.cargo"))
}

// TestScanUnreadableFolder guards review 11's F3: a folder its owner cannot list (a box's
// mkdir -m 311) still lets npm, cargo and git open what it holds by name. The scan gives the
// owner back the read bit and looks inside: the .npmrc of a project in it and a gitdir's
// fsmonitor are moved aside. Before, the daemon (same uid, not root) skipped the folder
// silently. As root the folder is read anyway; the test then shows the findings only.
func TestScanUnreadableFolder(t *testing.T) {
	ws := newWS(t)
	s := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, "pkg/package.json"), `{"name":"pkg","version":"1.0.0"}`+"\n")
	npmrc := filepath.Join(ws, "pkg/.npmrc")
	mustWrite(t, npmrc, "script-shell=/tmp/pwned\n")
	gd := filepath.Join(ws, "hid/gd")
	mustWrite(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(gd, "objects"), 0o755)
	mustWrite(t, filepath.Join(gd, "config"), "[core]\n\tfsmonitor = /tmp/pwned\n")
	for _, d := range []string{"pkg", "hid"} {
		if err := os.Chmod(filepath.Join(ws, d), 0o311); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.ReadDir(filepath.Join(ws, "pkg")); os.Geteuid() != 0 && err == nil {
		t.Fatal("the 0311 folder can be listed: the test would prove nothing")
	}
	moved := map[string]bool{}
	for _, tr := range s.VerifyExec() {
		moved[tr.Path] = strings.Contains(tr.Detail, "moved aside to")
		if tr.Path == ws {
			t.Errorf("scan incomplete: %+v", tr)
		}
	}
	for _, p := range []string{npmrc, filepath.Join(gd, "config")} {
		if !moved[p] {
			t.Errorf("%s (in a 0311 folder) not moved aside: %v", p, moved)
		}
	}
}

// TestSelfHidingGitignoreMovedAside guards review 12's F5: a .gitignore that ignores itself,
// new or changed while a box runs, hid itself and the box's files beside it from the host's git
// status, add and clean. It is moved aside, and the host's git lists them again. One that was
// there before, or that keeps itself visible ("*" then "!.gitignore"), stays. Review 13's F5
// and F7: "[!x]gitignore" (a negated class to git), "*" after a byte order mark (which git
// skips) and "*" after 1.2 MB of comments (past what the scan read) hid themselves as well;
// without the fix they stay and the host's git status lists none of their folders' files.
func TestSelfHidingGitignoreMovedAside(t *testing.T) {
	for pats, want := range map[string]bool{
		"*\n": true, "/*\n": true, "**\n": true, "**/.gitignore\n": true, ".git*\n": true, "*ignore  \n": true,
		"*\n!.gitignore\n": false, "*\n!/.gitignore\n": false, "build/\n": false, "*/\n": false, "a/*\n": false,
		"# *\n": false, "!*\n": false, "*.o\n": false, "": false,
		"[!x]gitignore\nzz*\n": true, "\xef\xbb\xbf*\n": true, "[^x]gitignore\n": true, "\\.gitignore\n": true,
	} {
		if got := ignoresItself([]byte(pats)); got != want {
			t.Errorf("ignoresItself(%q) = %v, want %v", pats, got, want)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	gitIn(ws, "", false, "init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "keep/.gitignore"), "*\n!.gitignore\n")
	mustWrite(t, filepath.Join(ws, "old/.gitignore"), "*\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	plants := map[string]string{
		"pkg":   "*\n",
		"class": "[!x]gitignore\nzz*\n",
		"bom":   "\xef\xbb\xbf*\n",
		"big":   strings.Repeat("# padding\n", 120000) + "*\n",
	}
	for dir, pats := range plants {
		mustWrite(t, filepath.Join(ws, dir, ".gitignore"), pats)
		mustWrite(t, filepath.Join(ws, dir, "zz_helper.go"), "package pkg\n")
	}
	mustWrite(t, filepath.Join(ws, "other/.gitignore"), "build/\n")
	if out := gitIn(ws, "", false, "status", "--porcelain", "--untracked-files=all"); strings.Contains(out, "zz_helper.go") {
		t.Fatalf("the self-hiding .gitignore files do not hide their folders here:\n%s", out)
	}
	moved := map[string]string{}
	for _, tr := range s.VerifyExec() {
		if (tr.Kind == Created || tr.Kind == Modified) && strings.Contains(tr.Detail, "moved aside to") {
			moved[tr.Path] = tr.Detail
		}
	}
	out := gitIn(ws, "", false, "status", "--porcelain", "--untracked-files=all")
	for dir := range plants {
		p := filepath.Join(ws, dir, ".gitignore")
		if _, ok := moved[p]; !ok {
			t.Errorf("%s not moved aside", p)
		}
		if !strings.Contains(out, dir+"/zz_helper.go") {
			t.Errorf("the host's git status still hides %s/zz_helper.go:\n%s", dir, out)
		}
	}
	if d := moved[filepath.Join(ws, "big/.gitignore")]; !strings.Contains(d, "too large to check") {
		t.Errorf("the 1.2 MB .gitignore's finding does not say why: %q", d)
	}
	for _, kept := range []string{"keep/.gitignore", "old/.gitignore", "other/.gitignore"} {
		if _, err := os.Stat(filepath.Join(ws, kept)); err != nil {
			t.Errorf("%s was moved: %v", kept, err)
		}
	}
}

// TestScanPassesOverRecordedMoves (review 16, F1 in the scans): the scans pass over what the
// launch's checks moved aside by their record (State.Aside), not by its name. A box's plugin
// in a nested .opencode/plugin/ is moved aside to x.js.agentbox-quarantined-1, a name any file
// of that folder could have: the next scan passes over it (no second move, no second alert)
// until it is written again, when it is moved aside once more. A file the box names so itself
// is moved aside as any other.
func TestScanPassesOverRecordedMoves(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "app", ".opencode", "opencode.json"), "{}\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	p := filepath.Join(ws, "app", ".opencode", "plugin", "x.js")
	mustWrite(t, p, "export const X = async () => {}\n")
	movedAside(t, s, p)
	aside := AsidePath(p, 1)
	if _, ok := s.Aside[aside]; !ok {
		t.Fatalf("the move of %s is not recorded: %v", p, s.Aside)
	}
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Errorf("the scan after the move reports %+v, want nothing (the move is recorded)", ts)
	}
	// Written again after the move: its ctime is newer than the record's.
	if err := os.WriteFile(aside, []byte("export const Y = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	movedAside(t, s, aside)
	named := filepath.Join(ws, "app", ".opencode", "plugin", "y"+QuarantineSuffix+"1.js")
	mustWrite(t, named, "export const Y = async () => {}\n")
	movedAside(t, s, named)
}

// TestResolveLinkedWorktrees: the git directory of a linked worktree whose folder lies outside
// the workspace is pinned whole, one inside it is not (the box works there), whether its gitdir
// file is absolute or relative (worktree.useRelativePaths, which git 2.48 writes); the host's
// worktrees outside the workspace, whose .git file names their git directory back, are taken
// before 70 folders a box made in worktrees/, which pushed them past the bound of git
// directories; a gitdir naming a FIFO for .git is read without blocking (taken for no worktree
// of git's).
func TestResolveLinkedWorktrees(t *testing.T) {
	ws := t.TempDir()
	out := t.TempDir()
	gd := filepath.Join(ws, ".git")
	mustWrite(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(gd, "config"), "[core]\n\trepositoryformatversion = 0\n")
	worktree := func(id, dotGit, gitdir, back string) {
		t.Helper()
		admin := filepath.Join(gd, "worktrees", id)
		mustWrite(t, filepath.Join(admin, "HEAD"), "ref: refs/heads/"+id+"\n")
		mustWrite(t, filepath.Join(admin, "commondir"), "../..\n")
		mustWrite(t, filepath.Join(admin, "gitdir"), gitdir+"\n")
		if back != "" {
			mustWrite(t, dotGit, "gitdir: "+back+"\n")
		}
	}
	// Decoys first in the listing (names sorted before the real ones).
	for i := range 70 {
		if err := os.MkdirAll(filepath.Join(gd, "worktrees", fmt.Sprintf("0%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	worktree("outabs", filepath.Join(out, "a", ".git"), filepath.Join(out, "a", ".git"), filepath.Join(gd, "worktrees", "outabs"))
	rel, _ := filepath.Rel(filepath.Join(gd, "worktrees", "outrel"), filepath.Join(out, "b", ".git"))
	backRel, _ := filepath.Rel(filepath.Join(out, "b"), filepath.Join(gd, "worktrees", "outrel"))
	worktree("outrel", filepath.Join(out, "b", ".git"), rel, backRel)
	worktree("inside", filepath.Join(ws, ".worktrees", "in", ".git"), filepath.Join(ws, ".worktrees", "in", ".git"), filepath.Join(gd, "worktrees", "inside"))
	fifo := filepath.Join(out, "f", ".git")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	worktree("zfifo", fifo, fifo, "")

	lay, err := Resolve(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned := pinnedRels(lay)
	// A worktree inside the workspace ranks with the box's folders (a box can make any number of
	// them, each with a .git file naming its git directory back): past the bound here.
	for _, want := range []string{".git/worktrees/outabs", ".git/worktrees/outrel", ".git/worktrees/outabs/commondir", ".git/worktrees/outrel/commondir"} {
		if !pinned[want] {
			t.Errorf("%s is not pinned (the host's worktrees come before the box's folders); notes: %q", want, lay.Notes)
		}
	}
	if pinned[".git/worktrees/inside"] {
		t.Error("the git directory of a worktree inside the workspace is pinned whole: the box's git there could not work")
	}
	if len(lay.Notes) == 0 {
		t.Error("no note that the bound of git directories was reached (70 folders)")
	}
}

// TestScanRecordsRedirectedCommondir: the scan records a linked worktree's commondir when it
// leads anywhere but the repository the worktree's git directory lies in (a box's bare clone
// beside, TestAttackNestedWorktreeCommondir's plant), so that a new or changed one is moved
// aside; one that leads to its own repository (git worktree add's "../..", absolute or
// relative) is not recorded, so that a worktree a box adds is left alone.
func TestScanRecordsRedirectedCommondir(t *testing.T) {
	ws := t.TempDir()
	gd := filepath.Join(ws, "lib", ".git")
	mustWrite(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(gd, "config"), "[core]\n\trepositoryformatversion = 0\n")
	mustWrite(t, filepath.Join(gd, "ev", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(gd, "ev", "config"), "[core]\n\tbare = true\n")
	admin := filepath.Join(gd, "worktrees", "w")
	mustWrite(t, filepath.Join(admin, "HEAD"), "ref: refs/heads/w\n")
	mustWrite(t, filepath.Join(admin, "gitdir"), filepath.Join(t.TempDir(), ".git")+"\n")
	cf := filepath.Join(admin, "commondir")
	for _, c := range []struct {
		commondir string
		recorded  bool
	}{
		{"../..\n", false},
		{gd + "\n", false},
		{filepath.Join(gd, "ev") + "\n", true},
		{"../../ev\n", true},
	} {
		mustWrite(t, cf, c.commondir)
		found, _ := scanWorkspace(ws, passOver{}, nil, Limits{}, nil, &gitRepos{})
		if _, ok := found[cf]; ok != c.recorded {
			t.Errorf("commondir %q: recorded %v, want %v (%q)", c.commondir, ok, c.recorded, found[cf])
		}
	}
}
