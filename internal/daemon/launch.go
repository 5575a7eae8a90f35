package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/harnessstate"
	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/launch"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
	"github.com/agentbox/agentbox/internal/safesocket"
	"github.com/agentbox/agentbox/internal/shim"
	"github.com/agentbox/agentbox/internal/store"
)

// liveLaunch is a launch the daemon supervises.
type liveLaunch struct {
	rec     api.Launch
	dir     string
	watcher *shim.Watcher
	done    chan struct{} // closed once the launch is settled and recorded
	// ended is closed once the launch's end is settled (the box's end, its brokers' end: the
	// check at exit) and final holds its outcome (d.mu), before the box's init is waited
	// for and the outcome committed: what the launch's client waits for (api.WaitEnded).
	ended   chan struct{}
	final   *api.Launch
	endOnce sync.Once
	new     bool        // started by this daemon (not re-adopted): supervise stops it when it cannot watch it
	run     *launch.Run // its pipeline, for the ready and watch stages (nil when re-adopted)
	launch  *launch.Launch
	// saving is the commit of the launch's running state (supervise), which its final record
	// waits for (settle).
	saving sync.WaitGroup
	// watched is when supervise's watch of the shim was connected (stageBox's start; zero
	// for a launch watched without its pipeline).
	watched time.Time
}

func newLaunchID() (string, error) {
	var b [api.LaunchIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func (d *Daemon) serveLaunch(w http.ResponseWriter, r *http.Request) error {
	var req api.LaunchRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	resp, err := d.launch(r.Context(), &req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, resp)
	return nil
}

// checkProgram verifies that path names an executable regular file.
func checkProgram(req *api.LaunchRequest) (string, error) {
	if !filepath.IsAbs(req.Path) {
		return "", &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("program path %q is not absolute", req.Path)}
	}
	path, err := filepath.EvalSymlinks(req.Path)
	if err != nil {
		return "", &api.Error{Code: api.CodeProgramNotFound, Message: fmt.Sprintf("program %q (%s): %v", req.Program, req.Path, err),
			Hint: "install it or check your PATH"}
	}
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", &api.Error{Code: api.CodeProgramNotExec, Message: fmt.Sprintf("program %q (%s) is not an executable file", req.Program, path)}
	}
	return path, nil
}

// chosenWorkspace is what checkWorkspace found for a launch.
type chosenWorkspace struct {
	ws, cwd string // the workspace and the program's directory in it (symlink-resolved)
	// deps are the workspace's dependency folders, found at the first call, once: what the
	// PATH rule exempts is what the launch overlays.
	deps func() launchDepFolders
	// facts are what the toolchains' and box caches' folders are compared with
	// (plan.CheckWorkspace), the workspace's own, found once for the launch, less the host's
	// sockets (which only a workspace is compared with).
	facts   plan.WorkspaceFacts
	notices []string // what to show the user about the choice
}

// checkWorkspace chooses the launch's workspace, with its rules' facts found once for the
// launch (workspaceRules): the workspace asked for, or the git repository around it, with
// notices to show the user about the choice (the repository's top level taken as the
// workspace, or why it was not).
func (d *Daemon) checkWorkspace(req *api.LaunchRequest, eff *config.Effective) (chosenWorkspace, error) {
	if !filepath.IsAbs(req.Workspace) {
		return chosenWorkspace{}, &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("workspace %q is not absolute", req.Workspace)}
	}
	set := ruleProfiles(eff.Config)
	links := d.findConfigLinks(set, req.Env) // begun now, beside the rules before it
	ws, err := filepath.EvalSymlinks(req.Workspace)
	if err != nil {
		return chosenWorkspace{}, &api.Error{Code: api.CodeWorkspaceRefused, Message: fmt.Sprintf("workspace %s: %v", req.Workspace, err)}
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return chosenWorkspace{}, &api.Error{Code: api.CodeWorkspaceRefused, Message: fmt.Sprintf("workspace %s is not a directory", ws)}
	}
	rules := d.workspaceRules(req, eff, set, links)
	socks, err := hostSockets()
	if err != nil {
		return chosenWorkspace{}, &api.Error{Code: api.CodeWorkspaceRefused, Message: fmt.Sprintf("workspace %s: cannot list the host's unix sockets to check none lies inside it: %v", ws, err)}
	}
	c := chosenWorkspace{ws: ws, cwd: ws, facts: rules.facts}
	rules.facts.Sockets = socks
	if req.Cwd != "" {
		if cwd, err := filepath.EvalSymlinks(req.Cwd); err == nil && (cwd == ws || strings.HasPrefix(cwd, ws+"/")) {
			c.cwd = cwd
		}
	}
	c.deps = sync.OnceValue(func() launchDepFolders { return d.findDepFolders(ws, c.cwd) })
	if err := d.checkWritable(ws, rules, c.deps); err != nil {
		why, hint := workspaceRefusal(err)
		return chosenWorkspace{}, &api.Error{Code: api.CodeWorkspaceRefused, Message: "workspace " + why, Hint: hint}
	}
	// Run from inside a git repository without --workspace: the repository is the workspace,
	// so that git in the box finds it; the program still starts where the user is.
	if top := repoTop(ws); req.RepoWorkspace && top != "" && top != ws {
		topDeps := sync.OnceValue(func() launchDepFolders { return d.findDepFolders(top, c.cwd) })
		if err := d.checkWritable(top, rules, topDeps); err != nil {
			why, _ := workspaceRefusal(err)
			c.notices = append(c.notices, fmt.Sprintf("agentbox: the workspace is %s, not the git repository around it: %s; git in the box will not see that repository (pass --workspace DIR to choose)", ws, why))
		} else {
			c.notices = append(c.notices, fmt.Sprintf("agentbox: the workspace is the git repository %s (starting in %s; pass --workspace DIR to choose another)", top, c.cwd))
			c.ws, c.deps = top, topDeps
		}
	}
	if n := outsideGitDirNotice(c.ws); n != "" {
		c.notices = append(c.notices, n)
	}
	return c, nil
}

// outsideGitDirNotice says, when the workspace ws is a linked worktree or a submodule whose
// git directory lies outside it, that git in the box cannot reach that directory, and what
// to do; "" otherwise. The box never binds such a gitdir (docs/integrity.md), so every git
// command in it fails with "not a git repository"; before, only the daemon's log said why
// (dogfood20: agentbox run in a `git worktree add ../wt` of the repository).
func outsideGitDirNotice(ws string) string {
	dotGit := filepath.Join(ws, ".git")
	if st, err := os.Lstat(dotGit); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	gd, ok := integrity.ReadGitdir(dotGit)
	if r, err := filepath.EvalSymlinks(gd); ok && err == nil {
		gd = r // ws is resolved too
	}
	if !ok || gd == ws || strings.HasPrefix(gd, ws+"/") {
		return ""
	}
	return fmt.Sprintf("agentbox: the workspace %s is a linked worktree or a submodule whose git directory %s lies outside it: "+
		"git in the box cannot reach it, and every git command there fails with 'not a git repository'; "+
		"start the box in the repository's main worktree (a linked worktree beneath it, such as .worktrees/NAME, works), or run git on the host", ws, gd)
}

// writableRules are what checkWritable compares a folder with, found once per launch
// (workspaceRules) and used for the workspace asked for and for the repository around it.
// They are never kept from one launch to the next: the home's links, its start-up files and
// the configuration may change between launches, and each launch's refusal is a fresh one.
type writableRules struct {
	facts   plan.WorkspaceFacts               // plan.CheckWorkspace's, with the host's sockets
	home    string                            // the user's home, as $HOME says it
	path    []string                          // the launch's PATH (pathFolders)
	ownPath []string                          // the daemon's own PATH (pathFolders)
	progs   []string                          // the host programs found through the daemon's PATH and the credential helpers eff names
	startup []plan.StartupFile                // the home's start-up files and git's configuration
	links   func() ([]plan.ConfigLink, error) // the symlinks among the host's configuration (findConfigLinks)
	files   []plan.HostFile                   // agentbox's configuration files and the credential files and helper arguments eff names
}

// workspaceRules finds the launch req's writableRules with its configuration eff, whose
// profiles are set, and the wait for its configuration's links. (Found by each rule for
// itself before, the workspace facts were found four times per launch and the rules of
// checkWritable twice for a repository's workspace: docs/benchmarks.md.)
func (d *Daemon) workspaceRules(req *api.LaunchRequest, eff *config.Effective, set *profile.Set, links func() ([]plan.ConfigLink, error)) writableRules {
	r := writableRules{facts: d.workspaceFacts(set), links: links,
		path: pathFolders(envValue(req.Env, "PATH")), ownPath: pathFolders(d.hostPath)}
	helpers, _ := credentialPrograms(eff.Config) // its error refuses the launch after the workspace's
	for _, p := range hostprog.Found() {
		r.progs = append(r.progs, p.Path, p.Real)
	}
	r.progs = append(r.progs, helpers...)
	r.home, _ = os.UserHomeDir()
	r.startup = startupFiles(r.home, req.Env)
	r.files = d.configHostFiles(eff, r.home)
	return r
}

// checkWritable reports why ws must not be the workspace of the launch whose rules are r: the
// rules of any folder bound into a box (plan.CheckWorkspace), then those of a folder the box
// writes (plan.CheckStartupFolders, with the launch's PATH less the entries in its dependency
// folders deps; plan.CheckHostPath, with the daemon's own PATH, whole, and the host programs
// found through it and the credential helpers the launch's configuration names;
// plan.CheckStartupFiles, the home's start-up files and git's configuration, whatever they
// link to; plan.CheckConfigLinks, the symlinks among the home's dot-entries, the entries of
// its configuration folders and the programs of the launch's and the daemon's PATH;
// plan.CheckHostFiles, agentbox's own configuration files and the
// credential files and helper arguments the configuration names).
func (d *Daemon) checkWritable(ws string, r writableRules, deps func() launchDepFolders) error {
	if err := plan.CheckWorkspace(ws, r.facts); err != nil {
		return err
	}
	if err := plan.CheckStartupFolders(ws, r.facts.Home, outsideDepFolders(ws, r.path, deps)); err != nil {
		return err
	}
	if err := plan.CheckHostPath(ws, r.facts.Home, r.ownPath, r.progs, d.hostPathOwner()); err != nil {
		return err
	}
	if err := plan.CheckStartupFiles(ws, r.startup); err != nil {
		return err
	}
	links, err := r.links()
	if err != nil {
		// Not every link was found: no answer, so no launch (a folder unread for want of a
		// descriptor was taken for one without links).
		return &plan.WorkspaceError{Path: ws, Why: "cannot be checked against the host's configuration links: " + err.Error(),
			Hint: "launch again; if it persists, raise the daemon's open-file limit or check the folder named"}
	}
	if err := plan.CheckConfigLinks(ws, r.home, links); err != nil {
		return err
	}
	return plan.CheckHostFiles(ws, r.files)
}

// hostPathOwner names the daemon's PATH in a refusal: when the daemon started and the PATH it
// holds, and how to start one without the entry.
func (d *Daemon) hostPathOwner() plan.PathOwner {
	return plan.PathOwner{
		Whose: "the agentbox daemon's own PATH",
		Runs: fmt.Sprintf("the daemon (pid %d, started %s with PATH=%s, the PATH of what started it: the first agentbox command run, or its service) and its shims find the host programs they run outside any box through it (git at every launch's check at exit), so a program a box wrote there would run on the host, unboxed, as you",
			os.Getpid(), d.started.UTC().Format("2006-01-02 15:04:05 UTC"), d.hostPath),
		Fix: "restart the daemon from a shell whose PATH does not hold %s: run `agentbox daemon stop` there, then launch again from it (agentbox run starts a new daemon with that shell's PATH)",
	}
}

// outsideDepFolders returns the entries of path save those in one of the launch's own
// dependency folders (deps' folders: node_modules, .venv, a virtualenv of any name,
// integrity.DepFolderKinds): npm run puts the project's node_modules/.bin on PATH, an
// activated virtualenv its bin/, and the box writes neither in place (they are its own
// overlays, docs/toolchains.md), so they do not make the workspace one the host runs by
// itself (plan.CheckStartupFolders). An entry counts as in one only when it lies beneath one
// of the folders the launch overlays, found before this rule (deps, the same list the launch
// overlays) and a real folder now (symlink-resolved to itself): before, any entry with a
// component named node_modules or .venv counted, and a box made node_modules a symlink to a
// folder of its own and wrote git there (review 18, F2). The dependency folders are looked for
// only when an entry lies in the workspace.
func outsideDepFolders(ws string, path []string, deps func() launchDepFolders) []string {
	var out, folders []string
	found := false
	for _, p := range path {
		if filepath.IsAbs(p) && plan.Within(filepath.Clean(p), ws) {
			if !found {
				for _, f := range deps().folders {
					if isPlainDir(f) {
						folders = append(folders, f)
					}
				}
				found = true
			}
			if slices.ContainsFunc(folders, func(f string) bool { return filepath.Clean(p) == f || plan.Within(filepath.Clean(p), f) }) {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// pathFolders returns the entries of the PATH value path, each followed by the folder it
// resolves to when that differs (symlinks resolved as far as the path exists: a PATH folder
// not made yet is still one a box could make): the workspace is compared resolved.
func pathFolders(path string) []string {
	var out []string
	for _, p := range filepath.SplitList(path) {
		out = append(out, p)
		if !filepath.IsAbs(p) {
			continue
		}
		rest := ""
		for d := filepath.Clean(p); ; d = filepath.Dir(d) {
			if r, err := filepath.EvalSymlinks(d); err == nil {
				if r = filepath.Join(r, rest); r != filepath.Clean(p) {
					out = append(out, r)
				}
				break
			}
			if d == "/" {
				break
			}
			rest = filepath.Join(filepath.Base(d), rest)
		}
	}
	return out
}

// workspaceFacts are what plan.CheckWorkspace compares a workspace (or a toolchain's folder)
// with: the home (symlink-resolved, as the workspace is), the runtime directory, agentbox's
// own directories and the harness homes of the profiles in set (nil: the built-in ones).
func (d *Daemon) workspaceFacts(set *profile.Set) plan.WorkspaceFacts {
	home, _ := os.UserHomeDir()
	if home != "" {
		home = plan.ResolveExisting(home)
	}
	cfgDir, _ := safesocket.ConfigDir()
	own := []string{d.runtimeDir, d.stateDir, cfgDir}
	for i, p := range own {
		if filepath.IsAbs(p) {
			own[i] = plan.ResolveExisting(p)
		}
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if filepath.IsAbs(rt) {
		rt = plan.ResolveExisting(rt)
	}
	var harness []string
	if set != nil {
		harness = set.HarnessHomes()
	}
	return plan.WorkspaceFacts{Home: home, RuntimeDir: rt, OwnDirs: own, Harness: harness}.ResolveHarness()
}

// workspaceRefusal returns what is wrong with a workspace plan.CheckWorkspace refused (the
// path and why) and what to do.
func workspaceRefusal(err error) (why, hint string) {
	var we *plan.WorkspaceError
	if errors.As(err, &we) {
		return we.Path + " " + we.Why, we.Hint
	}
	return err.Error(), ""
}

// Names of the daemon's own stages of the launch pipeline (api.Stage.Name), beside the
// standard ones of internal/launch.
const (
	stageResolve    = "resolve"     // admission, program, workspace, configuration, profile
	stagePrepare    = "prepare"     // the home's folders, the install tree
	stageHarness    = "harness"     // the box-owned harness state (beside brokers, plan, request)
	stageBrokers    = "brokers"     // every broker's prepare (undo: their end)
	stagePlan       = "plan"        // the profile's wiring, toolchains, plan.Build
	stageRecord     = "record"      // the launch's record (undo: recorded failed)
	stageRecordShim = "record-shim" // the shim's pid and start time, when not the spare's
)

// launch runs the launch pipeline (internal/launch, docs/internals.md): resolve, layout,
// prepare, harness (beside brokers, plan and request), record, shim, record-shim; the watch
// follows in supervise, after the answer. A stage that fails undoes the completed ones.
func (d *Daemon) launch(ctx context.Context, req *api.LaunchRequest) (*api.LaunchResponse, error) {
	// What each stage finds, for the stages after it.
	var (
		run           launch.Run
		id            string
		path, ws, cwd string
		deps          func() launchDepFolders
		facts         plan.WorkspaceFacts // the toolchains' and caches' folders are compared with
		notices       []string
		cfg           config.Config
		egress        plan.Egress
		eng           engine.Engine
		prof          *profile.Profile
		pfacts        profile.Facts
		home          string
		tree          *profile.InstallTree
		contrib       plan.Contributions
		p             *plan.Plan
	)
	err := run.Do(ctx, launch.Stage{Name: stageResolve, Do: func(ctx context.Context) error {
		// Only a host proven able to build and enforce the box runs anything: never unboxed.
		if err := d.admit(ctx); err != nil {
			return err
		}
		var err error
		if path, err = checkProgram(req); err != nil {
			return err
		}
		// One reading of the configuration for the workspace's rules and the launch: the
		// credential helpers and files its rules compare are those the relays use.
		eff, err := d.launchConfig()
		if err != nil {
			return err
		}
		c, err := d.checkWorkspace(req, eff)
		if err != nil {
			return err
		}
		ws, cwd, deps, facts, notices = c.ws, c.cwd, c.deps, c.facts, c.notices
		if _, err := credentialPrograms(eff.Config); err != nil {
			return err
		}
		cfg = eff.Config
		egress = plan.Egress(cfg.Egress)
		if req.Egress != "" {
			egress = plan.Egress(req.Egress)
		}
		if egress != plan.EgressDeny && egress != plan.EgressAllow {
			return &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("--egress %q: allowed values are deny, allow", req.Egress)}
		}
		if egress != plan.Egress(cfg.Egress) {
			if err := lockedKey(eff, "egress", "--egress "+string(egress)); err != nil {
				return err
			}
		}
		if eng, err = engine.Get(cfg.Engine); err != nil {
			return &api.Error{Code: api.CodeBoxUnavailable, Message: err.Error(), Hint: "set engine: native in your config"}
		}
		// The program's profile (profile.go), its denied arguments and the preconditions that
		// need nothing started.
		if prof, pfacts, err = resolveProfile(req, cfg, egress); err != nil {
			return err
		}
		id, err = newLaunchID()
		return err
	}})
	if err != nil {
		return nil, err
	}

	l := &launch.Launch{Dir: launchdir.Dir(d.runtimeDir, id), Log: d.log}
	err = run.Do(ctx, l.Layout().MapErr(func(err error) error {
		if de := (*launch.DirError)(nil); errors.As(err, &de) {
			// A 128-bit id never repeats; an existing directory means something is wrong: fail closed.
			return &api.Error{Code: api.CodeLaunchDirConflict, Message: err.Error()}
		}
		return err
	}))
	if err != nil {
		return nil, err
	}
	// A launch started from a terminal has a console, detached or not (attach, detach keys).
	console := plan.ConsolePipe
	if req.TTY {
		console = plan.ConsoleTTY
	}
	err = run.Do(ctx, launch.Stage{Name: stagePrepare, Do: func(context.Context) error {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return fmt.Errorf("home directory: %w", err)
		}
		// Before the brokers: the integrity broker watches the protected home entries this
		// makes, and holds the absent ones.
		if err := preCreate(home, prof); err != nil {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: "prepare the home of " + prof.DisplayName() + ": " + err.Error()}
		}
		pfacts.StateDir = harnessstate.Dir(d.stateDir, prof.ID, ws)
		tree = d.findInstall(prof, path, req.Env)
		return nil
	}})
	if err != nil {
		return nil, err
	}
	// The box-owned state of this workspace's boxes of the profile (transcripts, trust taken in
	// a box), and the harness state files synthesized afresh for this launch. Only the box reads
	// them (its mounts, made once the shim has the launch), and they lie in agentbox's state
	// directory, which no workspace overlaps and no broker watches: they are made beside the
	// brokers, the plan and the request, and waited for before the launch is recorded and
	// handed to its shim. (Made first, they added the Claude profile's 38 state entries' file
	// operations to every launch's way to its program: docs/benchmarks.md.)
	var harnessWarns []harnessstate.Warning
	harness := run.Go(ctx, launch.Stage{Name: stageHarness, Do: func(context.Context) error {
		var err error
		if harnessWarns, err = harnessstate.Prepare(pfacts.StateDir, prof, home, ws); err != nil {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: "prepare the box-owned state of " + prof.DisplayName() + ": " + err.Error(),
				Hint: "check free space and permissions of " + d.stateDir}
		}
		return nil
	}})
	// (A stage below that fails rolls the launch back, which waits for this one first.)
	bl := &broker.Launch{ID: id, RunDir: l.RunDir(), Workspace: ws, Home: home, Program: path, Profile: prof.ID, Egress: egress, Config: cfg}
	err = run.Do(ctx, launch.Stage{Name: stageBrokers,
		Do: func(ctx context.Context) error {
			if err := d.prepareBrokers(ctx, bl, &contrib); err != nil {
				return asAPIError(err, api.CodeBoxSetupFailed)
			}
			return nil
		},
		Undo: func(error) { d.endBrokers(id) },
	})
	if err != nil {
		return nil, err
	}
	err = run.Do(ctx, launch.Stage{Name: stagePlan, Do: func(context.Context) (err error) {
		// The overlays' work folders made for the launch go with a failed plan (Undo, after).
		defer func() {
			if err != nil {
				d.removeLaunchWork(id, ws)
			}
		}()
		args, err := wireProfile(prof, pfacts, home, tree, &contrib)
		if err != nil {
			return err
		}
		if err := d.toolchains(id, ws, cwd, home, path, req.Env, facts, &contrib); err != nil {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: "box cache " + boxCache(d.stateDir, ws) + ": " + err.Error(),
				Hint: "check free space and permissions of " + d.stateDir}
		}
		if err := d.programCaches(id, ws, home, prof.Caches(), facts, &contrib); err != nil {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: "box cache " + boxCache(d.stateDir, ws) + ": " + err.Error(),
				Hint: "check free space and permissions of " + d.stateDir}
		}
		notice, err := d.overlayDepFolders(id, ws, deps(), facts, &contrib)
		if notice != "" {
			notices = append(notices, notice)
		}
		if err != nil {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: err.Error(),
				Hint: "check free space and permissions of " + boxCache(d.stateDir, ws) + " and of the workspace"}
		}
		// Run by root, the box's uid is host root: its shim shows it the system folders
		// through idmapped mounts in which host root owns nothing (internal/linux/idmap), so
		// the kernel keeps what only root may read closed, with no list to make here.
		p, err = plan.Build(plan.Input{
			ID: id, Profile: prof.ID, Program: path, Args: args, Workspace: ws, Cwd: cwd, Home: home,
			UID: os.Getuid(), GID: os.Getgid(), Env: unsetEnv(req.Env, prof.Relay.Unset), RunDir: l.RunDir(), Console: console, Egress: egress,
			Brokers: contrib,
			Limits:  plan.Limits{TmpMiB: cfg.Limits.TmpMiB, HomeMiB: cfg.Limits.HomeMiB, ShmMiB: cfg.Limits.ShmMiB, Processes: cfg.Limits.Processes},
		})
		if err != nil {
			return &api.Error{Code: api.CodeBadRequest, Message: err.Error()}
		}
		return nil
	}, Undo: func(error) { d.removeLaunchWork(id, ws) }})
	if err != nil {
		return nil, err
	}
	if egress == plan.EgressAllow {
		d.log.Warn("egress: allow — this box shares the host network", "launch", id, "program", req.Program)
	}
	scfg := shim.Config{LaunchID: id, Engine: eng.Name(), Console: console, Detached: req.Detach,
		StopGrace: cfg.StopGrace.Duration(), Clipboard: cfg.Console.Clipboard}
	if req.Detach && console == plan.ConsoleTTY {
		scfg.Size.Rows, scfg.Size.Cols = req.Rows, req.Cols
	}
	err = run.Do(ctx, l.Request(eng, p, scfg).MapErr(func(err error) error {
		if re := (*launch.RequestError)(nil); errors.As(err, &re) {
			return &api.Error{Code: api.CodeBoxSetupFailed, Message: "render engine request: " + re.Err.Error()}
		}
		return err
	}))
	if err != nil {
		return nil, err
	}
	if err = harness.Wait(); err != nil {
		return nil, err
	}
	// A host file the synthesizer could not read: the launch goes on as a new user's would,
	// and says so, on the terminal and in the log.
	for _, w := range harnessWarns {
		d.log.Warn("harness state: a host file was not carried", "launch", id, "program", prof.ID, "file", w.File, "err", w.Err)
		notices = append(notices, "agentbox: "+prof.DisplayName()+": "+w.String())
	}

	rec := api.Launch{
		ID: id, Program: req.Program, Args: req.Args, Profile: p.Profile, Workspace: ws, Engine: eng.Name(),
		State: api.StateStarting, Detached: req.Detach, Started: time.Now().UTC(), Posture: d.launchPosture(prof.ID),
	}
	// Record before the box runs: a box is never left unrecorded. With a spare shim, its identity
	// is known already and goes into the same record (one commit fewer on the launch's path).
	sp := d.takeSpare()
	launched := false
	defer func() {
		if !launched {
			d.refillSpare()
		}
	}()
	srec := toStore(&rec, l.Dir)
	if sp != nil {
		srec.ShimPid, srec.ShimStartTime = sp.Pid(), sp.Proc().StartTime
	}
	record := launch.Stage{Name: stageRecord,
		Do: func(ctx context.Context) error {
			// The launch's integrity state, saved beside the stages since the brokers', is on
			// disk before the launch is recorded, and so before its program can start.
			if d.integrity != nil {
				if err := d.integrity.awaitSaved(id); err != nil {
					return &api.Error{Code: api.CodeBoxSetupFailed, Message: err.Error(), Hint: "check free space and permissions of " + d.runtimeDir}
				}
			}
			// The launch's pairing session is saved in the same commit.
			if err := d.store.CreateLaunch(ctx, srec, d.launchSessions(id)...); err != nil {
				return &api.Error{Code: api.CodeStoreFailed, Message: "record launch: " + err.Error(), Hint: "check free space and permissions of " + d.stateDir}
			}
			return nil
		},
		// A recorded launch that fails later is recorded failed, with the reason.
		Undo: func(cause error) {
			rec.State = api.StateFailed
			rec.Error = asAPIError(cause, api.CodeBoxSetupFailed)
			rec.Stages = run.Stages()
			d.record(&rec, l.Dir)
		},
	}
	shimErr := func(err error) error {
		return &api.Error{Code: api.CodeBoxSetupFailed, Message: "start box shim: " + err.Error()}
	}
	startShim := l.Shim(sp, true).MapErr(shimErr)
	if req.Detach || sp == nil {
		// The program may start as soon as the shim does: record first.
		if err := run.Do(ctx, record); err != nil {
			if sp != nil {
				sp.Close()
			}
			return nil, err
		}
		if err := run.Do(ctx, startShim); err != nil {
			return nil, err
		}
	} else {
		// An attached launch's program waits for its client, which waits for this answer: the
		// spare is handed the launch and its socket, listening already, while the record is
		// committed, and the answer waits for both, but not for the spare's own answer (read
		// in supervise, the ready stage): the client connects while the spare takes the launch
		// and builds the box, and is answered once it has.
		recorded := run.Go(ctx, record)
		serr := run.Do(ctx, l.HandShim(sp, true).MapErr(shimErr))
		if err := recorded.Wait(); err != nil {
			// The box, if it started, is held: its program has not run. The rollback stopped
			// it; nothing of it is recorded.
			return nil, err
		}
		if serr != nil {
			return nil, serr
		}
	}
	rec.ShimPid = l.ShimPid
	err = run.Do(ctx, launch.Stage{Name: stageRecordShim, Do: func(ctx context.Context) error {
		if l.ShimPid == srec.ShimPid {
			return nil // the spare, recorded with the launch
		}
		// Not the spare recorded above (none, or it failed and a new shim started). Its start
		// time was read when it started: a short detached launch's shim may have ended by now.
		if err := d.store.SetShim(context.WithoutCancel(ctx), id, l.ShimPid, l.ShimStartTime); err != nil {
			// Recording failed: the rollback stops the box rather than leave it unsupervised.
			d.log.Error("record shim failed; stopping the box", "launch", id, "err", err)
			return &api.Error{Code: api.CodeStoreFailed, Message: "record launch: " + err.Error(), Hint: "check free space and permissions of " + d.stateDir}
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	// The watch of the shim connects in supervise, after the answer: the program cannot start
	// before the client attaches, and a watch that fails stops the box there.
	run.Commit()
	ll := &liveLaunch{rec: rec, dir: l.Dir, done: make(chan struct{}), ended: make(chan struct{}), new: true, run: &run, launch: l}
	d.mu.Lock()
	d.launches[id] = ll
	d.mu.Unlock()
	d.wg.Add(1)
	go d.supervise(ll)
	launched = true
	d.log.Info("launch", "id", id, "program", req.Program, "workspace", ws, "console", console, "detached", req.Detach, "shim", l.ShimPid)
	return &api.LaunchResponse{ID: id, ShimSocket: l.Socket(), DetachKeys: cfg.Console.DetachKeys, Notices: notices,
		DaemonVersion: d.version(), DaemonPid: os.Getpid()}, nil
}

func (d *Daemon) serveLaunches(w http.ResponseWriter, r *http.Request) error {
	f, err := launchFilter(r.URL.Query())
	if err != nil {
		return err
	}
	outcomes := d.endedOutcomes()
	ls, err := d.store.ListLaunches(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]api.Launch, 0, len(ls))
	for _, l := range ls {
		rec := fromStore(l)
		if d.relay != nil {
			rec.Relay = d.relay.launchStats(rec.ID)
		}
		rec.Egress = d.egressStats(rec.ID)
		withOutcome(&rec, outcomes)
		if len(f.States) > 0 && !slices.Contains(f.States, rec.State) {
			continue // ended, its outcome not committed yet (a filter of ended states misses it until then)
		}
		out = append(out, rec)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// find resolves a launch id or unique prefix.
func (d *Daemon) find(ctx context.Context, id string) (*api.Launch, string, error) {
	if err := api.CheckLaunchID(id); err != nil {
		return nil, "", err
	}
	outcomes := d.endedOutcomes()
	if len(id) == api.LaunchIDLen {
		// A whole id (what the CLI has after a run) is its own only match: one row, not every
		// launch the store keeps with their drift.
		l, err := d.store.GetLaunch(ctx, id)
		if err == nil {
			return withOutcome(new(fromStore(l)), outcomes), l.LaunchDir, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, "", err
		}
	}
	ls, err := d.store.ListLaunches(ctx, store.Filter{})
	if err != nil {
		return nil, "", err
	}
	var found []api.Launch
	var dirs []string
	for _, l := range ls {
		if strings.HasPrefix(l.ID, id) {
			found = append(found, fromStore(l))
			dirs = append(dirs, l.LaunchDir)
		}
	}
	switch len(found) {
	case 0:
		return nil, "", &api.Error{Code: api.CodeNotFound, Message: "no launch " + id, Hint: "see `agentbox launches`"}
	case 1:
		return withOutcome(&found[0], outcomes), dirs[0], nil
	}
	return nil, "", &api.Error{Code: api.CodeBadRequest, Message: "launch id prefix " + id + " is ambiguous"}
}

func (d *Daemon) serveGetLaunch(w http.ResponseWriter, r *http.Request) error {
	l, _, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	wait := r.URL.Query().Get(api.QueryWait) == api.WaitEnded
	if wait {
		// The client's summary after its program exited waits for the launch's end here,
		// rather than asking again and again.
		d.mu.Lock()
		live := d.launches[l.ID]
		d.mu.Unlock()
		if live != nil {
			t := time.NewTimer(api.MaxEndWait)
			defer t.Stop()
			select {
			case <-live.ended:
				// Its outcome may not be committed yet: find shows it (withOutcome).
				if l, _, err = d.find(r.Context(), l.ID); err != nil {
					return err
				}
			case <-t.C:
			case <-r.Context().Done():
				return r.Context().Err()
			}
		}
	}
	l.Egress = d.egressStats(l.ID)
	if wait && l.State != api.StateRunning && l.State != api.StateStarting {
		// What the summary says of the proposed changes, in this answer rather than a request
		// of its own for every diff (GET …/changes).
		l.Proposed = d.proposedCount(l.ID)
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

func (d *Daemon) serveConsole(w http.ResponseWriter, r *http.Request) error {
	l, dir, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if l.State != api.StateRunning && l.State != api.StateStarting {
		return &api.Error{Code: api.CodeNotFound, Message: "launch " + l.ID + " is " + l.State}
	}
	if sc, err := shim.ReadConfig(dir); err == nil && sc.Detached && sc.Console != plan.ConsoleTTY {
		return &api.Error{Code: api.CodeLaunchDetached, Message: "launch " + l.ID + " has no console: it was started with --detach without a terminal",
			Hint: "its output is in " + filepath.Join(dir, launchdir.OutputFile) + "; start it from a terminal to attach later"}
	}
	writeJSON(w, http.StatusOK, api.LaunchResponse{ID: l.ID, ShimSocket: filepath.Join(dir, launchdir.SocketFile), DetachKeys: d.reloadConfig().Config.Console.DetachKeys})
	return nil
}

func (d *Daemon) serveStop(w http.ResponseWriter, r *http.Request) error {
	rec, _, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	d.mu.Lock()
	l := d.launches[rec.ID]
	var wt *shim.Watcher
	if l != nil {
		wt = l.watcher
	}
	d.mu.Unlock()
	if l != nil {
		if err := stopViaShim(wt, l.dir); err != nil {
			d.log.Warn("stop", "launch", rec.ID, "err", err)
		}
		select {
		case <-l.done:
		case <-time.After(time.Minute):
			return &api.Error{Code: api.CodeInternal, Message: "box " + rec.ID + " did not settle within a minute"}
		case <-r.Context().Done():
			return r.Context().Err()
		}
		if rec, _, err = d.find(r.Context(), rec.ID); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (d *Daemon) serveConfig(w http.ResponseWriter, r *http.Request) error {
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(b)
	return err
}

// endedOutcomes returns the outcomes of the launches whose end is settled and whose outcome
// is not committed yet (liveLaunch.final), by id. Taken before the store is read: a launch
// whose outcome is committed meanwhile has it in the store then, as it is removed from
// d.launches only after its commit.
func (d *Daemon) endedOutcomes() map[string]*api.Launch {
	d.mu.Lock()
	defer d.mu.Unlock()
	var m map[string]*api.Launch
	for id, l := range d.launches {
		if l.final != nil {
			if m == nil {
				m = map[string]*api.Launch{}
			}
			m[id] = l.final
		}
	}
	return m
}

// withOutcome returns rec, a launch's record as the store has it, with the outcome of its end
// from outcomes (endedOutcomes) when the store has it still running: the launch's client is
// answered before the outcome is committed, and what it and anyone asking after it see agrees.
func withOutcome(rec *api.Launch, outcomes map[string]*api.Launch) *api.Launch {
	f := outcomes[rec.ID]
	if f == nil || (rec.State != api.StateRunning && rec.State != api.StateStarting) {
		return rec
	}
	rec.State, rec.ExitCode, rec.Error, rec.Settled, rec.Ended, rec.BoxPid = f.State, f.ExitCode, f.Error, f.Settled, f.Ended, f.BoxPid
	return rec
}

// asAPIError returns err as an *api.Error, wrapping other errors with code.
func asAPIError(err error, code string) *api.Error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	return &api.Error{Code: code, Message: err.Error()}
}

// stopViaShim asks the shim of the launch in dir to stop its box: through the daemon's watch
// w, or, when there is none (yet), through a watch of its own. A shim that has already ended
// needs nothing: supervision records how its launch ended.
func stopViaShim(w *shim.Watcher, dir string) error {
	if w != nil {
		return w.Stop()
	}
	w, err := shim.Watch(dir)
	if err != nil {
		return nil
	}
	defer w.Close()
	return w.Stop()
}

// ended reports whether the shim of the launch in dir has written its final status.
func ended(dir string) bool {
	_, err := shim.ReadStatus(dir)
	return err == nil
}

// launchFilter reads the query of GET /v0/launches (api.QueryLimit, QueryState,
// QueryHideProbes); a value it cannot read is a bad_request naming the parameter.
func launchFilter(q url.Values) (store.Filter, error) {
	var f store.Filter
	if s := q.Get(api.QueryLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return f, &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("%s %q: want a whole number, 0 or more", api.QueryLimit, s)}
		}
		f.Limit = n
	}
	if s := q.Get(api.QueryState); s != "" {
		for _, st := range strings.Split(s, ",") {
			if !slices.Contains(api.States, st) {
				return f, &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("%s %q: allowed values are %s", api.QueryState, st, strings.Join(api.States, ", "))}
			}
			f.States = append(f.States, st)
		}
	}
	f.HideProbes = q.Get(api.QueryHideProbes) == "1"
	return f, nil
}
