package testenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// proofs are the readiness proofs the daemons of this test process wrote, by the configuration
// hash in their key, with how many environments wrote each (ShareReadiness).
var proofs struct {
	sync.Mutex
	byConfig map[string][]byte
	seen     map[string]int
}

// ShareReadiness lets the daemons of a test process's environments start as a returning user's
// does, from a cached readiness proof, rather than each probing the host with a box of its own:
// it writes to path, the proof file of the environment's state folder (readiness.CacheFile in
// $XDG_STATE_HOME/agentbox), the proof earlier environments' daemons wrote most often, and when
// the test ends it keeps the environment's own. A daemon uses a proof only when its key (engine,
// whole configuration, kernel and boot, binaries) is its own; otherwise it probes as before and
// writes its own. The suites that test the probe itself (internal/readiness, internal/daemon)
// do not call this.
func ShareReadiness(t testing.TB, path string) {
	t.Helper()
	proofs.Lock()
	var b []byte
	for cfg, n := range proofs.seen {
		if b == nil || n > proofs.seen[configOf(b)] {
			b = proofs.byConfig[cfg]
		}
	}
	proofs.Unlock()
	if b != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		cfg := configOf(b)
		if cfg == "" {
			return
		}
		proofs.Lock()
		defer proofs.Unlock()
		if proofs.byConfig == nil {
			proofs.byConfig, proofs.seen = map[string][]byte{}, map[string]int{}
		}
		proofs.byConfig[cfg] = b
		proofs.seen[cfg]++
	})
}

// configOf returns the configuration hash in a proof file's key, "" when it has none.
func configOf(b []byte) string {
	var e struct {
		Key struct {
			Config string `json:"config"`
		} `json:"key"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return e.Key.Config
}
