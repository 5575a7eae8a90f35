package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// TestExitEndsBackgroundWriters: when the program exits, what it left running in the box —
// background writers that ignore hang-ups and terminations, one in a session of its own, all
// writing the workspace as fast as they can, and one re-creating a guarded protected file
// (.mcp.json) in a loop — is gone before `agentbox run` returns, and nothing of it writes
// afterwards: box-init reports the box's end before its own exit only once every other process
// of the box is gone and the guard's last pass is done, and the launch is recorded ended after
// that. The protected file is not on the host, and the box's last version of it is the
// proposed change the launch kept.
func TestExitEndsBackgroundWriters(t *testing.T) {
	e := NewEnv(t)
	script := `trap '' HUP TERM INT
i=0; while :; do i=$((i+1)); echo "a$i" >> late-a.txt; done &
setsid sh -c 'trap "" HUP TERM; i=0; while :; do i=$((i+1)); echo "b$i" >> late-b.txt; done' </dev/null >/dev/null 2>&1 &
for w in 1 2 3; do (trap '' HUP TERM; i=0; while :; do i=$((i+1)); echo "{\"w$w\":$i}" > .mcp.json; echo $i > w$w.txt; done) & done
while [ ! -s late-a.txt ] || [ ! -s late-b.txt ] || [ ! -s w1.txt ] || [ ! -s w2.txt ] || [ ! -s w3.txt ]; do :; done
exit 3`
	for round := 0; round < 3; round++ {
		r := e.Box(script)
		if r.Code != 3 {
			t.Fatalf("round %d: agentbox run exited %d, want the program's 3 (stderr %q)", round, r.Code, r.Stderr)
		}
		sizes := func() (a, b int64) {
			for i, name := range []string{"late-a.txt", "late-b.txt"} {
				st, err := os.Stat(filepath.Join(e.Work, name))
				if err != nil {
					t.Fatalf("round %d: %s: %v", round, name, err)
				}
				if i == 0 {
					a = st.Size()
				} else {
					b = st.Size()
				}
			}
			return a, b
		}
		a0, b0 := sizes()
		// Long enough for a writer left running to append many lines (each loop appends one in
		// well under a millisecond); nothing here measures time.
		time.Sleep(300 * time.Millisecond)
		if a1, b1 := sizes(); a1 != a0 || b1 != b0 {
			t.Errorf("round %d: the box's background writers wrote after agentbox run returned: late-a.txt %d → %d bytes, late-b.txt %d → %d", round, a0, a1, b0, b1)
		}
		if _, err := os.Lstat(filepath.Join(e.Work, ".mcp.json")); err == nil {
			t.Errorf("round %d: the box's .mcp.json is on the host after agentbox run returned", round)
		}
		ls := e.Launches()
		if len(ls) == 0 {
			t.Fatalf("round %d: no launch recorded", round)
		}
		l := ls[0]
		for _, x := range ls {
			if x.Started.After(l.Started) {
				l = x
			}
		}
		if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 3 || !l.Settled {
			t.Errorf("round %d: recorded %s exit %v settled %v, want exited 3, settled", round, l.State, l.ExitCode, l.Settled)
		}
		out := e.Run("", "changes", l.ID)
		// (what it holds is the box's last write, or nothing when a writer was killed between
		// its truncation and its write)
		if out.Code != 0 || !strings.Contains(out.Stdout, "\n.mcp.json\n") {
			t.Errorf("round %d: agentbox changes %s: exit %d, %q %q; want the box's .mcp.json kept", round, l.ID, out.Code, out.Stdout, out.Stderr)
		}
		for _, name := range []string{"late-a.txt", "late-b.txt", "w1.txt", "w2.txt", "w3.txt"} {
			os.Remove(filepath.Join(e.Work, name))
		}
	}
}
