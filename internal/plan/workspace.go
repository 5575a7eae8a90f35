package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrWorkspaceRefused is the class of CheckWorkspace's refusals (a *WorkspaceError).
var ErrWorkspaceRefused = errors.New("workspace refused")

// WorkspaceError is a refusal of CheckWorkspace; it unwraps to ErrWorkspaceRefused.
type WorkspaceError struct {
	Path string // the workspace refused
	Why  string // what is wrong with it, to follow the path ("is your home directory, …")
	Hint string // what to do instead
}

func (e *WorkspaceError) Error() string {
	return fmt.Sprintf("%s: %s %s; %s", ErrWorkspaceRefused, e.Path, e.Why, e.Hint)
}

func (e *WorkspaceError) Unwrap() error { return ErrWorkspaceRefused }

// HarnessHomes are directories under $HOME that hold agent harness state, credentials or
// configuration; no workspace may be inside them.
var HarnessHomes = []string{
	".claude", ".config", ".ssh", ".gnupg", ".aws", ".kube", ".docker", ".codex", ".gemini",
	".copilot", ".opencode", ".local/share/opencode", ".local/state", ".netrc", ".git-credentials",
}

// WorkspaceFacts are the host paths CheckWorkspace compares a workspace with.
type WorkspaceFacts struct {
	// Home is the home directory with its symlinks resolved (ResolveExisting), as the
	// workspace is: $HOME as written would miss every rule of the home where it is a symlink
	// (/home -> /var/home; review 17, F2).
	Home       string
	RuntimeDir string   // $XDG_RUNTIME_DIR (may be "")
	OwnDirs    []string // agentbox's own config, state and runtime directories
	// Harness are more home-relative harness directories (the program profiles' homes, see
	// profile.Set.HarnessHomes); HarnessHomes always apply.
	Harness []string
	// SystemDirs are the system folders bound read-only into every box; nil means
	// DefaultSystemDirs. OtherSystemDirs always apply.
	SystemDirs []string
	// Sockets are the paths of the host's bound pathname unix sockets (see HostSockets), with
	// their folders' symlinks resolved; nil means none is known.
	Sockets []string

	// harness are the harness homes beneath Home, resolved and as a refusal shows them, when
	// ResolveHarness made them for these facts; nil means CheckWorkspace resolves them at
	// every call.
	harness []harnessDir
}

// harnessDir is a harness home, symlink-resolved, and as a refusal names it.
type harnessDir struct{ dir, shown string }

// ResolveHarness returns f with its harness homes (HarnessHomes and Harness beneath Home)
// symlink-resolved once, for CheckWorkspace to compare with: a launch compares tens of folders
// with the same facts, and resolving them at each call cost ~0.14 ms (docs/benchmarks.md).
// Facts changed afterwards (Home, Harness) need a new call.
func (f WorkspaceFacts) ResolveHarness() WorkspaceFacts {
	f.harness = f.harnessDirs()
	return f
}

// harnessDirs resolves the harness homes beneath f.Home (nil without a home). A harness home
// may itself be a link (~/.config -> dotfiles/config): its target is what a box would reach.
func (f WorkspaceFacts) harnessDirs() []harnessDir {
	if f.Home == "" {
		return nil
	}
	home := filepath.Clean(f.Home)
	var out []harnessDir
	for _, h := range append(append([]string(nil), HarnessHomes...), f.Harness...) {
		d, shown := resolveShown(filepath.Join(home, h))
		out = append(out, harnessDir{d, shown})
	}
	return out
}

// OtherSystemDirs are host folders that are no workspace although no box binds them: the
// kernel's and the system's own (a workspace is bound read-write, and as root it would be
// the host's).
var OtherSystemDirs = []string{"/boot", "/dev", "/proc", "/run", "/sys", "/var"}

// SharedTempDirs are folders every program on the host shares, where they keep their
// sockets (tmux, ssh-agent, X11, language servers): never a workspace themselves, though a
// project folder beneath them can be.
var SharedTempDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// CheckWorkspace reports why ws (absolute, symlink-resolved) must not be a workspace, or nil.
// A workspace is bound read-write into the box, so it must not expose what the box hides.
func CheckWorkspace(ws string, f WorkspaceFacts) error {
	ws = filepath.Clean(ws)
	refuse := func(why, what string) error {
		return &WorkspaceError{Path: ws, Why: why, Hint: what}
	}
	if !filepath.IsAbs(ws) {
		return refuse("is not an absolute path", "pass an absolute --workspace")
	}
	if ws == "/" {
		return refuse("is the root directory", "run agentbox from a project directory, or pass --workspace DIR")
	}
	for _, d := range SharedTempDirs {
		if ws == d {
			return refuse("is a temporary folder every program shares, where host programs keep their sockets (tmux, ssh-agent)",
				"make a project folder (mkdir "+d+"/myproject) and use that")
		}
	}
	sys := f.SystemDirs
	if sys == nil {
		sys = DefaultSystemDirs
	}
	for _, d := range append(append([]string(nil), sys...), OtherSystemDirs...) {
		if (ws == d || Within(ws, d)) && !Within(ws, "/var/tmp") && !Within(ws, "/dev/shm") {
			return refuse("is a system folder (under "+d+")", "work on a project directory in your home or under /tmp")
		}
	}
	for _, s := range f.Sockets {
		if Within(s, ws) {
			return refuse("contains the unix socket "+s+", where a host program listens: a box could connect to it and act on the host (tmux, ssh-agent, an IDE)",
				"stop that program or move its socket out of the workspace, or work on a folder that does not contain it")
		}
	}
	if f.Home != "" {
		home := filepath.Clean(f.Home)
		if ws == home {
			return refuse("is your home directory, which holds your keys and agent settings", "cd into a project directory, or pass --workspace DIR")
		}
		if Within(home, ws) {
			return refuse("contains your home directory", "cd into a project directory, or pass --workspace DIR")
		}
		dirs := f.harness
		if dirs == nil {
			dirs = f.harnessDirs()
		}
		for _, h := range dirs {
			if ws == h.dir || Within(ws, h.dir) {
				return refuse("is inside "+h.shown+", which holds credentials or agent configuration", "work on a project directory outside it")
			}
			if Within(h.dir, ws) {
				return refuse("contains "+h.shown+", which holds credentials or agent configuration", "work on a project directory that does not contain it")
			}
		}
	}
	if f.RuntimeDir != "" && (ws == filepath.Clean(f.RuntimeDir) || Within(ws, f.RuntimeDir)) {
		return refuse("is inside $XDG_RUNTIME_DIR ("+f.RuntimeDir+"), which holds session sockets", "work on a project directory elsewhere")
	}
	for _, d := range f.OwnDirs {
		if d != "" && (ws == filepath.Clean(d) || Within(ws, d) || Within(d, ws)) {
			return refuse("overlaps agentbox's own directory "+d, "work on a project directory elsewhere")
		}
	}
	return nil
}

// StartupHomes are folders under $HOME whose files the host runs by itself, with no review:
// a login shell's PATH, the shells' and editors' start-up folders (each with why). A box
// writes its workspace, and git status does not stop a program from running: a box whose
// workspace was ~/bin wrote ~/bin/git, which the next login shell ran for every git, the
// user's review included; one in ~/.vim wrote plugin/x.vim, which the next vim ran, opening
// that very file to review it among them (review 16, F6). They are no workspace, nor inside
// one; they stay toolchains (bound read-only), so CheckWorkspace, which also decides those,
// does not refuse them: CheckStartupFolders does, for workspaces only.
var StartupHomes = []struct{ Dir, Why string }{
	{"bin", "a login shell puts it at the front of PATH (~/.profile), so a program written there runs in place of the one its name meant"},
	{".local/bin", "a login shell puts it at the front of PATH (~/.profile), so a program written there runs in place of the one its name meant"},
	{".vim", "vim runs its plugins and vimrc at every start"},
	{".local/share/nvim", "neovim runs the plugins there at every start"},
	{".emacs.d", "emacs runs its init files and packages at every start"},
	{".oh-my-zsh", "zsh runs it at every start"},
	{".zsh", "zsh's start-up files source what it holds"},
	{".bashrc.d", "bash's start-up files source what it holds"},
	{".tmux", "tmux runs its plugins at every start"},
}

// CheckStartupFolders reports why ws (absolute, symlink-resolved) must not be a workspace
// because the host runs what it holds by itself, or nil: it is one of StartupHomes under
// home, or inside one, or holds one; or it is a folder of path (the PATH the launch was
// given, its entries as given and symlink-resolved), is inside one or holds one, whose
// programs the host runs by name. A workspace that holds a PATH folder is the common case: a
// project ~/tools whose ~/tools/bin the user put on PATH; the box wrote ~/tools/bin/git (or
// made bin/ when it was absent), and the host's shell ran it for every git (review 16, F6's
// gap). Inside is refused as beneath the fixed folders, except beneath "/", the home or a
// folder above it on PATH: every workspace is there, and CheckWorkspace refuses those
// folders themselves.
//
// A relative or empty PATH entry ("." or "bin", or the empty one a stray ':' makes) names a
// folder of whatever the shell's current folder is, and the user's shell works in the
// workspace: a program the box writes there (or in its bin/) runs by name there. Such a PATH
// refuses every workspace, the entry named, rather than guessing where the shell will be.
//
// PATH entries and the start-up folders are compared symlink-resolved, as ws is: ~/bin ->
// dotfiles/bin makes ~/dotfiles a workspace holding ~/bin (review 17, F1).
func CheckStartupFolders(ws, home string, path []string) error {
	if err := checkPathFolders(ws, home, path, launchPath); err != nil {
		return err
	}
	ws = filepath.Clean(ws)
	refuse := func(why, what string) error {
		return &WorkspaceError{Path: ws, Why: why, Hint: what}
	}
	if home == "" {
		return nil
	}
	for _, h := range StartupHomes {
		d := filepath.Join(filepath.Clean(home), h.Dir)
		d, shown := resolveShown(d)
		switch {
		case ws == d, Within(ws, d):
			return refuse("is inside "+shown+": "+h.Why, "keep it in a project folder outside it (a dotfiles repository, say) and copy it there after review")
		case Within(d, ws):
			return refuse("contains "+shown+": "+h.Why, "work on a project directory that does not contain it")
		}
	}
	return nil
}

// PathOwner says whose PATH a workspace is compared with (CheckStartupFolders,
// CheckHostPath), in the words of the refusal.
type PathOwner struct {
	// Whose names the PATH: "your PATH" (the launch's), or the daemon's with when it started
	// and what it holds.
	Whose string
	// Runs says who runs the programs of its folders by name, and when.
	Runs string
	// Fix is what to do about any entry of it ("" for the launch's PATH, whose refusals each
	// say what to do); %s stands for the entry.
	Fix string
}

// launchPath is the launch's own PATH, the one the user's shell has.
var launchPath = PathOwner{Whose: "your PATH", Runs: "the host's shell runs the programs it holds by name, before any review"}

// checkPathFolders is CheckStartupFolders' rule for the folders of path, whose PATH owner
// says.
func checkPathFolders(ws, home string, path []string, owner PathOwner) error {
	ws = filepath.Clean(ws)
	refuse := func(entry, why, what string) error {
		if owner.Fix != "" {
			what = fmt.Sprintf(owner.Fix, entry)
		}
		return &WorkspaceError{Path: ws, Why: why, Hint: what}
	}
	rhome := ""
	if home != "" {
		home = filepath.Clean(home)
		rhome = ResolveExisting(home)
	}
	runs := owner.Runs
	for _, p := range path {
		if !filepath.IsAbs(p) {
			entry := fmt.Sprintf("%q", p)
			if p == "" {
				entry = "\"\" (empty: a ':' at either end of PATH, or '::')"
			}
			return refuse(entry, "cannot be a workspace while "+owner.Whose+" holds the relative entry "+entry+": the shell looks there in its current folder, so a program the box writes in the workspace runs by name when you work there",
				"remove that entry from PATH (export PATH=... without it) and launch again")
		}
		for _, d := range []string{filepath.Clean(p), ResolveExisting(p)} {
			switch {
			case ws == d:
				return refuse(p, "is on "+owner.Whose+" ("+p+"): "+runs, "keep the scripts in a project folder and install them to PATH after review")
			case Within(d, ws):
				return refuse(p, "contains "+d+", a folder on "+owner.Whose+" ("+p+"): "+runs+"; the box could write a program there (or make the folder)",
					"work on a project directory that does not contain it, or take that folder off your PATH")
			case Within(ws, d) && d != "/" && (home == "" || d != home && !Within(home, d) && d != rhome && !Within(rhome, d)):
				return refuse(p, "is inside "+d+", a folder on "+owner.Whose+" ("+p+"): "+runs, "work on a project directory outside it")
			}
		}
	}
	return nil
}

// CheckHostPath reports why ws (absolute, symlink-resolved) must not be a workspace because
// a process of agentbox's own on the host (the daemon, its shims) finds programs through
// path, the PATH it was started with, or runs one of programs (each as found and
// symlink-resolved): CheckStartupFolders' rule for path's folders, with no exemption, and a
// workspace holding one of programs refused. The daemon outlives the shell that started it:
// with that shell's PATH holding a workspace folder, a box planted bin/git there, and the
// daemon's check at exit ran it on the host, unboxed (review 18, F1); programs are found
// once (internal/hostprog), and this rule keeps every box from writing where they were
// found or could be. owner names the PATH and says how to start the daemon without it.
func CheckHostPath(ws, home string, path []string, programs []string, owner PathOwner) error {
	if err := checkPathFolders(ws, home, path, owner); err != nil {
		return err
	}
	ws = filepath.Clean(ws)
	for _, p := range programs {
		if d, ok := holds(ws, p); ok {
			return &WorkspaceError{Path: ws, Why: "holds " + d + ", a program agentbox runs on the host, unboxed (" + p + ", found through " + owner.Whose + " or named by your configuration): the box could write it",
				Hint: "work on a project directory that does not hold it, or keep that program outside the workspace (a credential helper: name it there in your configuration; one found on PATH: " + fmt.Sprintf(owner.Fix, filepath.Dir(p)) + ")"}
		}
	}
	return nil
}

// holds reports whether the workspace ws (clean, symlink-resolved) is or holds a place the
// kernel passes through to reach p (absolute), or would once it is made: p as written, each
// symlink on the way (a box that can write the link can point it elsewhere) and where it
// ends (PathTrail). d is the first such place.
func holds(ws, p string) (d string, ok bool) {
	if !filepath.IsAbs(p) {
		return "", false
	}
	for _, d := range append([]string{filepath.Clean(p)}, PathTrail(p)...) {
		if d == ws || Within(d, ws) {
			return d, true
		}
	}
	return "", false
}

// maxLinks bounds the symlinks PathTrail follows, as the kernel's own (40).
const maxLinks = 40

// PathTrail returns the places the kernel passes through to reach p (absolute): the location
// of each symlink it follows, each in its resolved folder, and last where p ends, the part
// that does not exist yet as written beneath the last folder that does. Unlike
// ResolveExisting it follows a symlink whose target does not exist yet (~/.gitconfig ->
// dotfiles/gitconfig, removed): what a write through p would make is that target. A loop, or
// more than maxLinks links, ends the trail where it stands.
func PathTrail(p string) []string { return (*linkResolver)(nil).trail(p) }

// StartupFile is a file the host reads and runs by itself, at every start of a program,
// with no review: a shell's or an editor's start-up file, git's configuration.
type StartupFile struct {
	Path string // absolute, as the program names it (~/.gitconfig, not what it links to)
	Why  string // who reads it and when ("git reads it at every start")
}

// HostFile is a file the host reads or runs outside any box (CheckHostFiles): a start-up
// file, or one agentbox itself reads or runs: its own configuration, and the credential
// files and the credential helpers' arguments that configuration names.
type HostFile struct {
	StartupFile
	// Field is the configuration key that names the file, and where it is set
	// ("gateway.anthropic.credential.file in /home/u/.config/agentbox/config.yaml"); "" for a
	// file no configuration of agentbox's names.
	Field string
	// Risk says what a box could do with it, after Why. "" means "so what a box writes there
	// runs on the host before any review".
	Risk string
	// Fix says what to do. "" means to work on a copy of the workspace.
	Fix string
}

// HomeStartupFiles are the start-up files of the home (home-relative) that the shells, git,
// the editors and the terminal tools read at every start. A dotfiles repository (GNU stow,
// rcm, a hand-made ~/.gitconfig -> dotfiles/gitconfig) is where they lead.
var HomeStartupFiles = []StartupFile{
	{".gitconfig", "git reads it at every start (a core.fsmonitor there runs in the very git status you review the change with)"},
	{".config/git/config", "git reads it at every start"},
	{".config/git/attributes", "git reads it at every start (its drivers run programs)"},
	{".profile", "a login shell runs it"},
	{".bash_profile", "a login bash runs it"},
	{".bash_login", "a login bash runs it"},
	{".bash_logout", "bash runs it at every logout"},
	{".bashrc", "bash runs it at every start"},
	{".inputrc", "bash and every readline program read it at every start"},
	{".zshenv", "zsh runs it at every start"},
	{".zprofile", "a login zsh runs it"},
	{".zshrc", "zsh runs it at every start"},
	{".zlogin", "a login zsh runs it"},
	{".config/fish/config.fish", "fish runs it at every start"},
	{".vimrc", "vim runs it at every start"},
	{".gvimrc", "gvim runs it at every start"},
	{".exrc", "vi runs it at every start"},
	{".config/nvim/init.vim", "neovim runs it at every start"},
	{".config/nvim/init.lua", "neovim runs it at every start"},
	{".emacs", "emacs runs it at every start"},
	{".tmux.conf", "tmux runs it at every start"},
	{".config/tmux/tmux.conf", "tmux runs it at every start"},
	{".screenrc", "screen runs it at every start"},
	{".npmrc", "npm reads it at every start (its settings name programs it runs)"},
}

// HomeStartup returns HomeStartupFiles beneath home.
func HomeStartup(home string) []StartupFile {
	if home == "" {
		return nil
	}
	out := make([]StartupFile, len(HomeStartupFiles))
	for i, f := range HomeStartupFiles {
		out[i] = StartupFile{Path: filepath.Join(filepath.Clean(home), f.Path), Why: f.Why}
	}
	return out
}

// CheckStartupFiles reports why ws (absolute, symlink-resolved) must not be a workspace
// because it holds what one of files leads to, or nil. A workspace is written by the box, and
// a start-up file linked into it (~/.gitconfig -> dotfiles/gitconfig) is read by the host's
// next shell or git through the link with no review: what a box appended to
// dotfiles/gitconfig ran in the user's git status (review 17, F6). A file that does not exist
// yet is compared where it would be made, through a dangling symlink too, and so is every
// symlink on the way to it (PathTrail): a box could make it, or repoint the link.
func CheckStartupFiles(ws string, files []StartupFile) error {
	hf := make([]HostFile, len(files))
	for i, f := range files {
		hf[i] = HostFile{StartupFile: f}
	}
	return checkHostFiles(ws, hf, false)
}

// CheckHostFiles is CheckStartupFiles for files each with its own words: the configuration
// key that names it, what a box could do with it and what to do (HostFile). A workspace is
// refused when it is, holds or leads to one of files, or any symlink on the way to one: a
// credential file the gateway reads there is the box's to read (review 19, F4), agentbox's own
// configuration linked there the box's to rewrite with a credential command the next launch
// runs (F2), a credential helper's script the box's to write (F1).
//
// A regular file of more than one hard link is refused wherever the workspace is (review 19b,
// finding 5): its other name may lie in the workspace (ln ~/dotfiles/agentbox.yaml
// ~/.config/agentbox/config.yaml), one inode, so what the box writes in place there is what
// the host reads, and paths compared with the workspace cannot see it; finding the other name
// would mean walking the workspace at every launch.
func CheckHostFiles(ws string, files []HostFile) error {
	return checkHostFiles(ws, files, true)
}

// checkHostFiles is CheckHostFiles; single refuses a file of more than one hard link
// (CheckStartupFiles does not: see docs/security.md).
func checkHostFiles(ws string, files []HostFile, single bool) error {
	ws = filepath.Clean(ws)
	for _, f := range files {
		if fi, err := os.Stat(f.Path); single && err == nil && fi.Mode().IsRegular() && links(fi) > 1 {
			what := f.Path
			if f.Field != "" {
				what += " (" + f.Field + ")"
			}
			return &WorkspaceError{Path: ws,
				Why:  fmt.Sprintf("%s has %d hard links: %s, and another name of the same file may lie in the workspace, where what a box writes in place is what the host reads (or the box reads a secret it is never to see)", what, links(fi), f.Why),
				Hint: fmt.Sprintf("make %s a file of its own (cp %s %s.new && mv %s.new %s), then launch again", f.Path, f.Path, f.Path, f.Path, f.Path)}
		}
		r, ok := holds(ws, f.Path)
		if !ok {
			continue
		}
		what := r + ", which " + f.Path + " leads to"
		if r == filepath.Clean(f.Path) {
			what = r
		}
		if f.Field != "" {
			what += " (" + f.Field + ")"
		}
		risk, fix := f.Risk, f.Fix
		if risk == "" {
			risk = "so what a box writes there runs on the host before any review"
		}
		if fix == "" {
			fix = "work on a copy (git clone " + ws + " " + ws + "-work) and pull the reviewed change into " + ws + " yourself"
		}
		return &WorkspaceError{Path: ws, Why: "holds " + what + ": " + f.Why + ", " + risk, Hint: fix}
	}
	return nil
}

// ResolveExisting returns p (absolute) cleaned, with the symlinks of its longest leading part
// that exists resolved and the rest as written: what the kernel reaches through p, or would
// once the rest is made. A dangling symlink on the way is followed to where it leads: a file
// written through it is made there (~/.gitconfig -> dotfiles/gitconfig before that file
// exists; before, the link itself was returned, and a workspace holding where it led was
// accepted).
func ResolveExisting(p string) string { return resolveExisting(p, 0) }

// resolveExisting is ResolveExisting, having followed links dangling symlinks so far (at most 40,
// as the kernel does).
func resolveExisting(p string, links int) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir := filepath.Dir(p)
	if dir == p {
		return p
	}
	rdir := resolveExisting(dir, links)
	q := filepath.Join(rdir, filepath.Base(p))
	if t, err := os.Readlink(q); err == nil && links < 40 {
		if !filepath.IsAbs(t) {
			t = filepath.Join(rdir, t)
		}
		return resolveExisting(t, links+1)
	}
	return q
}

// resolveShown returns ResolveExisting(p), and p as a refusal names it: with where it leads
// when that differs ("/home/u/bin (which leads to /home/u/dotfiles/bin)").
func resolveShown(p string) (resolved, shown string) {
	p = filepath.Clean(p)
	if r := ResolveExisting(p); r != p {
		return r, p + " (which leads to " + r + ")"
	}
	return p, p
}

// Within reports whether path is strictly beneath dir.
func Within(path, dir string) bool {
	dir = strings.TrimSuffix(filepath.Clean(dir), "/")
	return strings.HasPrefix(filepath.Clean(path), dir+"/")
}
