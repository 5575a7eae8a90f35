package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBoxCacheVolatileCrashReset: the box caches' overlays are mounted volatile (the host's
// disk is not synced at each box's end), a dependency folder's overlay is not (its content is
// the user's), and a box cache whose volatile layers the host's crash may have torn is emptied
// at the daemon's next start, said in its log, never used as it is (docs/toolchains.md, "The
// box caches' durability"). The crash is planted as it would leave the cache: the daemon's
// record of the cache naming another boot, and a launch's work folder holding the kernel's
// marker work/incompat/volatile.
func TestBoxCacheVolatileCrashReset(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	e := NewEnv(t)
	npm := filepath.Join(e.Home, ".npm")
	deps := filepath.Join(e.Work, "node_modules")
	for _, d := range []string{npm, filepath.Join(deps, "dep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		filepath.Join(npm, "host"):            "host\n",
		filepath.Join(e.Work, "package.json"): `{"name":"app","version":"1.0.0"}` + "\n",
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The box writes into both; each overlay's line of its mountinfo says how it is mounted.
	r := e.Box(`echo box > ~/.npm/boxed && echo box > node_modules/dep/boxed &&
awk -v npm="` + npm + `" -v deps="` + deps + `" '$5 == npm || $5 == deps { print $5, ($0 ~ /volatile/ ? "volatile" : "synced") }' /proc/self/mountinfo`)
	if r.Code != 0 {
		t.Fatalf("box: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, want := range []string{npm + " volatile", deps + " synced"} {
		if !strings.Contains(r.Stdout, want+"\n") {
			t.Errorf("the box's mounts say %q, want a line %q", r.Stdout, want)
		}
	}
	caches, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "npm"))
	if len(caches) != 1 {
		t.Fatalf("box caches with an npm layer: %v", caches)
	}
	cache := filepath.Dir(caches[0])
	record := filepath.Join(e.State, "agentbox", "cache-volatile", filepath.Base(cache))
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(record); err != nil || string(b) != string(boot) {
		t.Fatalf("the cache's volatile record: %q, %v; want the boot id %q", b, err, boot)
	}
	boxed := filepath.Join(cache, "npm", "upper", "boxed")
	if _, err := os.Stat(boxed); err != nil {
		t.Fatalf("the box's write to ~/.npm is not in the cache's layer: %v", err)
	}
	// A clean stop syncs the caches no box uses and drops their records (once the launch's
	// work folders are gone: a launch still settling keeps its cache's record).
	eventually(t, "the launch's work folders to be removed", func() bool {
		ents, err := os.ReadDir(filepath.Join(cache, "work"))
		return err == nil && len(ents) == 0
	})
	if r := e.Run("", "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: %+v", r)
	}
	if _, err := os.Lstat(record); !os.IsNotExist(err) {
		t.Fatalf("the volatile record is still there after a clean stop: %v", err)
	}

	// The host's crash, as it leaves the cache: the record of a boot that is not this one, and
	// a launch's work folder with the kernel's marker (its work/ folder is mode 0).
	if err := os.WriteFile(record, []byte("00000000-0000-4000-8000-000000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(cache, "work", strings.Repeat("0", 32), "npm", "work", "incompat", "volatile", "dirty")
	if err := os.MkdirAll(marker, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(cache, "work", strings.Repeat("0", 32), "npm", "work"), 0); err != nil {
		t.Fatal(err)
	}
	r = e.Box(`ls ~/.npm; cat node_modules/dep/boxed`)
	if r.Code != 0 {
		t.Fatalf("box after the crash: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "boxed\n") || !strings.Contains(r.Stdout, "host\n") {
		t.Errorf("after the crash the box's ~/.npm holds %q: want the host's file alone (the cache's layer emptied)", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "box\n") {
		t.Errorf("after the crash the dependency folder lost what the box wrote (%q): it is not a cache, and never volatile", r.Stdout)
	}
	log, _ := os.ReadFile(filepath.Join(e.State, "agentbox", "daemon.log"))
	if !strings.Contains(string(log), "the host went down while this cache's layers were mounted without sync") || !regexp.MustCompile(`layers="\[([^\]]* )?npm[ \]]`).MatchString(string(log)) {
		t.Errorf("the daemon's log does not say it reset the cache's npm layer:\n%s", log)
	}
	if b, err := os.ReadFile(record); err != nil || string(b) != string(boot) {
		t.Errorf("the record after the reset: %q, %v; want this boot's id again", b, err)
	}
	if _, err := os.Lstat(marker); !os.IsNotExist(err) {
		t.Errorf("the crashed launch's work folder is still there: %v", err)
	}
}
