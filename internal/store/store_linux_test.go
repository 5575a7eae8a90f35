package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestWriteFailureSurfaces fills a small tmpfs under the database: writes must fail with an
// error, not vanish.
func TestWriteFailureSurfaces(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		testenv.NoBoxes(t, "cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	s, err := Open(filepath.Join(dir, "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateLaunch(ctx, newLaunch("first")); err != nil {
		t.Fatal(err)
	}
	// Fill the file system.
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "fill"), "bs=4k").CombinedOutput(); err == nil {
		t.Fatalf("dd filled nothing: %s", out)
	}
	var werr error
	for i := 0; i < 1000 && werr == nil; i++ {
		l := newLaunch(fmt.Sprintf("l%d", i))
		l.Workspace = strings.Repeat("w", 4000)
		werr = s.CreateLaunch(ctx, l)
	}
	if werr == nil {
		t.Fatal("1000 writes to a full file system all succeeded")
	}
	if !strings.Contains(werr.Error(), "store: create launch") {
		t.Errorf("error lacks context: %v", werr)
	}
	t.Logf("write on a full disk: %v", werr)
	// What was committed before stays readable.
	if _, err := s.GetLaunch(ctx, "first"); err != nil {
		t.Errorf("GetLaunch after a failed write: %v", err)
	}
}
