package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkFilteredSyscalls times the system calls a file-heavy program makes most (openat of
// an existing file for reading, openat O_CREAT of a new one, each with its close, and
// newfstatat), in a child process with no filter and in one with the box's filter loaded, as
// the exec stage loads it (issue #23: what the filter costs work inside a box). A filter
// cannot be unloaded, so each side is a run of this test binary (TestFilteredSyscallsChild).
// Reported per call, in ns: go test -run '^$' -bench FilteredSyscalls ./internal/linux/seccomp
func BenchmarkFilteredSyscalls(b *testing.B) {
	for _, side := range []string{"none", "filter"} {
		for _, call := range []string{"openat", "creat", "stat"} {
			b.Run(side+"/"+call, func(b *testing.B) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestFilteredSyscallsChild$")
				cmd.Env = append(os.Environ(), "SECCOMP_BENCH_CHILD="+side+","+call+","+strconv.Itoa(b.N), "SECCOMP_BENCH_DIR="+b.TempDir())
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				i := strings.Index(string(out), "elapsed=")
				if i < 0 {
					b.Fatalf("child printed no time:\n%s", out)
				}
				var wall int64
				if _, err := fmt.Sscanf(string(out[i:]), "elapsed=%d", &wall); err != nil {
					b.Fatalf("child's time: %v\n%s", err, out)
				}
				b.ReportMetric(float64(wall)/float64(b.N), "ns/call")
			})
		}
	}
}

// TestFilteredSyscallsChild is BenchmarkFilteredSyscalls's child: it does nothing unless that
// benchmark ran it.
func TestFilteredSyscallsChild(t *testing.T) {
	spec := os.Getenv("SECCOMP_BENCH_CHILD")
	if spec == "" {
		t.Skip("the child of BenchmarkFilteredSyscalls")
	}
	parts := strings.Split(spec, ",")
	side, call := parts[0], parts[1]
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("SECCOMP_BENCH_DIR")
	file := filepath.Join(dir, "x")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	if side == "filter" {
		prog, err := Program()
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := Load(prog, unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, n)
	if call == "creat" {
		for i := range names {
			names[i] = filepath.Join(dir, "c"+strconv.Itoa(i))
		}
	}
	var st unix.Stat_t
	start := time.Now()
	for i := 0; i < n; i++ {
		var fd int
		switch call {
		case "openat":
			fd, err = unix.Openat(unix.AT_FDCWD, file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		case "creat":
			fd, err = unix.Openat(unix.AT_FDCWD, names[i], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
		case "stat":
			err = unix.Fstatat(unix.AT_FDCWD, file, &st, 0)
			fd = -1
		}
		if err != nil {
			t.Fatal(err)
		}
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	fmt.Printf("elapsed=%d\n", time.Since(start).Nanoseconds())
}
