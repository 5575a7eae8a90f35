package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscapeSequenceOneRead: a key whose sequence the terminal sends in one write (an arrow key:
// ESC [ B, or ESC O B in application cursor mode) reaches the program in the box in one read, as
// it does a program in the terminal itself. The console relay (the client reading the terminal,
// its frames to the shim, the shim's writes to the box's PTY) must not split it: a program that
// gets ESC alone reads the Escape key (Claude Code's trust dialog: "Esc to cancel", and the launch
// ends "folder isn't trusted"). The program reads its terminal one read(2) at a time (dd
// count=1) in non-canonical mode and prints each read's bytes; tmux types Down, Up and Escape
// then Down between the reads.
func TestEscapeSequenceOneRead(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	m := e.Tmux(t)
	const rounds = 20
	prog := fmt.Sprintf(`sh -- -c 'stty -icanon -echo min 1 time 0; i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "ready-$i"; printf "read-$i:"; dd bs=64 count=1 2>/dev/null | od -An -tx1 | tr -d "\n"; echo; done'`, rounds)
	tag := m.Start("run " + prog)
	keys := []struct{ name, want string }{{"Down", "42"}, {"Up", "41"}, {"Right", "43"}}
	for i := 1; i <= rounds; i++ {
		// Not at the line's start: the shell's prompt may come after the typed command's echo.
		m.WaitFor(fmt.Sprintf("(?m)ready-%d$", i))
		k := keys[i%len(keys)]
		m.Keys(k.name)
		// The read's line, once the next line (the next round's, or the shell's) follows it.
		got := strings.TrimSpace(m.WaitFor(fmt.Sprintf(`read-%d:([0-9a-f ]+)\n\S`, i))[1])
		if got != "1b 5b "+k.want && got != "1b 4f "+k.want {
			t.Fatalf("%s reached the program in a read of %q, want its whole sequence (1b 5b %s) in one:\n%s", k.name, got, k.want, m.Screen())
		}
	}
	if code := m.Wait(tag); code != 0 {
		t.Errorf("agentbox run exited %d", code)
	}
}
