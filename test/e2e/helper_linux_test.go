package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
)

// TestBoxHelper: the daemon starts shims (and so box-init) from the box helper installed beside
// agentbox — from the sealed copy it took at its start — and reports it; the box is the same box (the helper's box-init runs the program
// under every restriction). Without a helper beside the binaries, boxes start from the daemon
// binary itself.
func TestBoxHelper(t *testing.T) {
	helper := filepath.Join(filepath.Dir(agentboxBin), boxhelper.HelperName)
	if _, err := os.Stat(helper); err != nil {
		t.Skipf("no box helper beside %s (build both: make build): %v", agentboxBin, err)
	}
	e := NewEnv(t)
	if r := e.Run("", "run", "true"); r.Code != 0 {
		t.Fatalf("run true: exit %d: %s", r.Code, r.Stderr)
	}
	r := e.Run("", "info", "--json")
	var info api.Info
	if err := json.Unmarshal([]byte(r.Stdout), &info); err != nil {
		t.Fatalf("info --json: %v: %s", err, r.Stdout)
	}
	if info.BoxBinary != helper {
		t.Fatalf("info boxBinary = %q, want the helper %s", info.BoxBinary, helper)
	}
	id := e.Detach("sleep", "--", "60")
	l := e.WaitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning })
	// The shim runs the daemon's sealed copy of the helper (a memfd), never the file itself.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", l.ShimPid))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/memfd:" + boxhelper.HelperName + " (deleted)"; exe != want {
		t.Errorf("shim %d runs %s, want the sealed copy of the helper, %s", l.ShimPid, exe, want)
	}
	image, err := os.ReadFile(fmt.Sprintf("/proc/%d/exe", l.ShimPid))
	if err != nil {
		t.Fatal(err)
	}
	if want, err := os.ReadFile(helper); err != nil || !bytes.Equal(image, want) {
		t.Errorf("shim %d runs %d bytes that are not the helper %s (%v)", l.ShimPid, len(image), helper, err)
	}
	// The program under the helper's box-init has no capability, no_new_privs and seccomp.
	out := e.Box("grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("box status lacks %q:\n%s", want, out.Stdout)
		}
	}
	e.Run("", "stop", id)

	// A copy of agentbox and its daemon binary, without the helper: boxes start from the daemon
	// binary itself.
	aloneDir := t.TempDir()
	alone, aloneDaemon := filepath.Join(aloneDir, boxhelper.CLIName), filepath.Join(aloneDir, boxhelper.DaemonName)
	for src, dst := range map[string]string{agentboxBin: alone, filepath.Join(filepath.Dir(agentboxBin), boxhelper.DaemonName): aloneDaemon} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(aloneDir, 0o755)
	e2 := NewEnv(t)
	c := e2.Command(t.Context(), "run", "sh", "--", "-c", "echo boxed")
	c.Path, c.Args[0] = alone, alone
	if r := e2.RunCmd(c); r.Code != 0 || r.Stdout != "boxed\n" {
		t.Fatalf("agentbox without a helper: exit %d, %q, %q", r.Code, r.Stdout, r.Stderr)
	}
	c = e2.Command(t.Context(), "info", "--json")
	c.Path, c.Args[0] = alone, alone
	r = e2.RunCmd(c)
	if err := json.Unmarshal([]byte(r.Stdout), &info); err != nil {
		t.Fatalf("info --json: %v: %s", err, r.Stdout)
	}
	if info.BoxBinary != aloneDaemon {
		t.Errorf("without a helper: boxBinary = %q, want %s", info.BoxBinary, aloneDaemon)
	}
}
