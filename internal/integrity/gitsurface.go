package integrity

import (
	"fmt"
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
	// aside (FOLDER/.agentbox-quarantined-N/NAME) when the watch sees it, at the latest at exit.
	CoverMovedAside = "moved aside when new or changed"
	// CoverStripped: found by the workspace scan; the lines a box added are removed from the
	// file (under git's own lock), the rest of it kept.
	CoverStripped = "lines a box added removed"
)

// GitSurfaceFiles are the files and folders of git's execution surface in a workspace.
var GitSurfaceFiles = []GitSurfaceFile{
	{"GITDIR/config", "the repository's configuration (GitProgramKeys)", CoverPinned},
	{"GITDIR/config.worktree", "per-worktree configuration (extensions.worktreeConfig)", CoverPinned},
	{"GITDIR/hooks/", "hooks, run by commit, merge, checkout, push, rebase, am, …", CoverPinned},
	{"GITDIR/commondir", "where the common dir (its config and hooks) is", CoverPinned},
	{"GITDIR/info/attributes", "attributes that select filter, diff and merge drivers", CoverPinned},
	{"GITDIR/refs/replace/", "replace refs: another object wherever git reads an id (checkout, show, archive, worktree add), while diff stays empty", CoverPinned},
	{"GITDIR/packed-refs (refs/replace/ lines)", "packed replace refs, as above (git pack-refs, or written by hand)", CoverStripped},
	{"GITDIR/info/grafts", "grafts: another history for a commit (deprecated, still read)", CoverPinned},
	{"GITDIR/objects/info/alternates, http-alternates", "other object stores git reads the objects it lacks from (checkout, show, archive, clone give what they hold for an id, while diff stays empty)", CoverPinned},
	{"GITDIR/info/exclude", "ignore patterns: files hidden from status, add and clean", CoverPinned},
	{"include.path, includeIf.*.path targets", "more configuration, read as if it were in the including file", CoverPinned},
	{"core.hooksPath folder", "the hooks, instead of GITDIR/hooks (husky: .husky/_ runs .husky/<hook>); from the repository's or the user's configuration, a relative one in each work tree git runs in: the top, linked worktrees and submodules beneath it", CoverPinned},
	{"a nested repository's core.hooksPath folder", "the hooks of the host's git in that repository", CoverMovedAside},
	{".git (a file)", "gitdir: the git directory of a worktree or submodule", CoverPinned},
	{".gitmodules", "submodule names, paths and update commands", CoverPinned},
	{"GITDIR/modules/**/ (submodule gitdirs, any depth)", "each submodule's git directory: all of GITDIR/ above", CoverPinned},
	{"a git directory a box makes (GITDIR/modules/NAME of git submodule update --init, a nested repository's): its hooks folder as a symlink, its replace refs", "not pinned (it was not there at launch): git runs the hooks where the folder leads, and takes the replaced objects (git submodule update --init on the host uses the box's clone); its config, hooks and objects as for any git directory the scan finds", CoverMovedAside},
	{"symlinks in GITDIR/modules/ (modules itself, or a folder on the way to a gitdir)", "git follows them: git submodule update --init takes the gitdir one leads to (its config, hooks and objects) for the submodule's", CoverMovedAside},
	{"SUBMODULE/.git (a file)", "the submodule's gitdir pointer", CoverPinnedPresent},
	{"GITDIR/rebase-merge/git-rebase-todo, GITDIR/sequencer/todo (with exec lines)", "a stopped rebase's todo list: git rebase --continue runs its exec lines, of which git status shows none past the next two commands", CoverMovedAside},
	{"GITDIR/rr-cache/*", "conflict resolutions git rerere recorded: the next merge or rebase with rerere.enabled writes one as its own resolution", CoverMovedAside},
	{"GITDIR/worktrees/*/commondir, gitdir, config.worktree", "a linked worktree's common dir, its back pointer and its configuration", CoverPinned},
	{"nested repositories: DIR/.git (folder, file or symlink), bare repositories", "their config files, common dir and hooks (git status at the top enters gitlinks)", CoverMovedAside},
	{"symlinked config files and .git entries", "git follows them", CoverMovedAside},
	{"GitPathKeys (core.worktree, core.excludesFile, core.attributesFile) leading out of the workspace", "a work tree whose gitlinks git status enters, ignore and attributes files, where the scan does not read", CoverMovedAside},
	{"the user's configuration: include targets, init.templateDir, core.excludesFile, core.attributesFile, core.hooksPath beneath the workspace", "more of the user's configuration (for every repository its condition matches), the hooks git init and clone copy, ignore patterns, attributes, hooks", CoverPinned},
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
	{"trailer.*.command", ValueAny, "a trailer's command (commit --trailer, interpret-trailers)"},
	{"trailer.*.cmd", ValueAny, "a trailer's command (commit --trailer, interpret-trailers)"},
}

// GitPathKey is one configuration key whose value is a path from which git reads what the scan
// would have to read too: the work tree (and so the .git of the gitlinks in it), an ignore or
// attributes file.
type GitPathKey struct {
	// Name is the key, lower-cased (section.key, no subsection).
	Name string
	// FromGitDir: a relative value is relative to the git directory (core.worktree), else to
	// the work tree's top.
	FromGitDir bool
	// Reads says what git reads there.
	Reads string
}

// GitPathKeys are the path-valued keys of a repository's configuration that can lead git out
// of the workspace: a value that does counts as a finding, like a .git pointer leading out.
// core.worktree in the box cache (which boxes write, which persists and has the same path on
// the host) made the host's git status enter a gitlink there whose gitdir's core.fsmonitor ran
// (review 14, F16).
var GitPathKeys = []GitPathKey{
	{"core.worktree", true, "the work tree: git status enters the gitlinks there and reads their .git"},
	{"core.excludesfile", false, "ignore patterns: files hidden from status, add and clean"},
	{"core.attributesfile", false, "attributes that select filter, diff and merge drivers"},
}

// match reports whether the entry e is k's name: its section and key, and its subsection (any,
// for "*"; an empty one, [diff ""], counts as one, as git's parse_config_key takes it).
func (k GitProgramKey) match(e ConfigEntry) bool {
	parts := strings.Split(k.Name, ".")
	switch len(parts) {
	case 2:
		return !e.HasSub && parts[0] == e.Section && (parts[1] == "*" || parts[1] == e.Key)
	case 3:
		return e.HasSub && parts[0] == e.Section && parts[2] == e.Key && (parts[1] == "*" || parts[1] == strings.ToLower(e.Sub))
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
	// Section and Key are lower-cased; Sub is the subsection as written ("" when none),
	// lower-cased in the old spelling [section.sub]. They are git's name of the variable cut
	// at its first and last dot, as git's parse_config_key cuts it.
	Section, Sub, Key string
	// HasSub reports whether the name has a subsection (an empty one too: [diff ""]).
	HasSub bool
	// Value is the value as git reads it (quotes dropped, escapes read, a comment cut off);
	// a bare key is "true".
	Value string
	// name is git's full name of the variable, which Name returns.
	name string
}

// Name is the entry's full key, as git config --list prints it and ExecKeys reports it.
func (e ConfigEntry) Name() string {
	if e.name != "" {
		return e.name
	}
	if e.HasSub {
		return e.Section + "." + e.Sub + "." + e.Key
	}
	return e.Section + "." + e.Key
}

// newConfigEntry cuts git's full name of a variable as parse_config_key does. git hands the
// name on as a C string: a NUL byte (in a quoted subsection) ends it.
func newConfigEntry(name, value string) ConfigEntry {
	name = cString(name)
	e := ConfigEntry{Value: value, name: name}
	first, last := strings.IndexByte(name, '.'), strings.LastIndexByte(name, '.')
	switch {
	case first < 0:
		e.Key = name
	case first == last:
		e.Section, e.Key = name[:first], name[last+1:]
	default:
		e.Section, e.Sub, e.Key, e.HasSub = name[:first], name[first+1:last], name[last+1:], true
	}
	return e
}

// cString is s up to its first NUL byte.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// ParseConfig reads the variables of a git config file's text as git's own tokenizer does
// (config.c, git_parse_source, followed character by character): a UTF-8 byte order mark at
// the start is skipped (a partial one is an error), "\r\n" is a line end, "#" and ";" start a
// comment outside a value's quotes, a section header ends at the first "]" after its name or
// its quoted subsection (whose "\" escapes the next character), "[section.sub]" is the old
// spelling of [section "sub"] (lower-cased), section and variable names are case-insensitive,
// a variable may follow its header on the same line, a value may be quoted in parts, "\"
// escapes \, ", t, n and b and a line end (a continuation line), and a bare variable is a true
// boolean. Where git stops with "bad config line", ParseConfig returns the entries before it
// and an error naming the line: git reads none of that file's variables then (it refuses the
// repository), but a scan that cannot follow the text must not take it for harmless.
func ParseConfig(text []byte) ([]ConfigEntry, error) {
	p := &configParser{b: text, line: 1}
	var out []ConfigEntry
	const bom = "\xef\xbb\xbf"
	switch n := commonPrefix(text, bom); {
	case n == len(bom):
		p.i = n
	case n > 0:
		return nil, p.bad()
	}
	var name []byte
	baselen := 0
	comment := false
	for {
		c := p.next()
		switch {
		case c == '\n':
			if p.eof {
				return out, nil
			}
			comment = false
			continue
		case comment || isConfigSpace(c):
			continue
		case c == '#' || c == ';':
			comment = true
			continue
		case c == '[':
			name = name[:0]
			if !p.baseVar(&name) || len(name) < 1 {
				return out, p.bad()
			}
			name = append(name, '.')
			baselen = len(name)
			continue
		case !isConfigAlpha(c):
			return out, p.bad()
		}
		name = append(name[:baselen], lower(c))
		value, ok := p.value(&name)
		if !ok {
			return out, p.bad()
		}
		out = append(out, newConfigEntry(string(name), value))
	}
}

// configParser is the state of ParseConfig over a file's bytes.
type configParser struct {
	b    []byte
	i    int
	line int
	eof  bool
}

// next returns the next character as git's get_next_char does: "\r\n" is "\n", and the end
// of the text is a "\n" with eof set.
func (p *configParser) next() byte {
	if p.i >= len(p.b) {
		p.eof = true
		return '\n'
	}
	c := p.b[p.i]
	p.i++
	if c == '\r' && p.i < len(p.b) && p.b[p.i] == '\n' {
		c = '\n'
		p.i++
	}
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *configParser) bad() error {
	return fmt.Errorf("bad config line %d (git refuses it)", p.line)
}

// baseVar reads a section header's name after "[" (git's get_base_var).
func (p *configParser) baseVar(name *[]byte) bool {
	for {
		c := p.next()
		switch {
		case p.eof:
			return false
		case c == ']':
			return true
		case isConfigSpace(c):
			return p.extendedBaseVar(name, c)
		case !isConfigKeyChar(c) && c != '.':
			return false
		}
		*name = append(*name, lower(c))
	}
}

// extendedBaseVar reads the quoted subsection of [section "sub"] and the "]" after it (git's
// get_extended_base_var).
func (p *configParser) extendedBaseVar(name *[]byte, c byte) bool {
	for {
		if c == '\n' {
			return false
		}
		if c = p.next(); !isConfigSpace(c) {
			break
		}
	}
	if c != '"' {
		return false
	}
	*name = append(*name, '.')
	for {
		c := p.next()
		if c == '\n' {
			return false
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c = p.next(); c == '\n' {
				return false
			}
		}
		*name = append(*name, c)
	}
	return p.next() == ']'
}

// value reads the rest of a variable's name and its value (git's get_value).
func (p *configParser) value(name *[]byte) (string, bool) {
	var c byte
	for {
		c = p.next()
		if p.eof || !isConfigKeyChar(c) {
			break
		}
		*name = append(*name, lower(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	if c == '\n' {
		return "true", true
	}
	if c != '=' {
		return "", false
	}
	return p.parseValue()
}

// parseValue reads a value after "=" up to its line's end (git 2.39's parse_value): blanks
// around it go and each one within it is a space, quotes are dropped, a comment outside them
// ends it, a quote left open or an unknown escape is an error. git hands it on as a C string.
func (p *configParser) parseValue() (string, bool) {
	var v []byte
	quote, comment, space := false, false, 0
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return "", false
			}
			return cString(string(v)), true
		}
		if comment {
			continue
		}
		if isConfigSpace(c) && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		if c == '\\' {
			switch c = p.next(); c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", false
			}
			v = append(v, c)
			continue
		}
		if c == '"' {
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}

// commonPrefix returns how many leading bytes b shares with s.
func commonPrefix(b []byte, s string) int {
	n := 0
	for n < len(b) && n < len(s) && b[n] == s[n] {
		n++
	}
	return n
}

// The character classes of git's own ctype (git-compat-util.h), ASCII only: a byte of 0x80
// or above is none of them, and \v and \f are no space.
func isConfigSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isConfigAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isConfigKeyChar(c byte) bool {
	return isConfigAlpha(c) || '0' <= c && c <= '9' || c == '-'
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ExecKeys returns the keys of a git config file's text that make git run a program, or load
// more configuration or hooks (GitProgramKeys), when the user's git uses the repository; an
// alias or submodule update that runs a shell command is marked " (!)". The result is sorted
// and de-duplicated. A text git would refuse (ParseConfig's error) gives the keys before the
// bad line and the error: the caller takes such a file for executable (checkConfig).
func ExecKeys(text []byte) ([]string, error) {
	entries, err := ParseConfig(text)
	return execKeys(entries), err
}

// execKeys returns the keys of entries that make git run a program (ExecKeys).
func execKeys(entries []ConfigEntry) []string {
	seen := map[string]bool{}
	for _, e := range entries {
		for _, k := range GitProgramKeys {
			if k.match(e) && k.runs(e.Value) {
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
		if e.Section == section && !e.HasSub && e.Key == key {
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
		if e.Key == "path" && e.Value != "" && (e.Section == "include" && !e.HasSub || e.Section == "includeif" && e.HasSub) {
			out = append(out, e.Value)
		}
	}
	return out
}
