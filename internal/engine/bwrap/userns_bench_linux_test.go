package bwrap

import (
	"os/exec"
	"testing"

	"github.com/agentbox/agentbox/internal/linux/idmap"
)

// BenchmarkOwnUserns is what an ordinary user's bwrap launch pays for a user namespace of
// agentbox's own (bwrap --userns): the bwrap version check and the namespace made.
func BenchmarkOwnUserns(b *testing.B) {
	path, err := exec.LookPath(Program)
	if err != nil {
		b.Skip(err)
	}
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			if !supportsUserns(path) {
				b.Skip("this bwrap takes no --userns")
			}
		}
	})
	b.Run("namespace", func(b *testing.B) {
		for b.Loop() {
			ns, err := idmap.OwnNamespace()
			if err != nil {
				b.Fatal(err)
			}
			ns.Close()
		}
	})
}
