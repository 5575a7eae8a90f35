package integrity

import (
	"bufio"
	"bytes"
	"sort"
	"strings"
)

// Git's execution surface, as data: what in a repository makes the host's git run a program
// (or read configuration or hooks that do) when the user's ordinary git enters it. The tables
// below are what the resolver pins and what the workspace scan looks for; docs/integrity.md
// ("Git's execution surface") lists them with how each is covered, and every entry has a test
// (TestGitProgramKeys, TestGitProgramKeysRunByGit, TestGitSurfaceFiles).

// GitDirConfigFiles are the configuration files git reads from a git directory (the
// repository's config, and config.worktree with extensions.worktreeConfig).
var GitDirConfigFiles = []string{"config", "config.worktree"}

// GitSurfaceFile is one file or folder of a repository that git reads and that can make it
// run a program.
type GitSurfaceFile struct {
	// Path is where it lies: relative to the workspace, or to a git directory (GITDIR/…).
	Path string
	// Reads says what git does with it.
	Reads string
	// Cover says how agentbox keeps a box from changing what the host's git runs through it.
	Cover string
}

// The ways a GitSurfaceFile is covered.
const (
	// CoverPinned: bound read-only in every box (guarded while absent: what a box writes there is moved into its proposed changes).
	CoverPinned = "pinned"
	// CoverPinnedPresent: bound read-only in every box when present at launch.
	CoverPinnedPresent = "pinned when present"
	// CoverMovedAside: found by the workspace scan; one a box created or changed is moved
	// aside (path.agentbox-quarantined-N) when the watch sees it, at the latest at exit.
	CoverMovedAside = "moved aside when new or changed"
)

// GitSurfaceFiles are the files and folders of git's execution surface in a workspace.
var GitSurfaceFiles = []GitSurfaceFile{
	{"GITDIR/config", "the repository's configuration (GitProgramKeys)", CoverPinned},
	{"GITDIR/config.worktree", "per-worktree configuration (extensions.worktreeConfig)", CoverPinned},
	{"GITDIR/hooks/", "hooks, run by commit, merge, checkout, push, rebase, am, …", CoverPinned},
	{"GITDIR/commondir", "where the common dir (its config and hooks) is", CoverPinned},
	{"GITDIR/info/attributes", "attributes that select filter, diff and merge drivers", CoverPinned},
	{"include.path, includeIf.*.path targets", "more configuration, read as if it were in the including file", CoverPinned},
	{"core.hooksPath folder", "the hooks, instead of GITDIR/hooks (husky: .husky/_ runs .husky/<hook>); from the repository's or the user's configuration", CoverPinned},
	{".git (a file)", "gitdir: the git directory of a worktree or submodule", CoverPinned},
	{".gitmodules", "submodule names, paths and update commands", CoverPinned},
	{"GITDIR/modules/**/ (submodule gitdirs, any depth)", "each submodule's git directory: all of GITDIR/ above", CoverPinned},
	{"SUBMODULE/.git (a file)", "the submodule's gitdir pointer", CoverPinnedPresent},
	{"GITDIR/worktrees/*/commondir, gitdir, config.worktree", "a linked worktree's common dir, its back pointer and its configuration", CoverPinned},
	{"nested repositories: DIR/.git (folder, file or symlink), bare repositories", "their config files, common dir and hooks (git status at the top enters gitlinks)", CoverMovedAside},
	{"symlinked config files and .git entries", "git follows them", CoverMovedAside},
}

// GitValue says which values of a GitProgramKey make git run something.
type GitValue int

const (
	// ValueAny: any non-empty value names a program (or a file or folder git loads).
	ValueAny GitValue = iota
	// ValueNotFalse: any value but a false boolean (core.fsmonitor = true runs git's own
	// daemon; a path runs the program).
	ValueNotFalse
	// ValueNotBool: a value that is not a boolean (pager.<cmd> = true only turns paging on).
	ValueNotBool
	// ValueBang: a value starting with "!" is a shell command (alias.*, submodule.*.update).
	ValueBang
	// ValueNotNever: any value but "never" (protocol.ext.allow lets ext:: URLs run commands).
	ValueNotNever
	// ValueAlways: the value "always" (protocol.allow = always lets ext:: URLs run commands).
	ValueAlways
	// ValuePath: a value that is a path ("/…" or "~…"), not a host name (sendemail.smtpServer).
	ValuePath
)

// GitProgramKey is one configuration key whose value makes git run a program, or load more
// configuration or hooks (git-config(1)).
type GitProgramKey struct {
	// Name is the key, lower-cased, with "*" for any subsection ("diff.*.textconv") or, as
	// the last part of a two-part name, for any variable ("pager.*", "alias.*").
	Name  string
	Value GitValue
	// Runs says what git runs, and which of the user's git commands run it.
	Runs string
}

// GitProgramKeys are the keys that name a program, from git-config(1) (git 2.39 to 2.5x).
var GitProgramKeys = []GitProgramKey{
	{"core.fsmonitor", ValueNotFalse, "the fsmonitor hook, on every index refresh (status, diff, add, commit)"},
	{"core.hookspath", ValueAny, "the hooks folder: every hook (commit, checkout, merge, push, …)"},
	{"core.sshcommand", ValueAny, "the ssh command of fetch, pull, push, clone"},
	{"core.editor", ValueAny, "the editor of commit, rebase -i, tag -a, config --edit"},
	{"core.pager", ValueAny, "the pager of log, diff, show, … on a terminal"},
	{"core.askpass", ValueAny, "the password prompt program"},
	{"core.gitproxy", ValueAny, "the proxy command of git:// fetches"},
	{"core.alternaterefscommand", ValueAny, "the command that lists an alternate's refs (fetch, push)"},
	{"sequence.editor", ValueAny, "the editor of rebase -i's todo list"},
	{"pager.*", ValueNotBool, "the pager of that command on a terminal"},
	{"diff.external", ValueAny, "the external diff program of diff, log -p, show"},
	{"diff.*.command", ValueAny, "a diff driver's program (diff with .gitattributes diff=)"},
	{"diff.*.textconv", ValueAny, "a diff driver's text conversion (diff, log -p, blame)"},
	{"difftool.*.cmd", ValueAny, "the command of git difftool"},
	{"difftool.*.path", ValueAny, "the program of git difftool"},
	{"mergetool.*.cmd", ValueAny, "the command of git mergetool"},
	{"mergetool.*.path", ValueAny, "the program of git mergetool"},
	{"merge.*.driver", ValueAny, "a merge driver (merge, rebase, cherry-pick with .gitattributes merge=)"},
	{"filter.*.clean", ValueAny, "a filter's clean command (add, status, diff with .gitattributes filter=)"},
	{"filter.*.smudge", ValueAny, "a filter's smudge command (checkout, switch, reset)"},
	{"filter.*.process", ValueAny, "a long-running filter process (add, checkout, status)"},
	{"credential.helper", ValueAny, "a credential helper (fetch, push over https)"},
	{"credential.*.helper", ValueAny, "a credential helper for matching URLs"},
	{"gpg.program", ValueAny, "the signing program (commit -S, commit.gpgSign, tag -s, verify, log --show-signature)"},
	{"gpg.*.program", ValueAny, "the signing program of a format (openpgp, x509, ssh)"},
	{"gpg.ssh.defaultkeycommand", ValueAny, "the command that picks the ssh signing key"},
	{"remote.*.uploadpack", ValueAny, "the upload-pack command of fetch from that remote (run locally for a path remote)"},
	{"remote.*.receivepack", ValueAny, "the receive-pack command of push to that remote (run locally for a path remote)"},
	{"submodule.*.update", ValueBang, "a command run by git submodule update"},
	{"interactive.difffilter", ValueAny, "the filter of add -p, checkout -p, reset -p"},
	{"uploadpack.packobjectshook", ValueAny, "the pack-objects hook of upload-pack (read from protected configuration only)"},
	{"alias.*", ValueBang, "a shell alias"},
	{"include.path", ValueAny, "another configuration file, read as if it were here"},
	{"includeif.*.path", ValueAny, "another configuration file, read when the condition holds"},
	{"init.templatedir", ValueAny, "the template folder whose hooks git init copies"},
	{"browser.*.cmd", ValueAny, "the browser of git help --web, git web--browse"},
	{"browser.*.path", ValueAny, "the browser program of git help --web"},
	{"man.*.cmd", ValueAny, "the man viewer of git help"},
	{"man.*.path", ValueAny, "the man viewer program of git help"},
	{"guitool.*.cmd", ValueAny, "a git gui tool"},
	{"instaweb.httpd", ValueAny, "the web server of git instaweb"},
	{"tar.*.command", ValueAny, "an archive compressor of git archive"},
	{"imap.tunnel", ValueAny, "the tunnel command of git imap-send"},
	{"sendemail.sendmailcmd", ValueAny, "the sendmail command of git send-email"},
	{"sendemail.*.sendmailcmd", ValueAny, "the sendmail command of a send-email identity"},
	{"sendemail.smtpserver", ValuePath, "a sendmail program of git send-email (when a path)"},
	{"sendemail.*.smtpserver", ValuePath, "a sendmail program of a send-email identity (when a path)"},
	{"sendemail.tocmd", ValueAny, "the command that adds recipients in git send-email"},
	{"sendemail.cccmd", ValueAny, "the command that adds Cc recipients in git send-email"},
	{"sendemail.headercmd", ValueAny, "the command that adds headers in git send-email"},
	{"protocol.ext.allow", ValueNotNever, "ext:: URLs, which run a command (fetch, push, clone)"},
	{"protocol.allow", ValueAlways, "every transport, ext:: (a command) included"},
	{"hook.*.command", ValueAny, "a configured hook (git 2.5x config-based hooks)"},
}

// match reports whether section.sub.key (section and key lower-cased, sub as written) is k's
// name.
func (k GitProgramKey) match(section, sub, key string) bool {
	parts := strings.Split(k.Name, ".")
	switch len(parts) {
	case 2:
		return sub == "" && parts[0] == section && (parts[1] == "*" || parts[1] == key)
	case 3:
		return sub != "" && parts[0] == section && parts[2] == key && (parts[1] == "*" || parts[1] == strings.ToLower(sub))
	}
	return false
}

// runs reports whether val makes git run what k names.
func (k GitProgramKey) runs(val string) bool {
	switch k.Value {
	case ValueNotFalse:
		return !isFalse(val)
	case ValueNotBool:
		return val != "" && !isBool(val)
	case ValueBang:
		return strings.HasPrefix(val, "!")
	case ValueNotNever:
		return val != "" && strings.ToLower(val) != "never"
	case ValueAlways:
		return strings.ToLower(val) == "always"
	case ValuePath:
		return strings.HasPrefix(val, "/") || strings.HasPrefix(val, "~")
	}
	return val != ""
}

func isFalse(v string) bool {
	switch strings.ToLower(v) {
	case "", "false", "no", "off", "0":
		return true
	}
	return false
}

func isBool(v string) bool {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		return true
	}
	return isFalse(v)
}

// ConfigEntry is one variable of a git config file's text.
type ConfigEntry struct {
	// Section and Key are lower-cased; Sub is the subsection as written ("" when none).
	Section, Sub, Key string
	// Value is the value without surrounding quotes; a bare key is "true".
	Value string
}

// Name is the entry's full key, as ExecKeys reports it.
func (e ConfigEntry) Name() string {
	if e.Sub != "" {
		return e.Section + "." + e.Sub + "." + e.Key
	}
	return e.Section + "." + e.Key
}

// ParseConfig reads the variables of a git config file's text as git does for what matters
// here: a UTF-8 byte order mark before the first line is skipped, section and variable names
// are case-insensitive, "[section.sub]" is the old spelling of [section "sub"], a variable may
// follow its section header on the same line, and a bare variable is a true boolean.
func ParseConfig(text []byte) []ConfigEntry {
	text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
	var out []ConfigEntry
	section, sub := "", ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				continue
			}
			hdr := line[1:end]
			rest := strings.TrimSpace(line[end+1:])
			if name, q, ok := strings.Cut(hdr, " "); ok {
				section, sub = strings.ToLower(strings.TrimSpace(name)), strings.Trim(strings.TrimSpace(q), `"`)
			} else if name, s, ok := strings.Cut(hdr, "."); ok {
				section, sub = strings.ToLower(name), strings.ToLower(s)
			} else {
				section, sub = strings.ToLower(hdr), ""
			}
			if rest == "" || rest[0] == '#' || rest[0] == ';' {
				continue
			}
			line = rest // "[core] fsmonitor = x" on one line
		}
		key, val, hasVal := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		val = configValue(val)
		if !hasVal {
			val = "true"
		}
		out = append(out, ConfigEntry{Section: section, Sub: sub, Key: key, Value: val})
	}
	return out
}

// configValue returns a value as git reads it: a comment ("#" or ";" outside quotes) ends it,
// quotes are dropped, \" and \\ are the characters, and surrounding blanks go.
func configValue(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v) && (v[i+1] == '"' || v[i+1] == '\\'):
			i++
			b.WriteByte(v[i])
		case (c == '#' || c == ';') && !quoted:
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// ExecKeys returns the keys of a git config file's text that make git run a program, or load
// more configuration or hooks (GitProgramKeys), when the user's git uses the repository; an
// alias or submodule update that runs a shell command is marked " (!)". The result is sorted
// and de-duplicated.
func ExecKeys(text []byte) []string {
	seen := map[string]bool{}
	for _, e := range ParseConfig(text) {
		for _, k := range GitProgramKeys {
			if k.match(e.Section, e.Sub, e.Key) && k.runs(e.Value) {
				name := e.Name()
				if k.Value == ValueBang {
					name += " (!)"
				}
				seen[name] = true
				break
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lastValue returns the last value of key (section.key, no subsection) in entries: git's
// single-valued variables take the last one.
func lastValue(entries []ConfigEntry, section, key string) string {
	v := ""
	for _, e := range entries {
		if e.Section == section && e.Sub == "" && e.Key == key {
			v = e.Value
		}
	}
	return v
}

// includePaths returns the include.path and includeIf.*.path values of entries, whatever
// the condition (the condition may hold on the host).
func includePaths(entries []ConfigEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Key == "path" && e.Value != "" && (e.Section == "include" && e.Sub == "" || e.Section == "includeif" && e.Sub != "") {
			out = append(out, e.Value)
		}
	}
	return out
}
