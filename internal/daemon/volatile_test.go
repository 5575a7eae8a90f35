package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVolatileRecords: a box cache's volatile record is written once, naming this boot, before
// its layers may be volatile; a record of another boot (the host went down) empties the cache's
// volatile layers at the daemon's start, never a dependency folder's layer, and follows no
// symlink a box planted; a record of another boot that could not be reset fails the launch
// with the fix; a clean stop drops the records of caches no launch uses.
func TestVolatileRecords(t *testing.T) {
	state, victim := t.TempDir(), t.TempDir()
	var logs bytes.Buffer
	v := &volatileCaches{stateDir: state, log: slog.New(slog.NewTextHandler(&logs, nil))}
	cache, err := makeBoxCache(state, "/ws")
	if err != nil {
		t.Fatal(err)
	}
	boot, err := v.bootID()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"npm/upper/a", "python/upper/b", "dep-0011223344556677-node_modules/upper/c", "cargo/target/d"} {
		if err := os.MkdirAll(filepath.Join(cache, filepath.Dir(p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "pip"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(cache, "pip", "upper")); err != nil {
		t.Fatal(err)
	}

	if ok, err := v.note(cache); !ok || err != nil {
		t.Fatalf("note: %v %v, want the layers volatile", ok, err)
	}
	if b, err := os.ReadFile(v.record(cache)); err != nil || string(b) != boot+"\n" {
		t.Fatalf("record: %q %v, want %q", b, err, boot)
	}
	v.recover() // this boot's record: a daemon's restart, nothing reset
	if _, err := os.Stat(filepath.Join(cache, "npm", "upper", "a")); err != nil || logs.Len() != 0 {
		t.Fatalf("a record of this boot reset the cache: %v\n%s", err, logs.String())
	}

	// The host went down.
	if err := os.WriteFile(v.record(cache), []byte("another-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := &volatileCaches{stateDir: state, log: v.log} // the next boot's daemon
	if ok, err := other.note(cache); ok || err == nil || !strings.Contains(err.Error(), "rm -rf "+cache) {
		t.Errorf("note over another boot's record: %v %v, want a refusal saying how to reset the cache", ok, err)
	}
	other.recover()
	for p, want := range map[string]bool{"npm/upper": false, "python/upper": false, "pip/upper": false,
		"dep-0011223344556677-node_modules/upper/c": true, "cargo/target/d": true} {
		if _, err := os.Lstat(filepath.Join(cache, p)); (err == nil) != want {
			t.Errorf("%s after the reset: %v, want it there: %v", p, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("the reset followed the planted symlink: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "the host went down") {
		t.Errorf("the reset was not said in the log:\n%s", logs.String())
	}
	if _, err := os.Lstat(v.record(cache)); !os.IsNotExist(err) {
		t.Errorf("the record after the reset: %v, want it gone", err)
	}

	// A clean stop: a cache with a launch's work folder keeps its record, one without drops it.
	if ok, err := other.note(cache); !ok || err != nil {
		t.Fatalf("note after the reset: %v %v", ok, err)
	}
	if err := os.MkdirAll(filepath.Join(cache, boxWorkDir, "launch1"), 0o700); err != nil {
		t.Fatal(err)
	}
	other.flush()
	if _, err := os.Stat(other.record(cache)); err != nil {
		t.Errorf("a cache a launch still uses lost its record at the stop: %v", err)
	}
	if err := os.Remove(filepath.Join(cache, boxWorkDir, "launch1")); err != nil {
		t.Fatal(err)
	}
	other.flush()
	if _, err := os.Stat(other.record(cache)); !os.IsNotExist(err) {
		t.Errorf("a cache no launch uses kept its record at the stop: %v", err)
	}
}
