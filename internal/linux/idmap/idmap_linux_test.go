package idmap_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/plan"
)

// catAsBoxRoot runs cat on files from the calling thread as a root-run box's program is: host
// uid 0 in a user namespace of its own (0 → 0), whose capabilities reach only what that
// namespace maps.
func catAsBoxRoot(files ...string) (string, error) {
	cmd := exec.Command("/bin/cat", files...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// shAsBoxRoot runs script as a root-run box's process is: uid 0 of a user namespace of its own
// that maps only it, to host id host, with every capability of that namespace; it returns the
// output.
func shAsBoxRoot(host int, script string) string {
	maps := idmap.Maps(0, host)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: maps,
		GidMappings: maps,
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestEnterHidesRootOnlyFiles: in the view, a process of host root without capabilities over
// host root's files (a root-run box's program) cannot read a root-owned 0600 file nor list a
// 0700 folder, and still reads a 0644 file; the same process reads them all outside the view
// (the check that the attempt would succeed without it).
func TestEnterHidesRootOnlyFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped views are made by host root only")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.key")
	public := filepath.Join(dir, "public.txt")
	private := filepath.Join(dir, "private")
	if err := os.WriteFile(secret, []byte("ROOT-ONLY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, []byte("PUBLIC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "inside"), []byte("INSIDE\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := catAsBoxRoot(secret, filepath.Join(private, "inside")); err != nil || !strings.Contains(out, "ROOT-ONLY") || !strings.Contains(out, "INSIDE") {
		t.Fatalf("without the view, host root in a user namespace should read its own files: %v\n%s", err, out)
	}

	type result struct {
		secret, inside, public string
		secretErr, insideErr   error
		publicErr, enterErr    error
		owner                  uint32
	}
	done := make(chan result, 1)
	go func() {
		// The view is the thread's: this goroutine keeps it and ends with it (a locked thread
		// whose goroutine returns is ended, never reused).
		runtime.LockOSThread()
		var r result
		if r.enterErr = idmap.Enter([]string{dir, filepath.Join(dir, "absent")}); r.enterErr != nil {
			done <- r
			return
		}
		r.secret, r.secretErr = catAsBoxRoot(secret)
		r.inside, r.insideErr = catAsBoxRoot(filepath.Join(private, "inside"))
		r.public, r.publicErr = catAsBoxRoot(public)
		var st syscall.Stat_t
		if err := syscall.Stat(secret, &st); err == nil {
			r.owner = st.Uid
		}
		done <- r
	}()
	r := <-done
	if r.enterErr != nil {
		t.Fatal(r.enterErr)
	}
	if r.secretErr == nil || strings.Contains(r.secret, "ROOT-ONLY") {
		t.Errorf("in the view, the root-owned 0600 file was read: %v %q", r.secretErr, r.secret)
	}
	if r.insideErr == nil || strings.Contains(r.inside, "INSIDE") {
		t.Errorf("in the view, a file in a root-owned 0700 folder was read: %v %q", r.insideErr, r.inside)
	}
	if r.publicErr != nil || !strings.Contains(r.public, "PUBLIC") {
		t.Errorf("in the view, a 0644 file should stay readable: %v %q", r.publicErr, r.public)
	}
	if r.owner != idmap.Nobody {
		t.Errorf("in the view, the root-owned file is owned by %d, want %d", r.owner, idmap.Nobody)
	}
	// The view was the thread's only: this goroutine still sees host root's file.
	var st syscall.Stat_t
	if err := syscall.Stat(secret, &st); err != nil || st.Uid != 0 {
		t.Errorf("outside the view the file should be root's: uid %d, %v", st.Uid, err)
	}
}

// BenchmarkEnter is what a root-run shim pays once before it starts its box: the mapping's
// user namespace (a process started and killed) and an idmapped clone of each system folder a
// box binds (docs/benchmarks.md).
func BenchmarkEnter(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("idmapped views are made by host root only")
	}
	for b.Loop() {
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			done <- idmap.Enter(plan.DefaultSystemDirs)
		}()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// TestEnterRefusesWhatCannotBeIdmapped: a system folder whose filesystem cannot be idmapped (an
// overlay mounted outside the box, here in a mount namespace of the test's thread only) is an
// error naming the folder, never a view that silently leaves it as host root's.
func TestEnterRefusesWhatCannotBeIdmapped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped views are made by host root only")
	}
	root := t.TempDir()
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	merged := filepath.Join(root, "merged")
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- err
			return
		}
		opts := "lowerdir=" + root + "/lower,upperdir=" + root + "/upper,workdir=" + root + "/work"
		if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
			done <- fmt.Errorf("mount an overlay to try: %w", err)
			return
		}
		done <- idmap.Enter([]string{merged})
	}()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "idmapped system folder "+merged) || !strings.Contains(err.Error(), "cannot be idmapped") {
		t.Fatalf("Enter over an overlay: %v, want an error naming %s", err, merged)
	}
}

// TestBoxUIDCannotSignalHostRoot: a process of a box started by host root — its uid 0 mapped
// to the box uid (idmap.Maps), with every capability of its own user namespace (more than a
// box's program has) — cannot signal a process of host root (this test), nor read a 0600 file
// of root's; the same process mapped as before the remap (0 → host root) can do both, which
// is the check that the attempt is real. The box's Landlock signal scope refuses such signals
// too; this is the kernel's uid check beneath it.
func TestBoxUIDCannotSignalHostRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only boxes started by host root are remapped")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("ROOT-ONLY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	try := func(host int) string {
		return shAsBoxRoot(host, fmt.Sprintf("if kill -0 %d; then echo SIGNALLED; fi; if cat %s; then echo READ; fi", os.Getpid(), secret))
	}
	if out := try(0); !strings.Contains(out, "SIGNALLED") || !strings.Contains(out, "READ") {
		t.Fatalf("mapped to host root, the process should signal and read as root does: %q", out)
	}
	box := idmap.BoxUID(os.Getpid(), 0)
	if out := try(box); strings.Contains(out, "SIGNALLED") || strings.Contains(out, "READ") {
		t.Errorf("mapped to box uid %d, the process signalled or read as host root: %q", box, out)
	}
}

// BenchmarkStartCovered is what a box started by host root costs more than another at its
// start: a mount namespace of the thread's own, the idmapping's user namespace (a process
// started under ptrace and killed), and three folders covered (a workspace, a run directory
// and a state folder); start does nothing.
func BenchmarkStartCovered(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("only host root covers folders")
	}
	var dirs []string
	for i := 0; i < 3; i++ {
		dirs = append(dirs, b.TempDir())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	box := idmap.BoxUID(os.Getpid(), 0)
	for b.Loop() {
		if err := idmap.StartCovered(dirs, box, func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStagingCover is what a prestarted box started by host root (a spare shim's) costs
// more at its launch: its three folders covered in the staging namespace, whose idmapping was
// made ahead.
func BenchmarkStagingCover(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("only host root covers folders")
	}
	var dirs []string
	for i := 0; i < 3; i++ {
		dirs = append(dirs, b.TempDir())
	}
	box := idmap.BoxUID(os.Getpid(), 0)
	for b.Loop() {
		b.StopTimer()
		st, err := idmap.Stage(box, func() error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := st.Cover(dirs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.Close()
		b.StartTimer()
	}
}
