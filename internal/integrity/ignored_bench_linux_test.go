package integrity_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/integrity"
)

// BenchmarkIgnoredAtExit measures what the check at exit adds for the files a launch left in
// git-ignored places (State.IgnoredChanged, then changes.TakeIgnored into a store on the same
// file system), on a repository whose ignored build/ holds 50,000 files of the host's (4 KiB
// each, in 500 folders), written before the snapshot:
//   - untouched: the box wrote nothing there (git's listing and the walk of build/);
//   - record: the record of build/'s 501 folders the daemon makes beside the box
//     (RecordFolders), then the check of untouched: the record's cost is the difference;
//   - box1k: the box wrote 1,000 files of 4 KiB in build/out/ (copied into the store);
//   - box2GiB: the box wrote 2 GiB in build/out/ (64 files of 32 MiB, sparse: each is read
//     and hashed whole, its holes left as holes in the store's copy): 32 are kept (the bound
//     of 1 GiB), 32 are removed.
//
// Metrics: files taken, kept and removed per check.
func BenchmarkIgnoredAtExit(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	ws := b.TempDir()
	gitB(b, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("build/\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "main.c"), []byte("int main(void){return 0;}\n"), 0o644)
	gitB(b, ws, "add", "-A")
	gitB(b, ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
	data := make([]byte, 4096)
	for d := 0; d < 500; d++ {
		dir := filepath.Join(ws, "build", fmt.Sprintf("obj%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.o", f)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		plant func(dir string)
	}{
		{"untouched", func(string) {}},
		{"record", nil},
		{"box1k", func(dir string) {
			for f := 0; f < 1000; f++ {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", f)), data, 0o644)
			}
		}},
		{"box2GiB", func(dir string) {
			for f := 0; f < 64; f++ {
				p := filepath.Join(dir, fmt.Sprintf("big%02d", f))
				os.WriteFile(p, nil, 0o644)
				os.Truncate(p, 32<<20)
			}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var taken, kept, removed int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				store := filepath.Join(b.TempDir(), "changes")
				os.RemoveAll(filepath.Join(ws, "build", "out"))
				s := &integrity.State{Workspace: ws, Started: time.Now()}
				time.Sleep(20 * time.Millisecond) // a box starts after the snapshot
				if c.name == "record" {
					// What the daemon adds beside the box: the record of the folders there at
					// the start (RecordFolders), which the check at exit waits for.
					b.StartTimer()
					s.RecordFolders("", nil)
					s.IgnoredChanged(context.Background())
					continue
				}
				// As the daemon does, the folders there at the start are recorded before the
				// box writes (IgnoredChanged waits for the record; it moves nothing).
				s.RecordFolders("", nil)
				s.IgnoredChanged(context.Background())
				out := filepath.Join(ws, "build", "out")
				os.MkdirAll(out, 0o755)
				c.plant(out)
				b.StartTimer()
				found := s.IgnoredChanged(context.Background())
				res, err := changes.TakeIgnored(store, ws, found.Files, time.Time{})
				if err != nil || len(found.NotChecked) > 0 {
					b.Fatal(err, found.NotChecked)
				}
				taken, kept, removed = len(found.Files), len(res.Kept), res.Dropped.Count
			}
			b.ReportMetric(float64(taken), "taken/op")
			b.ReportMetric(float64(kept), "kept/op")
			b.ReportMetric(float64(removed), "removed/op")
		})
	}
}

func gitB(b *testing.B, dir string, args ...string) {
	b.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
