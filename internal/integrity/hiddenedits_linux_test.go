package integrity

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/changes"
)

// TestHiddenEdits (fix18c, review 18b): the check at exit (verifyHiddenEdits) names a tracked
// file the launch changed whose change the host's git status and git diff do not show, and
// nothing else. Each case is set up, the launch starts (Started, past the coarse clock's
// second), then what a box would do is done with real git and the check runs.
func TestHiddenEdits(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	type tc struct {
		name   string
		setup  func(t *testing.T, ws string)
		box    func(t *testing.T, ws string)
		alerts []string // the base names alerted on
	}
	sub := func(ignore string) func(t *testing.T, ws string) {
		return func(t *testing.T, ws string) {
			lib := filepath.Join(filepath.Dir(ws), filepath.Base(ws)+"-lib")
			mustWrite(t, filepath.Join(lib, "run.sh"), "echo lib\n")
			gitIn(lib, "", false, "init", "-q", "-b", "main")
			gitIn(lib, "", false, "add", "-A")
			gitIn(lib, "", false, "commit", "-qm", "lib")
			mustWrite(t, filepath.Join(ws, "app.sh"), "sh lib/run.sh\n")
			gitIn(ws, "", false, "init", "-q", "-b", "main")
			gitIn(ws, "", false, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
			if ignore != "" {
				gitIn(ws, "", false, "config", "-f", ".gitmodules", "submodule.lib.ignore", ignore)
			}
			gitIn(ws, "", false, "add", "-A")
			gitIn(ws, "", false, "commit", "-qm", "app")
		}
	}
	plain := func(files map[string]string, attrs string) func(t *testing.T, ws string) {
		return func(t *testing.T, ws string) {
			gitIn(ws, "", false, "init", "-q", "-b", "main")
			if attrs != "" {
				mustWrite(t, filepath.Join(ws, ".gitattributes"), attrs)
			}
			for n, c := range files {
				mustWrite(t, filepath.Join(ws, n), c)
			}
			gitIn(ws, "", false, "add", "-A")
			gitIn(ws, "", false, "commit", "-qm", "one")
		}
	}
	appendRun := func(t *testing.T, ws string) {
		mustWrite(t, filepath.Join(ws, "lib/run.sh"), "echo lib\ntouch /tmp/pwned\n")
	}
	cases := []tc{
		{"ident", plain(map[string]string{"build.sh": "#!/bin/sh\nVERSION='$Id$'\necho built\n"}, ""), func(t *testing.T, ws string) {
			mustWrite(t, filepath.Join(ws, ".gitattributes"), "build.sh ident\n")
			mustWrite(t, filepath.Join(ws, "build.sh"), "#!/bin/sh\nVERSION='$Id: '; touch /tmp/pwned; : ' $'\necho built\n")
			gitIn(ws, "", false, "read-tree", "HEAD")
		}, []string{"build.sh"}},
		// git's own checkout of an eol=crlf file (CRLF in the work tree, LF stored) is no finding.
		{"crlf checkout", plain(map[string]string{"run.bat": "echo one\necho two\n"}, "*.bat eol=crlf\n"), func(t *testing.T, ws string) {
			mustWrite(t, filepath.Join(ws, "run.bat"), "echo one\r\necho two\r\n")
		}, nil},
		// CRLFs the box adds to a text file that git stores with LFs hide nothing worth a word
		// when they are git's checkout; a changed line git shows is ordinary work.
		{"ordinary edit", plain(map[string]string{"a.sh": "echo a\n"}, ""), func(t *testing.T, ws string) {
			mustWrite(t, filepath.Join(ws, "a.sh"), "echo b\n")
		}, nil},
		// A text=auto file whose CRLFs git strips: the box's extra command is on a line git
		// shows, so only the hidden CR-only change counts; here a change git shows.
		{"text eol shown", plain(map[string]string{"t.sh": "echo a\n"}, "*.sh text eol=lf\n"), func(t *testing.T, ws string) {
			mustWrite(t, filepath.Join(ws, "t.sh"), "echo a\r\ntouch /tmp/pwned\r\n")
		}, nil},
		// CRLFs where git checks out LFs: git status shows nothing, the bytes are not git's
		// checkout (a here-document's or a CR-sensitive tool's input differs): named.
		{"text eol hidden", plain(map[string]string{"t.sh": "echo a\n"}, "*.sh text eol=lf\n"), func(t *testing.T, ws string) {
			mustWrite(t, filepath.Join(ws, "t.sh"), "echo a\r\n")
		}, []string{"t.sh"}},
		{"submodule none", sub(""), appendRun, nil},
		{"submodule untracked", sub("untracked"), appendRun, nil},
		{"submodule dirty", sub("dirty"), appendRun, []string{"run.sh"}},
		{"submodule all", sub("all"), appendRun, []string{"run.sh"}},
		{"submodule dirty staged", sub("dirty"), func(t *testing.T, ws string) {
			appendRun(t, ws)
			gitIn(filepath.Join(ws, "lib"), "", false, "add", "run.sh")
		}, []string{"run.sh"}},
		{"submodule all committed", sub("all"), func(t *testing.T, ws string) {
			appendRun(t, ws)
			gitIn(filepath.Join(ws, "lib"), "", false, "commit", "-qam", "more")
		}, []string{"run.sh"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			c.setup(t, ws)
			time.Sleep(1100 * time.Millisecond) // past since()'s second before Started
			store := filepath.Join(t.TempDir(), "changes")
			s := &State{Workspace: ws, Started: time.Now(), Changes: store}
			c.box(t, ws)
			// What the box left in each file to be named, to be kept in the store.
			boxed := map[string][]byte{}
			for _, n := range c.alerts {
				rel := n
				if _, err := os.Lstat(filepath.Join(ws, rel)); err != nil {
					rel = filepath.Join("lib", n)
				}
				b, err := os.ReadFile(filepath.Join(ws, rel))
				if err != nil {
					t.Fatal(err)
				}
				boxed[rel] = b
			}
			got := s.verifyHiddenEdits(nil)
			var names []string
			for _, tr := range got {
				if !tr.Alert {
					t.Errorf("not an alert: %+v", tr)
				}
				if !strings.Contains(tr.Detail, "put back") {
					t.Errorf("the alert does not say the file was put back: %s", tr.Detail)
				}
				names = append(names, filepath.Base(tr.Path))
			}
			if strings.Join(names, " ") != strings.Join(c.alerts, " ") {
				t.Errorf("alerts on %q, want %q:\n%+v", names, c.alerts, got)
			}
			// Session 19: each file named is the host's again (git's checkout of the object it
			// was compared with: the host's git shows no change, and none is hidden), and the
			// box's version is a proposed change that apply puts back.
			cs, err := changes.List(store)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != len(boxed) {
				t.Errorf("the store holds %d changes, want %d: %+v", len(cs), len(boxed), cs)
			}
			for _, ch := range cs {
				box, ok := boxed[ch.Path]
				if !ok || !ch.Modifies || !ch.Hidden || string(ch.Content) != string(box) {
					t.Errorf("kept %s (modifies %v) %q, want the box's %q", ch.Path, ch.Modifies, ch.Content, box)
					continue
				}
				now, _ := os.ReadFile(filepath.Join(ws, ch.Path))
				if string(now) == string(box) || string(now) != string(ch.Base) {
					t.Errorf("%s holds %q after the check, want what was put back, %q (the box wrote %q)", ch.Path, now, ch.Base, box)
				}
				if strings.Contains(string(now), "pwned") || strings.Contains(string(now), "\r") {
					t.Errorf("%s still holds the box's bytes: %q", ch.Path, now)
				}
				if !strings.HasPrefix(ch.Path, "lib/") {
					// The workspace's repository: git's view and the bytes agree again.
					if st := gitIn(ws, "", false, "status", "--porcelain", "--untracked-files=no"); st != "" {
						t.Errorf("the host's git status after the file was put back: %q", st)
					}
					if out := gitIn(ws, "", false, "cat-file", "--filters", "--path="+ch.Path, ":"+ch.Path); out != string(now) {
						t.Errorf("%s was put back as %q, not as git checks it out, %q", ch.Path, now, out)
					}
				}
				if err := changes.Apply(store, ws, ch.Path); err != nil {
					t.Errorf("apply %s: %v", ch.Path, err)
				} else if b, _ := os.ReadFile(filepath.Join(ws, ch.Path)); string(b) != string(box) {
					t.Errorf("apply %s put %q, want the box's %q", ch.Path, b, box)
				}
			}
			if len(boxed) == 0 {
				if _, err := os.Lstat(store); err == nil {
					t.Errorf("a store was made where nothing was named")
				}
			}
		})
	}
}

// BenchmarkHiddenEdits measures the check of tracked edits git does not show
// (verifyHiddenEdits) on a repository of 5,000 tracked files, beside the whole check at exit
// (VerifyExit, which holds it): with no file changed in the launch, and with 100 files edited
// (ordinary edits git shows: hashed, then one git hash-object).
func BenchmarkHiddenEdits(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	gitIn(ws, "", false, "init", "-q", "-b", "main")
	for i := 0; i < 5000; i++ {
		mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("p%d", i%50), fmt.Sprintf("f%d.go", i)), fmt.Sprintf("package p\n\n// %d\nfunc F%d() {}\n", i, i))
	}
	gitIn(ws, "", false, "add", "-A")
	gitIn(ws, "", false, "commit", "-qm", "one")
	time.Sleep(1100 * time.Millisecond)
	for _, edited := range []int{0, 100} {
		s := &State{Workspace: ws, Started: time.Now()}
		for i := 0; i < edited; i++ {
			mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("p%d", i%50), fmt.Sprintf("f%d.go", i)), fmt.Sprintf("package p\n\n// %d edited\n", i))
		}
		b.Run(fmt.Sprintf("edited=%d/hidden", edited), func(b *testing.B) {
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if got := s.verifyHiddenEdits(nil); len(got) != 0 {
					b.Fatalf("alerts: %+v", got)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
		b.Run(fmt.Sprintf("edited=%d/exit", edited), func(b *testing.B) {
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				s.VerifyExit()
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
