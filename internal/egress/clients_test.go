package egress

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress/egresstest"
)

// toolEnv is the environment a box gets (docs/egress.md), plus HOME and PATH.
func (r *rig) toolEnv(home string, pairing string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"}
	return append(env, ProxyEnv(r.proxyURL(pairing))...)
}

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func need(t *testing.T, tool string, versionArgs ...string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s is not installed", tool)
	}
	if len(versionArgs) > 0 {
		if out, err := exec.Command(p, versionArgs...).CombinedOutput(); err != nil {
			t.Skipf("%s does not run for this user: %v: %s", tool, err, out)
		}
	}
	return p
}

// TestRealClients drives real tools through the proxy with the environment a box gets.
func TestRealClients(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	home := t.TempDir()
	env := r.toolEnv(home, r.pairing1)

	t.Run("curl", func(t *testing.T) {
		t.Parallel()
		curl := need(t, "curl")
		out, err := run(t, home, env, curl, "-sS", "--fail", "--cacert", r.out.CAFile, r.out.URL("/hello"))
		if err != nil || !strings.HasPrefix(out, "hello from the outside") {
			t.Fatalf("curl https: %v: %s", err, out)
		}
		out, err = run(t, home, env, curl, "-sS", "--fail", r.out.HTTPURL("/hello"))
		if err != nil || !strings.HasPrefix(out, "hello from the outside") {
			t.Fatalf("curl http: %v: %s", err, out)
		}
		// A refused host: curl reports the proxy's answer to CONNECT.
		out, err = run(t, home, env, curl, "-sS", "--fail", "https://evil.outside.test/")
		if err == nil || !strings.Contains(out, "403") {
			t.Fatalf("curl to a refused host: %v: %s", err, out)
		}
		// Without the pairing, the proxy refuses with its challenge.
		bad := r.toolEnv(home, "abp_"+strings.Repeat("x", 43))
		out, err = run(t, home, bad, curl, "-sS", "--fail", "--cacert", r.out.CAFile, r.out.URL("/hello"))
		if err == nil || !strings.Contains(out, "403") {
			t.Fatalf("curl with a wrong pairing: %v: %s", err, out)
		}
	})

	t.Run("git", func(t *testing.T) {
		t.Parallel()
		git := need(t, "git")
		if r.out.RepoURL == "" {
			t.Skip("no git http-backend")
		}
		dst := filepath.Join(t.TempDir(), "clone")
		genv := append(env, "GIT_SSL_CAINFO="+r.out.CAFile)
		out, err := run(t, home, genv, git, "clone", r.out.RepoURL, dst)
		if err != nil {
			t.Fatalf("git clone through CONNECT: %v: %s", err, out)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "README")); err != nil || !strings.Contains(string(b), "egress proxy") {
			t.Fatalf("cloned README: %q %v", b, err)
		}
	})

	t.Run("npm", func(t *testing.T) {
		t.Parallel()
		npm := need(t, "npm", "--version")
		registry := r.out.URL("/")
		cache := filepath.Join(t.TempDir(), "npm-cache")
		common := []string{"--registry", registry, "--cafile", r.out.CAFile, "--cache", cache, "--no-update-notifier"}
		out, err := run(t, home, env, npm, append([]string{"view", egresstest.NPMPackage, "version"}, common...)...)
		if err != nil || strings.TrimSpace(out) != "1.0.0" {
			t.Fatalf("npm view: %v: %s", err, out)
		}
		proj := t.TempDir()
		os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"proj","version":"0.0.0","private":true}`), 0o644)
		out, err = run(t, proj, env, npm, append([]string{"install", "--no-audit", "--no-fund", egresstest.NPMPackage}, common...)...)
		if err != nil {
			t.Fatalf("npm install: %v: %s", err, out)
		}
		if b, err := os.ReadFile(filepath.Join(proj, "node_modules", egresstest.NPMPackage, "index.js")); err != nil || !strings.Contains(string(b), "egress ok") {
			t.Fatalf("installed package: %q %v", b, err)
		}
	})

	t.Run("pip", func(t *testing.T) {
		t.Parallel()
		pip := ""
		for _, name := range []string{"pip3", "pip"} {
			if p, err := exec.LookPath(name); err == nil {
				if err := exec.Command(p, "--version").Run(); err == nil {
					pip = p
					break
				}
			}
		}
		if pip == "" {
			t.Skip("pip is not installed or does not run for this user")
		}
		dst := t.TempDir()
		out, err := run(t, home, env, pip, "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
			"--index-url", r.out.URL("/simple/"), "--cert", r.out.CAFile, "-d", dst, egresstest.PipPackage)
		if err != nil {
			t.Fatalf("pip download: %v: %s", err, out)
		}
		if _, err := os.Stat(filepath.Join(dst, "agentbox_egress_demo-1.0.0-py3-none-any.whl")); err != nil {
			t.Fatalf("pip download: %v: %s", err, out)
		}
	})

	// The tools run side by side (each mostly waits on its own start-up); their records are
	// checked once all four have ended (a parent's cleanup runs after its parallel subtests).
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rec := range r.recs {
			if rec.Decision == DecisionError {
				t.Errorf("a tool's request failed upstream: %+v", rec)
			}
		}
		t.Log(fmt.Sprintf("%d records", len(r.recs)))
	})
}
