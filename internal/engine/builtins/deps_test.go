package builtins

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentbox/agentbox/"

// engines are the packages of the engines themselves.
var engines = []string{module + "internal/engine/native", module + "internal/engine/bwrap"}

// TestOnlyRegistryImportsEngines guards the layering of the kernel code (issue 22): the engines'
// packages are imported only by this registry and by the box helper's entry points
// (internal/boxmain); the shim, the readiness probe, the conformance suite and the other engine
// reach an engine through engine.Get and its optional interfaces, and the kernel through
// internal/linux/..., the spec and the exec stage. Before the kernel moved out of the native
// engine, the shim, bwrap, readiness, enginetest and the daemon all imported it.
func TestOnlyRegistryImportsEngines(t *testing.T) {
	// bench/startup renders the bwrap engine's argv for a like-for-like measurement
	// (bwrap.ParseRequest, bwrap.ExpandArgs): a benchmark of that engine, not a user of engines.
	allowed := map[string]bool{module + "internal/engine/builtins": true, module + "internal/boxmain": true, module + "bench/startup": true}
	for pkg, imports := range listPackages(t, "Imports") {
		for _, e := range engines {
			if slices.Contains(imports, e) && !allowed[pkg] {
				t.Errorf("%s imports the engine %s: reach it through engine.Get (internal/engine/builtins registers it)", pkg, e)
			}
		}
	}
}

// listPackages returns, for every package of the module (as built for Linux), the list go list
// gives in its field (Imports, Deps). It skips without a go toolchain.
func listPackages(t *testing.T, field string) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}} {{join ."+field+" \" \"}}", module+"...")
	cmd.Env = append(cmd.Environ(), "GOOS=linux")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			pkgs[f[0]] = f[1:]
		}
	}
	if len(pkgs) < 30 {
		t.Fatalf("go list saw only %d packages:\n%s", len(pkgs), out)
	}
	return pkgs
}

// TestKernelUsersIndependentOfEngines: the shim, the bwrap engine, the conformance suite, the
// shared exec stage and the kernel packages do not depend on the native engine at all, not even
// through another package; the shim does not depend on any engine.
func TestKernelUsersIndependentOfEngines(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	for _, c := range []struct {
		pkg    string
		banned []string
	}{
		{"internal/shim", engines},
		{"internal/engine/enginetest", engines},
		{"internal/engine/execstage", engines},
		{"internal/engine/spec", engines},
		{"internal/engine/bwrap", engines[:1]},
		{"internal/linux/caps", engines},
		{"internal/linux/fds", engines},
		{"internal/linux/landlock", engines},
		{"internal/linux/mount", engines},
		{"internal/linux/ns", engines},
		{"internal/linux/pty", engines},
		{"internal/linux/seccomp", engines},
	} {
		cmd := exec.Command(gobin, "list", "-deps", module+c.pkg)
		cmd.Env = append(cmd.Environ(), "GOOS=linux")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go list -deps %s: %v\n%s", c.pkg, err, out)
			continue
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		if !deps[module+c.pkg] {
			t.Errorf("go list -deps %s does not list the package itself:\n%s", c.pkg, out)
		}
		for _, b := range c.banned {
			if deps[b] {
				t.Errorf("%s depends on %s", c.pkg, b)
			}
		}
	}
}

// TestOnlyEntriesDependOnEngines: no non-test package depends on an engine's package, directly
// or through another, but this registry, the box helper's entry points (internal/boxmain), the
// daemon binary's entry (internal/daemonmain, which imports this registry for the daemon and
// its readiness probe) and the two binaries that hold them; bench/startup renders the bwrap
// engine's argv (TestOnlyRegistryImportsEngines). The daemon and the readiness probe imported
// this registry themselves before, and so depended on both engines.
func TestOnlyEntriesDependOnEngines(t *testing.T) {
	allowed := map[string]bool{}
	for _, p := range []string{"internal/engine/builtins", "internal/boxmain", "internal/daemonmain", "cmd/agentbox-box", "cmd/agentbox-daemon", "bench/startup"} {
		allowed[module+p] = true
	}
	for pkg, deps := range listPackages(t, "Deps") {
		if allowed[pkg] || slices.Contains(engines, pkg) {
			continue
		}
		for _, e := range engines {
			if slices.Contains(deps, e) {
				t.Errorf("%s depends on the engine %s: reach it through engine.Get, and leave its registration to the program (internal/daemonmain imports this registry)", pkg, e)
			}
		}
	}
}
