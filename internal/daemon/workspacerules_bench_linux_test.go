package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
)

// BenchmarkWorkspaceRules is the CPU time a launch spends on its workspace's rules and their
// facts, with the machine's own home and configuration (docs/benchmarks.md, "A launch's
// workspace rules found once"): checkWorkspace, and the facts the plan stage compares the
// toolchains' and caches' folders with (launchWorkspaceRules). In a plain folder, and in a
// repository's subfolder, where the rules run for the folder and for the repository.
func BenchmarkWorkspaceRules(b *testing.B) {
	dir := b.TempDir()
	repo := filepath.Join(dir, "repo")
	sub := filepath.Join(repo, "sub")
	plain := filepath.Join(dir, "plain")
	for _, p := range []string{sub, plain} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v: %s", err, out)
	}
	d := &Daemon{runtimeDir: filepath.Join(dir, "run"), stateDir: filepath.Join(dir, "state"), hostPath: os.Getenv("PATH")}
	eff := &config.Effective{}
	for _, c := range []struct{ name, ws string }{{"folder", plain}, {"repository-subfolder", sub}} {
		req := &api.LaunchRequest{Workspace: c.ws, Cwd: c.ws, RepoWorkspace: true, Env: os.Environ()}
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := launchWorkspaceRules(d, req, eff); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

// launchWorkspaceRules does what a launch does for its workspace's rules.
func launchWorkspaceRules(d *Daemon, req *api.LaunchRequest, eff *config.Effective) error {
	_, err := d.checkWorkspace(req, eff)
	return err
}

// cpuTime is the process's user and system CPU time so far, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
