package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestGoProxyNoUserinfo: the userinfo of every GOPROXY entry is removed, whichever separator
// follows it; every other entry (direct, off, file://, a host without userinfo, a path with
// an @ in it) is kept byte for byte.
func TestGoProxyNoUserinfo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://alice:token@goproxy.corp.example/", "https://goproxy.corp.example/"},
		{"https://alice:token@a.example/p,https://b.example|https://bob@c.example:8443/x?y=1,direct",
			"https://a.example/p,https://b.example|https://c.example:8443/x?y=1,direct"},
		{"https://u:p%40ss@registry.example.org", "https://registry.example.org"},
		{"u:p@registry.example.org/go,off", "registry.example.org/go,off"},
		{"file:///home/u/go/pkg/mod/cache/download,https://registry.example.org/m@v", "file:///home/u/go/pkg/mod/cache/download,https://registry.example.org/m@v"},
		{"direct", "direct"},
		{"off", "off"},
		{"", ""},
	} {
		if got := goProxyNoUserinfo(c.in); got != c.want {
			t.Errorf("goProxyNoUserinfo(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestToolchainsGoProxyNoCredentials: the GOPROXY the box gets carries no userinfo, from the
// caller's environment as from the host's go env; the rest of the list is intact.
func TestToolchainsGoProxyNoCredentials(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	home := t.TempDir()
	var c plan.Contributions
	env := []string{"GOPROXY=https://alice:SECRET@goproxy.corp.example/,direct", "GOMODCACHE=" + filepath.Join(home, "none")}
	if err := d.toolchains("launch1", "/ws", "", home, "", env, plan.WorkspaceFacts{}, &c); err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, kv := range c.Env {
		if strings.HasPrefix(kv, "GOPROXY=") {
			got = kv
		}
	}
	if got != "GOPROXY=https://goproxy.corp.example/,direct" {
		t.Errorf("the box's %q, want GOPROXY=https://goproxy.corp.example/,direct", got)
	}
}

// TestBoxCachePerWorkspace: each workspace has its own box cache, 0700, the same for every
// launch in that workspace and bound at its own path; another workspace's is not bound.
func TestBoxCachePerWorkspace(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	home := t.TempDir()
	binds := func(ws string) []string {
		var c plan.Contributions
		if err := d.toolchains("launch1", ws, "", home, "", []string{"GOPROXY=off"}, plan.WorkspaceFacts{}, &c); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range c.Mounts {
			if strings.HasPrefix(m.Target, d.stateDir) {
				out = append(out, m.Source)
			}
		}
		return out
	}
	a, a2, b := binds("/work/a"), binds("/work/a"), binds("/work/b")
	if len(a) != 1 || len(b) != 1 || len(a2) != 1 {
		t.Fatalf("binds of the state dir: %v, %v, %v; want one each", a, a2, b)
	}
	if a[0] != a2[0] || a[0] == b[0] || a[0] == filepath.Join(d.stateDir, boxCacheDir) {
		t.Errorf("box caches: a %s, a again %s, b %s; want a stable per-workspace folder", a[0], a2[0], b[0])
	}
	for _, p := range []string{filepath.Dir(a[0]), a[0], b[0]} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 folder", p, st.Mode(), err)
		}
	}
}

// TestGoEnvGoProxyOutsideWorkspace: the host's go is asked in "/" with GOTOOLCHAIN=local,
// whatever the daemon's cwd and environment (a go stand-in on PATH records both).
func TestGoEnvGoProxyOutsideWorkspace(t *testing.T) {
	bin, rec := t.TempDir(), filepath.Join(t.TempDir(), "rec")
	script := "#!/bin/sh\necho \"$(pwd) $GOTOOLCHAIN $*\" > " + rec + "\necho https://registry.example.org\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("GOTOOLCHAIN", "go1.99.0")
	t.Chdir(t.TempDir())
	if got := goEnvGoProxy(); got != "https://registry.example.org" {
		t.Errorf("goEnvGoProxy() = %q", got)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "/ local env GOPROXY" {
		t.Errorf("go ran as %q, want \"/ local env GOPROXY\" (cwd, GOTOOLCHAIN, args)", got)
	}
}

// TestCacheOverlays: a package cache the host has (~/.npm) is an overlay of the host's folder
// under the box cache's layer; one it has not (~/.cache/pip here) is the layer alone; both are
// writable in the box. A symlink a box left where a layer belongs is removed, not followed:
// the folder it pointed at gets nothing, and the layer is a folder of the box cache again.
func TestCacheOverlays(t *testing.T) {
	home, cache, victim := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".npm"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(cache, "pip"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(cache, "pip", "upper")); err != nil {
		t.Fatal(err)
	}
	var c plan.Contributions
	if err := cacheOverlays(cache, "launch1", homeCaches(home), nil, plan.WorkspaceFacts{Home: home}, nil, &c); err != nil {
		t.Fatal(err)
	}
	got := map[string]plan.Mount{}
	for _, m := range c.Mounts {
		got[m.Target] = m
	}
	npm, pip := got[filepath.Join(home, ".npm")], got[filepath.Join(home, ".cache", "pip")]
	if npm.Kind != plan.MountOverlay || npm.Source != filepath.Join(home, ".npm") || npm.Upper != filepath.Join(cache, "npm", "upper") ||
		npm.Work != filepath.Join(cache, "work", "launch1", "npm") || npm.Beneath != cache || npm.ReadOnly {
		t.Errorf("npm: %+v, want an overlay of ~/.npm under <cache>/npm/upper with the launch's own work folder, beneath the cache", npm)
	}
	if pip.Kind != plan.MountBind || pip.Source != filepath.Join(cache, "pip", "upper") || pip.Beneath != cache || pip.ReadOnly {
		t.Errorf("pip: %+v, want the box cache's layer alone, bound beneath the cache", pip)
	}
	for _, p := range []string{npm.Target, pip.Target} {
		if !slices.Contains(c.ReadWrite, p) {
			t.Errorf("%s is not writable in the box (Landlock): %v", p, c.ReadWrite)
		}
	}
	if st, err := os.Lstat(filepath.Join(cache, "pip", "upper")); err != nil || !st.IsDir() {
		t.Errorf("the planted symlink is still the pip layer: %v %v", st, err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Errorf("the folder the planted symlink named got %v", ents)
	}
}

// TestToolchainsCargoHome: with ~/.cargo/bin on PATH, ~/.cargo is an overlay of the host's
// cargo home under the box cache's cargo layer (the host's read-only when no overlay can be
// built), ~/.cargo/bin and ~/.rustup are bound read-only over and beside it, its credentials
// files are masked, and a file a box left in the layer where ~/.cargo/bin is mounted is
// removed. Before, ~/.cargo was bound read-only as a whole: cargo could not extract a crate
// the host had only downloaded, nor keep anything for the next box.
func TestToolchainsCargoHome(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	home := t.TempDir()
	for _, p := range []string{".cargo/bin", ".rustup/toolchains"} {
		if err := os.MkdirAll(filepath.Join(home, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cargo, bin := filepath.Join(home, ".cargo"), filepath.Join(home, ".cargo", "bin")
	layer := filepath.Join(boxCache(d.stateDir, "/ws"), "cargo", "upper")
	if err := os.MkdirAll(layer, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "bin"), []byte("planted"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c plan.Contributions
	env := []string{"PATH=" + bin + ":/usr/bin", "GOPROXY=off"}
	if err := d.toolchains("launch1", "/ws", "", home, "", env, plan.WorkspaceFacts{Home: home}, &c); err != nil {
		t.Fatal(err)
	}
	got := map[string][]plan.Mount{}
	for _, m := range c.Mounts {
		got[m.Target] = append(got[m.Target], m)
	}
	if ms := got[cargo]; len(ms) != 1 || ms[0].Kind != plan.MountOverlay || ms[0].Source != cargo || ms[0].Upper != layer ||
		!ms[0].LowerFallback || ms[0].ReadOnly {
		t.Errorf("~/.cargo: %+v, want one overlay of the host's ~/.cargo under %s, the host's read-only as its fallback", ms, layer)
	}
	for _, p := range []string{bin, filepath.Join(home, ".rustup")} {
		if ms := got[p]; len(ms) != 1 || ms[0].Kind != plan.MountBind || ms[0].Source != p || !ms[0].ReadOnly {
			t.Errorf("%s: %+v, want a read-only bind of the host's", p, ms)
		}
		if !slices.Contains(c.ReadOnly, p) {
			t.Errorf("%s is not in Landlock's read-only set %v", p, c.ReadOnly)
		}
	}
	for _, f := range []string{"credentials", "credentials.toml"} {
		if ms := got[filepath.Join(cargo, f)]; len(ms) != 1 || ms[0].Kind != plan.MountMask {
			t.Errorf("~/.cargo/%s: %+v, want it masked", f, ms)
		}
	}
	if !slices.Contains(c.ReadWrite, cargo) {
		t.Errorf("~/.cargo is not writable in the box (Landlock): %v", c.ReadWrite)
	}
	if _, err := os.Lstat(filepath.Join(layer, "bin")); err == nil {
		t.Errorf("the file planted at the layer's bin/ is still there: it would stand where ~/.cargo/bin is mounted")
	}
}

// TestToolchainsBuildOutputInBoxCache: the box's cargo and python write what they build from
// the workspace into the workspace's box cache (CARGO_TARGET_DIR, PYTHONPYCACHEPREFIX), never
// beside the sources, where the host's cargo and python would run it (review finding F2; e2e
// TestCargoBuildFromHostCache and TestPipInstallFromHostCache are the attacks).
func TestToolchainsBuildOutputInBoxCache(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	var c plan.Contributions
	if err := d.toolchains("launch1", "/ws", "", t.TempDir(), "", []string{"GOPROXY=off"}, plan.WorkspaceFacts{}, &c); err != nil {
		t.Fatal(err)
	}
	cache := boxCache(d.stateDir, "/ws")
	for key, want := range map[string]string{
		"CARGO_TARGET_DIR":    filepath.Join(cache, "cargo", "target"),
		"PYTHONPYCACHEPREFIX": filepath.Join(cache, "python", "pycache"),
		// Not build output: npm's daily check for a newer npm is off (e2e TestNpmNoUpdateCheck).
		"npm_config_update_notifier": "false",
	} {
		if got := envValue(c.Env, key); got != want {
			t.Errorf("the box's %s is %q, want %q", key, got, want)
		}
	}
}

// TestToolchainsGoBuildCache: the box's GOCACHE is go's default place in the home, an overlay
// of the host's ~/.cache/go-build under the box cache's go-build layer (the host's entries are
// hits, its folder is never written) that falls back to the layer alone, not to the host's
// folder read-only, which go refuses; with no host build cache, the layer alone. Before, the
// box's GOCACHE was an empty folder of the box cache.
func TestToolchainsGoBuildCache(t *testing.T) {
	for _, hostHas := range []bool{true, false} {
		d := &Daemon{stateDir: t.TempDir()}
		home := t.TempDir()
		gocache := filepath.Join(home, ".cache", "go-build")
		if hostHas {
			if err := os.MkdirAll(gocache, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		var c plan.Contributions
		if err := d.toolchains("launch1", "/ws", "", home, "", []string{"GOPROXY=off"}, plan.WorkspaceFacts{Home: home}, &c); err != nil {
			t.Fatal(err)
		}
		if got := envValue(c.Env, "GOCACHE"); got != gocache {
			t.Errorf("host has a build cache %v: the box's GOCACHE is %q, want %q", hostHas, got, gocache)
		}
		layer := filepath.Join(boxCache(d.stateDir, "/ws"), "go-build", "upper")
		var ms []plan.Mount
		for _, m := range c.Mounts {
			if m.Target == gocache {
				ms = append(ms, m)
			}
		}
		want := plan.Mount{Kind: plan.MountBind, Source: layer, Target: gocache, Beneath: boxCache(d.stateDir, "/ws")}
		if hostHas {
			want = plan.Mount{Kind: plan.MountOverlay, Source: gocache, Upper: layer, Work: filepath.Join(boxCache(d.stateDir, "/ws"), "work", "launch1", "go-build"),
				Target: gocache, Beneath: want.Beneath, Optional: true}
		}
		if len(ms) != 1 || !reflect.DeepEqual(ms[0], want) {
			t.Errorf("host has a build cache %v: mounts at %s: %+v, want %+v", hostHas, gocache, ms, want)
		}
		if !slices.Contains(c.ReadWrite, gocache) {
			t.Errorf("%s is not writable in the box (Landlock): %v", gocache, c.ReadWrite)
		}
	}
}

// TestToolchainsGoModCache: the box's GOMODCACHE is the host's module cache's own path, an
// overlay of the host's folder under the box cache's gomod layer that falls back to the layer
// alone; the host's downloads are also bound read-only at hostGoProxyView, GOPROXY's first
// entry (from there a box without the overlay extracts each module at the host's path again).
// A module cache reached through a symlink keeps the box cache's own module cache, with the
// host's read-only as the first proxy. Before, the box's GOMODCACHE was always the box
// cache's go/mod: a module's folder differed from the host's, and so did every build cache
// key of its packages (e2e TestGoBuildFromHostCache).
func TestToolchainsGoModCache(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	home := t.TempDir()
	mc := filepath.Join(home, "go", "pkg", "mod")
	if err := os.MkdirAll(filepath.Join(mc, "cache", "download"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOPROXY=https://registry.example.org,direct"}
	var c plan.Contributions
	if err := d.toolchains("launch1", "/ws", "", home, "", env, plan.WorkspaceFacts{Home: home}, &c); err != nil {
		t.Fatal(err)
	}
	cache := boxCache(d.stateDir, "/ws")
	if got := envValue(c.Env, "GOMODCACHE"); got != mc {
		t.Errorf("the box's GOMODCACHE is %q, want the host's path %q", got, mc)
	}
	if got, want := envValue(c.Env, "GOPROXY"), "file://"+hostGoProxyView+",https://registry.example.org,direct"; got != want {
		t.Errorf("the box's GOPROXY is %q, want %q", got, want)
	}
	got := map[string][]plan.Mount{}
	for _, m := range c.Mounts {
		got[m.Target] = append(got[m.Target], m)
	}
	want := plan.Mount{Kind: plan.MountOverlay, Source: mc, Upper: filepath.Join(cache, "gomod", "upper"),
		Work: filepath.Join(cache, "work", "launch1", "gomod"), Target: mc, Beneath: cache, Optional: true}
	if ms := got[mc]; len(ms) != 1 || !reflect.DeepEqual(ms[0], want) {
		t.Errorf("mounts at %s: %+v, want %+v", mc, ms, want)
	}
	view := plan.Mount{Kind: plan.MountBind, Source: filepath.Join(mc, "cache", "download"), Target: hostGoProxyView, ReadOnly: true, Optional: true}
	if ms := got[hostGoProxyView]; len(ms) != 1 || !reflect.DeepEqual(ms[0], view) {
		t.Errorf("mounts at %s: %+v, want %+v", hostGoProxyView, ms, view)
	}
	if !slices.Contains(c.ReadWrite, mc) || !slices.Contains(c.ReadOnly, hostGoProxyView) {
		t.Errorf("Landlock: %s must be writable (%v), %s read-only (%v)", mc, c.ReadWrite, hostGoProxyView, c.ReadOnly)
	}

	// The module cache through a symlink: the box cache's own, the host's read-only below.
	link := filepath.Join(t.TempDir(), "mod")
	if err := os.Symlink(mc, link); err != nil {
		t.Fatal(err)
	}
	c = plan.Contributions{}
	if err := d.toolchains("launch1", "/ws", "", home, "", append(env, "GOMODCACHE="+link), plan.WorkspaceFacts{Home: home}, &c); err != nil {
		t.Fatal(err)
	}
	if got := envValue(c.Env, "GOMODCACHE"); got != filepath.Join(cache, "go", "mod") {
		t.Errorf("symlinked module cache: the box's GOMODCACHE is %q, want the box cache's", got)
	}
	if got := envValue(c.Env, "GOPROXY"); !strings.HasPrefix(got, "file://"+filepath.Join(link, "cache", "download")+",") {
		t.Errorf("symlinked module cache: the box's GOPROXY is %q", got)
	}
	for _, m := range c.Mounts {
		if m.Target == link && (m.Kind != plan.MountBind || !m.ReadOnly) {
			t.Errorf("symlinked module cache: %+v, want a read-only bind", m)
		}
	}
}

// TestToolchainsGoBuildSettings: the box gets the settings that decide what the host's go
// builds, from the caller's environment first, else from the user's go env file (`go env -w`),
// and nothing else of that file (a proxy's credentials, GOAUTH); GOENV=off and a go env file
// in the workspace are not read.
func TestToolchainsGoBuildSettings(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	file := "GOFLAGS=-buildvcs=false -trimpath\nCGO_ENABLED=0\nGOAMD64=v3\nGOPROXY=https://u:SECRET@registry.example.org\nGOAUTH=netrc\n"
	write := func(path string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write(filepath.Join(home, ".config", "go", "env"))
	cfg := t.TempDir()
	write(filepath.Join(cfg, "go", "env"))
	inWs := write(filepath.Join(ws, "goenv"))
	toWs := filepath.Join(t.TempDir(), "env")
	if err := os.Symlink(inWs, toWs); err != nil {
		t.Fatal(err)
	}
	fromFile := []string{"CGO_ENABLED=0", "GOFLAGS=-buildvcs=false -trimpath", "GOAMD64=v3"}
	for _, c := range []struct {
		name string
		env  []string
		want []string
	}{
		{"the home's go env file", nil, fromFile},
		{"the configuration folder's", []string{"XDG_CONFIG_HOME=" + cfg}, fromFile},
		{"the environment first", []string{"CGO_ENABLED=1", "GOEXPERIMENT=", "GOFLAGS=-mod=mod"},
			[]string{"CGO_ENABLED=1", "GOFLAGS=-mod=mod", "GOEXPERIMENT=", "GOAMD64=v3"}},
		{"GOENV=off", []string{"GOENV=off", "CGO_ENABLED=0"}, []string{"CGO_ENABLED=0"}},
		{"a go env file in the workspace", []string{"GOENV=" + inWs}, nil},
		{"a symlink into the workspace", []string{"GOENV=" + toWs}, nil},
		{"no go env file", []string{"GOENV=" + filepath.Join(home, "none")}, nil},
	} {
		var tc plan.Contributions
		d := &Daemon{stateDir: t.TempDir()}
		if err := d.toolchains("launch1", ws, "", home, "", append([]string{"GOPROXY=off"}, c.env...), plan.WorkspaceFacts{}, &tc); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range tc.Env {
			k, _, _ := strings.Cut(kv, "=")
			if slices.Contains(goSettingKeys, k) {
				got = append(got, kv)
			}
			if k == "GOAUTH" || strings.Contains(kv, "SECRET") {
				t.Errorf("%s: the box got %q from the go env file", c.name, kv)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: the box's go settings %q, want %q", c.name, got, c.want)
		}
	}
}

// TestLaunchWorkFolders: two launches of one workspace share each cache's upper layer and
// never a work folder (the kernel empties a work folder when it mounts an overlay on it: a
// box starting beside another broke the other's overlays). A launch's work folders, with the
// kernel's mode-0 work/ inside, go when it ends; the start-up sweep removes those of launches
// the daemon does not know and keeps the others; a symlink planted for the folder of work
// folders leads the removal nowhere.
func TestLaunchWorkFolders(t *testing.T) {
	home, cache, victim := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".npm"), 0o700); err != nil {
		t.Fatal(err)
	}
	mounts := map[string]plan.Mount{}
	for _, id := range []string{"launch1", "launch2"} {
		var c plan.Contributions
		if err := cacheOverlays(cache, id, homeCaches(home), nil, plan.WorkspaceFacts{Home: home}, nil, &c); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.Mounts {
			if m.Target == filepath.Join(home, ".npm") {
				mounts[id] = m
			}
		}
	}
	a, b := mounts["launch1"], mounts["launch2"]
	if a.Upper != b.Upper || a.Work == b.Work {
		t.Fatalf("two launches' npm overlays: upper %s and %s, work %s and %s; want one upper, two work folders", a.Upper, b.Upper, a.Work, b.Work)
	}
	for _, w := range []string{a.Work, b.Work} {
		if st, err := os.Lstat(w); err != nil || !st.IsDir() {
			t.Fatalf("work folder %s: %v %v", w, st, err)
		}
		// What the kernel leaves: work/ at mode 0, here with a file in it.
		if err := os.MkdirAll(filepath.Join(w, "work", "d"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w, "work", "d", "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{filepath.Join(w, "work", "d"), filepath.Join(w, "work")} {
			if err := os.Chmod(p, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := removeLaunchWork(cache, "launch1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(cache, "work", "launch1")); !os.IsNotExist(err) {
		t.Errorf("launch1's work folders after its end: %v", err)
	}
	if _, err := os.Lstat(b.Work); err != nil {
		t.Errorf("launch2's work folder went with launch1's: %v", err)
	}
	if err := removeLaunchWork(cache, "launch2"); err != nil {
		t.Errorf("launch2's work folders at its end: %v", err)
	}

	state := t.TempDir()
	ws1, ws2 := boxCache(state, "/ws1"), boxCache(state, "/ws2")
	for _, p := range []string{filepath.Join(ws1, "work", "live", "npm"), filepath.Join(ws1, "work", "gone", "npm", "work"), filepath.Join(ws2, "work", "gone2", "pip")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(ws1, "work", "gone", "npm", "work"), 0)
	// A box cache whose folder of work folders a box replaced with a symlink to a host folder
	// holding a folder of a launch's name.
	ws3 := boxCache(state, "/ws3")
	if err := os.MkdirAll(ws3, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(victim, "gone3"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(ws3, "work")); err != nil {
		t.Fatal(err)
	}
	err := sweepLaunchWork(state, func(id string) bool { return id == "live" })
	if err == nil {
		t.Errorf("the sweep followed the planted symlink without an error")
	}
	if _, err := os.Lstat(filepath.Join(ws1, "work", "live", "npm")); err != nil {
		t.Errorf("a known launch's work folder was swept: %v", err)
	}
	for _, p := range []string{filepath.Join(ws1, "work", "gone"), filepath.Join(ws2, "work", "gone2")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the sweep: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(victim, "gone3")); err != nil {
		t.Errorf("the sweep removed a host folder through a planted symlink: %v", err)
	}
}

// TestProgramCaches: a profile's cache entry (Copilot CLI's ~/.cache/copilot) is an overlay of
// the host's folder under its layer in the workspace's box cache, writable in the box; without
// the host's folder it is the layer alone; another workspace's boxes get another layer.
func TestProgramCaches(t *testing.T) {
	d := &Daemon{stateDir: t.TempDir()}
	home := t.TempDir()
	host := filepath.Join(home, ".cache", "copilot")
	mount := func(ws string) plan.Mount {
		t.Helper()
		var c plan.Contributions
		if err := d.programCaches("launch1", ws, home, []string{".cache/copilot"}, plan.WorkspaceFacts{Home: home}, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Mounts) != 1 || c.Mounts[0].Target != host || !slices.Equal(c.ReadWrite, []string{host}) {
			t.Fatalf("mounts %+v, read-write %v: want one mount at %s, writable", c.Mounts, c.ReadWrite, host)
		}
		return c.Mounts[0]
	}
	layer := filepath.Join(boxCache(d.stateDir, "/ws"), programCacheLayer(".cache/copilot"))
	if m := mount("/ws"); m.Kind != plan.MountBind || m.Source != filepath.Join(layer, "upper") || m.ReadOnly {
		t.Errorf("without the host's folder: %+v, want the layer %s/upper alone", m, layer)
	}
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if m := mount("/ws"); m.Kind != plan.MountOverlay || m.Source != host || m.Upper != filepath.Join(layer, "upper") ||
		m.Work != filepath.Join(boxCache(d.stateDir, "/ws"), launchWorkDir("launch1"), programCacheLayer(".cache/copilot")) || m.ReadOnly {
		t.Errorf("with the host's folder: %+v, want an overlay of %s under %s/upper", m, host, layer)
	}
	if m := mount("/other"); plan.Within(m.Upper, boxCache(d.stateDir, "/ws")) {
		t.Errorf("another workspace's box gets the first one's layer: %+v", m)
	}
	if n := programCacheLayer(".cache/copilot"); !strings.HasPrefix(n, "home-") || !strings.HasSuffix(n, "-copilot") {
		t.Errorf("layer name %q", n)
	}
}
