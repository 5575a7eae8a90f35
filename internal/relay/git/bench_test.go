package git_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
)

// bigRepo fills bare repository dir with commits commits of blobSize random (incompressible)
// bytes each, through git fast-import.
func bigRepo(tb testing.TB, gitBin, home, dir string, commits, blobSize int) {
	cmd := exec.Command(gitBin, "fast-import", "--quiet")
	cmd.Dir, cmd.Env = dir, hostEnv(home)
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, blobSize)
	for i := 1; i <= commits; i++ {
		for j := range blob {
			blob[j] = byte(rng.Uint32())
		}
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", i, len(blob))
		w.Write(blob)
		msg := fmt.Sprintf("commit %d", i)
		fmt.Fprintf(w, "\ncommit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\ndata %d\n%s\n", 1700000000+i, len(msg), msg)
		fmt.Fprintf(w, "M 100644 :%d files/%d/%d.bin\n\n", i, i%64, i)
	}
	w.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkClone clones a ≥ 50 MB repository of thousands of commits straight from git
// http-backend and through the relay, and reports throughput and the relay process's peak
// heap. Run: go test -run XXX -bench Clone -benchtime 3x ./internal/relay/git/
// (AGENTBOX_BENCH_COMMITS=9000 for a 180 MB pack).
func BenchmarkClone(b *testing.B) {
	commits, blobSize := 3000, 20<<10 // 60 MB of incompressible content
	if n, err := strconv.Atoi(os.Getenv("AGENTBOX_BENCH_COMMITS")); err == nil && n > 0 {
		commits = n // a bigger pack shows the relay's heap does not grow with it
	}
	rm := newRemote(b, false)
	dir := rm.bare("org/big.git")
	start := time.Now()
	bigRepo(b, rm.git, rm.home, dir, commits, blobSize)
	run(b, dir, hostEnv(rm.home), rm.git, "repack", "-adq")
	packs, _ := filepath.Glob(filepath.Join(dir, "objects/pack/*.pack"))
	var packSize int64
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil {
			packSize += fi.Size()
		}
	}
	b.Logf("repository: %d commits, pack %.1f MB, generated in %s", commits, float64(packSize)/1e6, time.Since(start).Round(time.Millisecond))

	r := newRig(b, rigOptions{cfg: gitrelay.Config{
		Allow:       []string{"http://" + rm.hostport() + "/org"},
		Credentials: []gitrelay.Credential{{Prefix: "http://" + rm.hostport() + "/org", Username: remoteUser, File: credFile(b)}},
	}})
	clone := func(b *testing.B, env []string, url string) {
		work := b.TempDir()
		cmd := exec.Command(rm.git, "clone", "--quiet", "--bare", url, filepath.Join(work, "c"))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("clone: %v\n%s", err, out)
		}
		os.RemoveAll(work)
	}
	directURL := strings.Replace(rm.srv.URL, "http://", "http://"+remoteUser+":"+remoteSecret+"@", 1) + "/org/big.git"

	b.Run("direct", func(b *testing.B) {
		env := hostEnv(b.TempDir())
		for b.Loop() {
			clone(b, env, directURL)
		}
		b.ReportMetric(float64(packSize)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
	})
	b.Run("relay", func(b *testing.B) {
		var peak atomic.Uint64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
		for b.Loop() {
			clone(b, r.env(), rm.url("org/big.git"))
		}
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(packSize)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
		b.ReportMetric(float64(peak.Load())/1e6, "peak-heap-MB")
	})
}
