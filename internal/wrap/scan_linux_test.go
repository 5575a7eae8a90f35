package wrap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// copyFile copies src to dst (a new inode) with mode 0755.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// start runs argv in the background and stops it when the test ends.
func start(t *testing.T, attr *syscall.SysProcAttr, argv ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = attr
	if err := c.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	execd(t, c.Process.Pid)
	return c
}

// execd waits until the process has its new command line: Start returns once the kernel is
// committed to the exec, which may be before it has laid out the argument strings (until then
// /proc/PID/cmdline reads empty and a script's run names no script).
func execd(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || len(b) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d: its command line stayed empty", pid)
}

func pidsOf(fs []Finding) map[int]string {
	m := map[int]string{}
	for _, f := range fs {
		m[f.Process.Pid] = f.Target.Name
	}
	return m
}

// TestScanCanonical pins what counts as running the managed program: the same file (device and
// inode) reached by any path or name, outside every box; never a name, never a copy, never a
// process in another user namespace.
func TestScanCanonical(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	dir := t.TempDir()
	for _, d := range []string{"vendor", "bin", "other"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	// The "vendor's" binary: a copy of sleep, so that the system's own sleep is another file.
	vendor := filepath.Join(dir, "vendor", "fakeagent")
	copyFile(t, sleep, vendor)
	link := filepath.Join(dir, "bin", "fakeagent") // a symlinked install (npm's bin links)
	os.Symlink(vendor, link)
	renamed := filepath.Join(dir, "other", "renamed") // a hard link: the same file under another name
	if err := os.Link(vendor, renamed); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "other", "copy") // a copy: another file with the same bytes
	copyFile(t, vendor, cp)
	sameName := filepath.Join(dir, "other", "fakeagent") // the name, but another program
	os.Symlink(sleep, sameName)

	// Canonicalize resolves the symlinked install to the vendor's file.
	tg, err := Canonicalize("fakeagent", link, "")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.EvalSymlinks(vendor); tg.Path != want || tg.Script {
		t.Fatalf("canonical %+v, want %s (a binary)", tg, want)
	}
	// PATH lookup, with a launcher first on PATH.
	wrapDir := filepath.Join(dir, "wrap")
	if _, err := Install(wrapDir, "/usr/bin/agentbox", []Program{{Name: "fakeagent"}}); err != nil {
		t.Fatal(err)
	}
	if tg2, err := Canonicalize("fakeagent", "", wrapDir+":"+filepath.Join(dir, "bin")); err != nil || tg2.ID != tg.ID {
		t.Errorf("canonical by PATH lookup: %+v %v, want the vendor's file", tg2, err)
	}
	if _, err := Canonicalize("fakeagent", "", wrapDir); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("only a launcher on PATH: %v, want ErrNotInstalled", err)
	}
	if _, err := Canonicalize("fakeagent", filepath.Join(wrapDir, "fakeagent"), ""); err == nil {
		t.Error("a launcher was accepted as the managed program")
	}
	if _, err := Canonicalize("fakeagent", dir, ""); err == nil {
		t.Error("a directory was accepted as the managed program")
	}

	byVendor := start(t, nil, vendor, "1000")
	byLink := start(t, nil, link, "1000")
	byRename := start(t, nil, renamed, "1000")
	byCopy := start(t, nil, cp, "1000")
	bySameName := start(t, nil, sameName, "1000")
	want := map[int]bool{byVendor.Process.Pid: true, byLink.Process.Pid: true, byRename.Process.Pid: true}
	// In another user namespace (every box has its own): not outside every box.
	var inNS *exec.Cmd
	if _, err := os.Stat("/proc/self/ns/user"); err == nil {
		c := exec.Command(vendor, "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		if err := c.Start(); err != nil {
			t.Logf("no user namespace for the in-namespace case: %v", err)
		} else {
			inNS = c
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		}
	}

	found, err := Scanner{}.Scan([]Target{tg})
	if err != nil {
		t.Fatal(err)
	}
	got := pidsOf(found)
	for pid := range want {
		if got[pid] != "fakeagent" {
			t.Errorf("pid %d runs the vendor's file and was not found (found %v)", pid, got)
		}
	}
	for what, c := range map[string]*exec.Cmd{"a copy": byCopy, "another program of the same name": bySameName, "the process in another user namespace": inNS} {
		if c != nil && got[c.Process.Pid] != "" {
			t.Errorf("%s was reported as the managed program", what)
		}
	}
	for _, f := range found {
		if f.Process.Pid == byLink.Process.Pid {
			if f.Process.PPid != os.Getpid() || f.Process.StartTime == 0 || f.Process.Exe != tg.Path {
				t.Errorf("finding %+v: want parent %d, a start time and exe %s", f.Process, os.Getpid(), tg.Path)
			}
		}
	}
	if len(found) != len(want) {
		t.Errorf("found %d processes, want %d: %+v", len(found), len(want), found)
	}
}

// TestScanScript covers an interpreted managed program: its processes run the interpreter and
// name the script; a same-named script that is another file, and a process that merely reads
// the script, do not count.
func TestScanScript(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "vendor"), 0o755)
	os.Mkdir(filepath.Join(dir, "other"), 0o755)
	body := []byte("#!/bin/sh\nwhile :; do sleep 1; done\n") // no child outlives the kill by more than a second
	script := filepath.Join(dir, "vendor", "fakeagent")
	os.WriteFile(script, body, 0o755)
	other := filepath.Join(dir, "other", "fakeagent")
	os.WriteFile(other, body, 0o755)
	tg, err := Canonicalize("fakeagent", script, "")
	if err != nil {
		t.Fatal(err)
	}
	if !tg.Script || len(tg.Interpreters) == 0 {
		t.Fatalf("canonical %+v: want a script with its interpreter", tg)
	}
	native := start(t, nil, script)
	notIt := start(t, nil, other)
	reader := start(t, nil, "tail", "-f", script)
	// Relative to the working directory, through a symlink.
	os.Symlink(script, filepath.Join(dir, "other", "viaLink"))
	rel := exec.Command("./viaLink")
	rel.Dir = filepath.Join(dir, "other")
	if err := rel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rel.Process.Kill(); rel.Wait() })
	execd(t, rel.Process.Pid)

	found, err := Scanner{}.Scan([]Target{tg})
	if err != nil {
		t.Fatal(err)
	}
	got := pidsOf(found)
	if got[native.Process.Pid] == "" || got[rel.Process.Pid] == "" {
		t.Errorf("the script's own runs were not found: %v (want %d and %d)", got, native.Process.Pid, rel.Process.Pid)
	}
	if got[notIt.Process.Pid] != "" {
		t.Error("a same-named script that is another file was reported")
	}
	if got[reader.Process.Pid] != "" {
		t.Error("a process reading the script (tail) was reported")
	}
}

// TestTerminate kills a found process through its pidfd, and refuses a finding whose process
// is no longer the one found.
func TestTerminate(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	dir := t.TempDir()
	vendor := filepath.Join(dir, "fakeagent")
	copyFile(t, sleep, vendor)
	tg, err := Canonicalize("fakeagent", vendor, "")
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, nil, vendor, "1000")
	found, err := Scanner{}.Scan([]Target{tg})
	if err != nil || len(found) != 1 {
		t.Fatalf("scan: %+v %v", found, err)
	}
	stale := found[0]
	stale.Process.StartTime++
	if err := (Scanner{}).Terminate(stale); err == nil {
		t.Error("a finding with another start time was signalled")
	}
	if err := (Scanner{}).Terminate(found[0]); err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("after Terminate: %v, want killed by SIGKILL", err)
	}
}
