package changes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/plan"
)

// BenchmarkGuardWindow measures how long what appears at a guarded path stays in the workspace:
// each op creates .mcp.json (as a box would) and spins until the guard has moved it out. The
// time per op is the window in which a host program could find it; window-max is the longest
// seen.
func BenchmarkGuardWindow(b *testing.B) {
	ws, gs := guarded(b)
	g, err := Open(filepath.Join(b.TempDir(), "changes"), gs, true)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Scan(); err != nil {
		b.Fatal(err)
	}
	go g.Run()
	defer g.Close()
	path := filepath.Join(ws, ".mcp.json")
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Microsecond) // as a polling host program would; a spin starves the guard on a loaded machine
			if time.Since(start) > 5*time.Second {
				b.Fatal("never moved out")
			}
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Microseconds()), "window-max-µs")
}

// BenchmarkManyFiles measures what the guard costs ordinary file-heavy work: each op creates
// 1,000 files in the workspace root (a folder the guard watches, as a checkout would), with and
// without a guard running.
func BenchmarkManyFiles(b *testing.B) {
	for _, guard := range []bool{false, true} {
		b.Run(fmt.Sprintf("guard=%v", guard), func(b *testing.B) {
			ws, gs := guarded(b)
			if guard {
				g, err := Open(filepath.Join(b.TempDir(), "changes"), gs, true)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Scan(); err != nil {
					b.Fatal(err)
				}
				go g.Run()
				defer g.Close()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(ws, fmt.Sprintf("d%d", i))
				for j := 0; j < 1000; j++ {
					if err := os.WriteFile(fmt.Sprintf("%s-%d", dir, j), []byte("x"), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkGuardScan measures one pass over the guarded paths (what each event in a watched
// folder costs the guard).
func BenchmarkGuardScan(b *testing.B) {
	_, gs := guarded(b)
	g, err := Open(filepath.Join(b.TempDir(), "changes"), gs, true)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	for i := 0; i < b.N; i++ {
		if err := g.Scan(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStageCollect measures what staging costs a launch: each op stages the protected
// files of a typical repository (20 files of 2 KiB: .git/config, agent and editor settings,
// .envrc, …), lets the "box" change one, and collects them at exit (one proposed change kept).
func BenchmarkStageCollect(b *testing.B) {
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var ps []plan.Protected
	content := strings.Repeat("x", 2047) + "\n"
	for i := 0; i < 20; i++ {
		p := filepath.Join(ws, fmt.Sprintf(".cfg%d/settings.json", i))
		mustWrite(b, p, content, 0o644)
		ps = append(ps, plan.Protected{Path: p, Beneath: ws})
	}
	tmp := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(tmp, "staged", strconv.Itoa(i))
		staged, err := Stage(dir, ps)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(staged[3].Staged, []byte("changed\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		res, err := Collect(dir, filepath.Join(tmp, "changes", strconv.Itoa(i)))
		if err != nil || len(res.Kept) != 1 || len(res.Failed) != 0 {
			b.Fatalf("collect: %+v %v", res, err)
		}
	}
}
