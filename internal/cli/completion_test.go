package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestFlagCompletions: the shells' completion requests offer the values of --detach-keys (run,
// attach) and --state (launches).
func TestFlagCompletions(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--detach-keys", ""}, []string{"ctrl-p,ctrl-q", "none"}},
		{[]string{"attach", "--detach-keys", ""}, []string{"ctrl-p,ctrl-q", "none"}},
		{[]string{"launches", "--state", ""}, []string{"starting", "running", "exited", "failed", "lost"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			root := Command()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&bytes.Buffer{})
			root.SetArgs(append([]string{"__complete"}, tt.args...))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(out.String(), "\n")
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					found = found || g == w
				}
				if !found {
					t.Errorf("completion of %v lacks %q: %q", tt.args, w, out.String())
				}
			}
		})
	}
}
