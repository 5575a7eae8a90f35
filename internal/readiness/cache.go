package readiness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/config"
)

// CacheFile is the positive-result cache in the state directory.
const CacheFile = "readiness.json"

// Key identifies what a positive result proves: it holds while none of its parts changes.
type Key struct {
	Engine string `json:"engine"`
	// Config is a hash of the effective configuration.
	Config string `json:"config"`
	// Kernel is the kernel release and build, the boot id, and the sysctls and LSMs the box
	// depends on (so a reboot or a changed user.max_user_namespaces probes again).
	Kernel string `json:"kernel"`
	// Binary is the identity of the agentbox executable that builds boxes (device, inode,
	// size, modification and change times).
	Binary string `json:"binary"`
	// Helper is the identity of the box helper (agentbox-box) shims run from, when they run
	// from one.
	Helper string `json:"helper,omitempty"`
	// EngineBinary is the identity of the engine's own program (bwrap), "" for native.
	EngineBinary string `json:"engineBinary,omitempty"`
}

// ConfigHash returns a hash of c with its defaults applied.
func ConfigHash(c config.Config) string {
	b, _ := json.Marshal(c.WithDefaults())
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

type cacheEntry struct {
	Key       Key           `json:"key"`
	Readiness api.Readiness `json:"readiness"`
}

// loadCache returns the cached proof for k, or false.
func loadCache(stateDir string, k Key) (*api.Readiness, bool) {
	if stateDir == "" {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(stateDir, CacheFile))
	if err != nil {
		return nil, false
	}
	var e cacheEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Key != k || e.Readiness.State != api.ReadinessReady {
		return nil, false
	}
	return &e.Readiness, true
}

// storeCache records a positive result for k (atomically, 0600).
func storeCache(stateDir string, k Key, r api.Readiness) error {
	if stateDir == "" {
		return nil
	}
	if r.State != api.ReadinessReady {
		return fmt.Errorf("readiness cache: refusing to cache state %s", r.State)
	}
	b, err := json.MarshalIndent(cacheEntry{Key: k, Readiness: r}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(stateDir, CacheFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("readiness cache: %w", err)
	}
	return nil
}

// dropCache removes the cached proof (a negative result supersedes it).
func dropCache(stateDir string) error {
	if stateDir == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(stateDir, CacheFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
