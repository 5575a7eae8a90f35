package integrity_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// placeholderWorkerCmd is the test binary's entry (see TestMain) that runs launches from a
// process of its own: placeholder-worker REGISTRY WORKSPACE NAME ROUNDS.
const placeholderWorkerCmd = "placeholder-worker"

func placeholderWorker(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: placeholder-worker REGISTRY WORKSPACE NAME ROUNDS")
		return 2
	}
	rounds, err := strconv.Atoi(args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	reg := &integrity.Registry{Path: args[0]}
	if err := launches(reg, args[1], args[2], rounds); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// launches runs rounds launches on ws one after the other, as the daemon's integrity broker
// does for each box: prepare, bind what the box binds, keep it while the box runs, release.
// It returns the first failure: a prepare or release error, or a bind source missing or
// replaced while the launch runs (which fails or silently loses a box's bind).
func launches(reg *integrity.Registry, ws, name string, rounds int) error {
	for i := range rounds {
		launch := fmt.Sprintf("%s-%d", name, i)
		lay, err := reg.Prepare(launch, ws, nil)
		if err != nil {
			reg.Release(launch)
			return fmt.Errorf("launch %s: prepare: %w", launch, err)
		}
		// The box binds every source of its protected mounts, beneath the workspace.
		bound := map[string][2]uint64{}
		for _, m := range plan.ProtectMounts(lay.Protected) {
			id, err := identity(m.Beneath, m.Source)
			if err != nil {
				reg.Release(launch)
				return fmt.Errorf("launch %s: bind %s: %w", launch, m.Source, err)
			}
			bound[m.Source] = id
		}
		// While the box runs, other launches start and end.
		for range 1 + i%3 {
			runtime.Gosched()
		}
		for src, id := range bound {
			got, err := identity(ws, src)
			if err != nil || got != id {
				reg.Release(launch)
				return fmt.Errorf("launch %s: %s was removed or replaced while its box ran (%v)", launch, src, err)
			}
		}
		if _, err := reg.Release(launch); err != nil {
			return fmt.Errorf("launch %s: release: %w", launch, err)
		}
	}
	return nil
}

// identity returns the device and inode of path, looked up beneath base without following
// symlinks (as box-init opens a bind source).
func identity(base, path string) ([2]uint64, error) {
	rel, err := filepath.Rel(base, path)
	if err != nil {
		return [2]uint64{}, err
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Join(base, rel), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return [2]uint64{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return [2]uint64{}, err
	}
	return [2]uint64{st.Dev, st.Ino}, nil
}

// tree lists every path beneath dir, relative to it.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestConcurrentLaunchesLeaveNoLitter: launches on one workspace that start and end
// concurrently, in one process and from several, each with its own Registry value over one
// registry file, never fail to prepare, never lose a bind source while they run, never fail to
// release, and never change the workspace (no placeholder, no registry entry).
func TestConcurrentLaunchesLeaveNoLitter(t *testing.T) {
	t.Parallel()
	const goroutines, processes, rounds = 6, 3, 25
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, ws string)
	}{
		// Every protected path absent: each is guarded, nothing is created.
		{"Empty", func(*testing.T, string) {}},
		// Some protected paths there (bound), others absent inside real folders (guarded).
		{"PartlyThere", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
			write(t, filepath.Join(ws, ".git", "config"), "[core]\n")
			if err := os.Mkdir(filepath.Join(ws, ".claude"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(ws, ".envrc"), "export A=1\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, ws)
			before := tree(t, ws)
			regPath := filepath.Join(t.TempDir(), "placeholders.json")

			var wg sync.WaitGroup
			errs := make(chan error, goroutines+processes)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- launches(&integrity.Registry{Path: regPath}, ws, fmt.Sprintf("g%d", g), rounds)
				}()
			}
			for p := range processes {
				cmd := exec.Command(os.Args[0], placeholderWorkerCmd, regPath, ws, fmt.Sprintf("p%d", p), strconv.Itoa(rounds))
				wg.Add(1)
				go func() {
					defer wg.Done()
					out, err := cmd.CombinedOutput()
					if err != nil {
						err = fmt.Errorf("worker process p%d: %w: %s", p, err, strings.TrimSpace(string(out)))
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}

			if after := tree(t, ws); !slices.Equal(after, before) {
				t.Errorf("workspace after every launch ended: %v, want %v (placeholders left behind)", after, before)
			}
			b, err := os.ReadFile(regPath)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			var reg struct {
				Entries []json.RawMessage `json:"entries"`
			}
			if len(b) > 0 {
				if err := json.Unmarshal(b, &reg); err != nil {
					t.Fatal(err)
				}
			}
			if len(reg.Entries) > 0 {
				t.Errorf("registry still holds %d placeholders: %s", len(reg.Entries), b)
			}
		})
	}
}

// TestWorkspaceConfigGuards: absent protected paths — the defaults and a profile's extra
// ones, folders written with a trailing slash — are guarded (folders as folders), never pinned,
// and are integrity roots; Prepare creates nothing in the workspace and Release leaves it as
// it was.
func TestWorkspaceConfigGuards(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "ph.json")}
	extra := []string{".opencode/", ".opencode/.gitignore", "opencode.json", "opencode.jsonc", ".codex/", ".gemini/", ".claude/hooks/",
		filepath.Join(ws, ".copilot") + "/"}
	lay, err := reg.Prepare("a", ws, extra)
	if err != nil {
		t.Fatal(err)
	}
	if got := tree(t, ws); !slices.Equal(got, []string{".claude"}) {
		t.Errorf("Prepare changed the workspace: %v, want only the user's .claude", got)
	}
	// .git is not among them: the workspace is in no repository, and one the box makes there
	// is under the nested repositories' rule (issue #20; TestAbsentDotGitBeneathRepository).
	if !integrity.SurelyNoRepository(ws) {
		t.Skipf("%s lies beneath a .git or a HEAD", ws)
	}
	if !lay.NoRepository || slices.ContainsFunc(lay.Guards, func(g plan.Guard) bool { return g.Path == filepath.Join(ws, ".git") }) ||
		slices.ContainsFunc(lay.Roots, func(r integrity.Root) bool { return r.Path == filepath.Join(ws, ".git") }) {
		t.Errorf("the absent .git of a workspace in no repository: NoRepository %v, guards %v, roots %v; want it neither guarded nor a root", lay.NoRepository, lay.Guards, lay.Roots)
	}
	want := map[string]bool{ // path → guarded as a folder
		".opencode": true, ".codex": true, ".gemini": true, ".claude/hooks": true, ".copilot": true,
		".github/workflows": true, "opencode.json": false, "opencode.jsonc": false, ".opencode/.gitignore": false,
		".mcp.json": false, ".envrc": false, ".vscode/settings.json": false, ".claude/settings.json": false,
	}
	guards := map[string]bool{}
	for _, g := range lay.Guards {
		rel, _ := filepath.Rel(ws, g.Path)
		guards[rel] = g.Dir
		if g.Beneath != ws {
			t.Errorf("guard %s beneath %s, want %s", rel, g.Beneath, ws)
		}
	}
	for rel, dir := range want {
		p := filepath.Join(ws, rel)
		if d, ok := guards[rel]; !ok || d != dir {
			t.Errorf("%s: guarded %v as a folder %v, want guarded as a folder %v (guards %v)", rel, ok, d, dir, guards)
		}
		if slices.ContainsFunc(lay.Protected, func(pr plan.Protected) bool { return pr.Path == p }) {
			t.Errorf("absent %s is pinned", rel)
		}
		if !slices.ContainsFunc(lay.Roots, func(r integrity.Root) bool { return r.Path == p && r.Alert }) {
			t.Errorf("%s is not an integrity root", rel)
		}
	}
	if _, err := reg.Release("a"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, ws); !slices.Equal(got, []string{".claude"}) {
		t.Errorf("left on the host after release: %v, want only .claude", got)
	}
}

// TestAbsentDotGitBeneathRepository: a workspace that is a folder beneath a repository's top,
// with no .git of its own, keeps its .git guarded as a folder (what a box's git init writes
// there is moved out as it appears): a repository made there would take the workspace out of
// the one above, whose git status and checks at exit cover it. The guard is for a workspace in
// no repository only that is lifted (issue #20).
func TestAbsentDotGitBeneathRepository(t *testing.T) {
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !integrity.SurelyNoRepository(top) {
		t.Skipf("%s lies beneath a .git or a HEAD", top)
	}
	ws := filepath.Join(top, "sub")
	if err := os.MkdirAll(filepath.Join(top, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "ph.json")}
	lay, err := reg.Prepare("a", ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Release("a")
	if lay.NoRepository || !slices.ContainsFunc(lay.Guards, func(g plan.Guard) bool { return g.Path == filepath.Join(ws, ".git") && g.Dir }) {
		t.Errorf("a workspace beneath a repository: NoRepository %v, guards %v; want .git guarded as a folder", lay.NoRepository, lay.Guards)
	}
}

// TestHoldHomePlaceholders: Hold creates the missing placeholders beneath their folder, shares
// them between launches, leaves a path that exists (the user's) and one whose folder is missing
// alone, never follows a symlink, and Release removes them when the last holder ends — except
// one somebody wrote to meanwhile.
func TestHoldHomePlaceholders(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := filepath.Join(home, ".agent")
	if err := os.Mkdir(h, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h, "users.json"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(h, "link")); err != nil {
		t.Fatal(err)
	}
	phs := []integrity.Placeholder{
		{Path: filepath.Join(h, "auth.json"), Beneath: h, Private: true},
		{Path: filepath.Join(h, "local"), Dir: true, Beneath: h, Private: true},
		{Path: filepath.Join(h, "users.json"), Beneath: h},
		{Path: filepath.Join(h, "gone", "x"), Beneath: h},
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")}
	a, err := reg.Hold("a", phs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(h, "auth.json"), filepath.Join(h, "local")}
	if !slices.Equal(a, want) {
		t.Errorf("a holds %v, want %v", a, want)
	}
	if got := tree(t, h); !slices.Equal(got, []string{"auth.json", "link", "local", "users.json"}) {
		t.Errorf("home after a's Hold: %v", got)
	}
	if st, err := os.Stat(filepath.Join(h, "local")); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("local is not a private folder placeholder: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Join(h, "auth.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("auth.json is not a private file placeholder: %v %v", st, err)
	}
	if b, err := reg.Hold("b", phs[:2]); err != nil || !slices.Equal(b, want) {
		t.Errorf("b holds %v, %v; want %v", b, err, want)
	}
	if _, err := reg.Hold("c", []integrity.Placeholder{{Path: filepath.Join(h, "link", "planted"), Beneath: h}}); err == nil {
		t.Errorf("a placeholder through a symlink was accepted")
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("a placeholder was created through a symlink: %v", ents)
	}
	if _, err := reg.Release("a"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, h); !slices.Equal(got, []string{"auth.json", "link", "local", "users.json"}) {
		t.Errorf("placeholders gone when a ended, while b holds them: %v", got)
	}
	if err := os.WriteFile(filepath.Join(h, "auth.json"), []byte(`{"token":"the user's login"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Release("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Release("c"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, h); !slices.Equal(got, []string{"auth.json", "link", "users.json"}) {
		t.Errorf("home after the last release: %v, want the user's files and the written auth.json only", got)
	}
	if b, _ := os.ReadFile(filepath.Join(h, "users.json")); string(b) != "mine" {
		t.Errorf("the user's users.json became %q", b)
	}
}

// TestRegistryWritesOnlyChanges guards the launch path's speed: a launch that holds no
// placeholder (most launches) leaves the registry file as it was, rather than paying an fsync
// of the file and of its folder at its prepare, its hold and its release; a launch that does
// hold one still writes it.
func TestRegistryWritesOnlyChanges(t *testing.T) {
	ws := t.TempDir()
	home := t.TempDir()
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")}
	quiet := func(launch string) {
		t.Helper()
		if _, err := reg.Prepare(launch, ws, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := reg.Hold(launch, nil); err != nil || len(got) != 0 {
			t.Fatalf("hold nothing: %v %v", got, err)
		}
		if _, err := reg.Held(launch); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Holders(); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Release(launch); err != nil {
			t.Fatal(err)
		}
	}
	quiet("first")
	if _, err := os.Lstat(reg.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a launch without placeholders on a new registry wrote it: %v", err)
	}
	ph := []integrity.Placeholder{{Path: filepath.Join(home, "auth.json"), Beneath: home, Private: true}}
	if got, err := reg.Hold("holder", ph); err != nil || len(got) != 1 {
		t.Fatalf("hold: %v %v", got, err)
	}
	inode := func() uint64 {
		t.Helper()
		st, err := os.Lstat(reg.Path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	before := inode()
	quiet("second")
	if after := inode(); after != before {
		t.Errorf("a launch without placeholders rewrote the registry (inode %d, then %d)", before, after)
	}
	if _, err := reg.Release("holder"); err != nil {
		t.Fatal(err)
	}
	if inode() == before {
		t.Errorf("releasing a held placeholder did not rewrite the registry")
	}
	if _, err := os.Lstat(ph[0].Path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("placeholder left after its last holder ended: %v", err)
	}
}

// TestRegistryBoxMadeRepository: while a launch started in a workspace in no repository runs,
// the repository at that workspace's top is a box's for every launch started there
// (NoRepository, its .git neither pinned nor a root), a launch in a folder beneath it is
// refused, and once every launch there has ended (or for a daemon that resumed the first,
// HoldBoxRepo) the next launch pins it as the user's (review 22,
// TestAttackSecondLaunchTrustsBoxRepo: the second launch took it for the user's).
func TestRegistryBoxMadeRepository(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !integrity.SurelyNoRepository(ws) {
		t.Skipf("%s lies beneath a .git or a HEAD", ws)
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "ph.json")}
	prepare := func(launch, dir string) *integrity.Layout {
		t.Helper()
		lay, err := reg.Prepare(launch, dir, nil)
		if err != nil {
			t.Fatalf("prepare %s: %v", launch, err)
		}
		return lay
	}
	pinned := func(lay *integrity.Layout) bool {
		return slices.ContainsFunc(lay.Roots, func(r integrity.Root) bool { return r.Path == filepath.Join(ws, ".git") })
	}
	if lay := prepare("first", ws); !lay.NoRepository {
		t.Fatal("a workspace in no repository: NoRepository false")
	}
	// The first box makes the repository.
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if lay := prepare("second", ws); !lay.NoRepository || pinned(lay) {
		t.Errorf("beside the first: NoRepository %v, .git a root %v; want the repository the box's", lay.NoRepository, pinned(lay))
	}
	if _, err := reg.Prepare("beneath", filepath.Join(ws, "sub"), nil); err == nil || !strings.Contains(err.Error(), "no git repository when launch first") {
		t.Errorf("a launch beneath the workspace: %v, want refused naming the first launch", err)
	}
	// A repository of the user's beneath it, with a .git of its own: git's there, not refused.
	own := filepath.Join(ws, "own")
	if out, err := exec.Command("git", "init", "-q", own).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if _, err := reg.Prepare("own", own, nil); err != nil {
		t.Errorf("a launch in a repository of its own beneath the workspace: %v", err)
	}
	reg.Release("own")
	reg.Release("first")
	if lay := prepare("third", ws); !lay.NoRepository {
		t.Error("while the second launch runs: the repository taken for the user's")
	}
	reg.Release("second")
	reg.Release("third")
	if lay := prepare("fourth", ws); lay.NoRepository || !pinned(lay) {
		t.Errorf("once every launch there ended: NoRepository %v, .git a root %v; want it pinned as the user's", lay.NoRepository, pinned(lay))
	}
	reg.Release("fourth")
	// A restarted daemon learns it from the state of the launch it resumes.
	reg2 := &integrity.Registry{Path: reg.Path}
	reg2.HoldBoxRepo("resumed", ws)
	if lay, err := reg2.Prepare("fifth", ws, nil); err != nil || !lay.NoRepository {
		t.Errorf("beside a resumed launch: %v (NoRepository %v); want the repository the box's", err, err == nil && lay.NoRepository)
	}
}
