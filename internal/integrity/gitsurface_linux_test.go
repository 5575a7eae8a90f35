package integrity

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
				if got := ExecKeys([]byte(text)); len(got) != 1 {
					t.Errorf("ExecKeys(%q) = %v, want the key", text, got)
				}
			}
			if vals[1] != "" || k.Value == ValueAny {
				text := exampleConfig(k.Name, vals[1], func(s string) string { return s })
				if got := ExecKeys([]byte(text)); len(got) != 0 {
					t.Errorf("ExecKeys(%q) = %v, want nothing", text, got)
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
				for i := range p {
					p[i] = subst.Replace(p[i])
				}
				gitIn(ws, "", false, p...)
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
			for _, e := range ParseConfig([]byte(cfg)) {
				if k.match(e.Section, e.Sub, e.Key) {
					want = e.Name()
				}
			}
			got := strings.Join(ExecKeys([]byte(cfg)), ",")
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
	if err != nil {
		return string(out) + "\n(" + err.Error() + ")"
	}
	return string(out)
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
func movedAside(t *testing.T, s *State, path string) {
	t.Helper()
	for _, tr := range s.VerifyExec() {
		if tr.Path == path && (tr.Kind == Created || tr.Kind == Modified) && strings.Contains(tr.Detail, "moved aside to") {
			if _, err := os.Lstat(path); err == nil {
				t.Errorf("%s still there after the move aside", path)
			}
			if _, err := os.Lstat(path + QuarantineSuffix + "1"); err != nil {
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
		// Submodule and worktree gitdirs beneath the workspace's own .git, beyond what is pinned.
		mustWrite(t, filepath.Join(ws, ".git/modules/late/HEAD"), "0\n")
		mustWrite(t, filepath.Join(ws, ".git/modules/late/hooks/post-checkout"), "evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/modules/late/hooks/post-checkout"))
		mustWrite(t, filepath.Join(ws, ".git/worktrees/new/config.worktree"), "[core]\n\tpager = evil\n")
		movedAside(t, s, filepath.Join(ws, ".git/worktrees/new/config.worktree"))
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
			rel := filepath.Join("pkg", f.Dir, name)
			ws := newWS(t)
			mustWrite(t, filepath.Join(ws, "old", f.Dir, name), "{}\n")
			top := filepath.Join(ws, f.Dir, name)
			mustWrite(t, top, "{}\n")
			s := Snapshot(resolveWS(t, ws), Limits{})
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
