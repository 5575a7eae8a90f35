//go:build linux

// Command openperm measures what fanotify permission events would cost git work in a workspace
// (issue #20 item 3: the candidate for a daemon run by root, docs/integrity.md "Closing the
// re-bind window"): directory marks with FAN_OPEN_PERM|FAN_EVENT_ON_CHILD on the folders that
// hold protected files (here the workspace's top and .git), so that every open of a file
// directly in them waits for the listener's answer, and nothing deeper in the tree does. The
// listener does what the rule there needs of each event: the opener's flags from
// /proc/TID/syscall (FAN_REPORT_TID), the file's birth time (statx on the event's descriptor),
// and an answer (FAN_ALLOW: nothing is refused here, the cost is what is measured).
//
// A repository of -files files (in src/, and -top more at its top) is made; each round runs,
// without the marks and then with them, -status times git status and once a git add -A and git
// commit after every file was rewritten (after one warm-up round, the two ways alternating
// which goes first). It prints the median of each and the events the marks raised. Root only (fanotify permission events need CAP_SYS_ADMIN).
//
//	go run ./bench/openperm -files 2000 -top 50 -status 20 -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	files := flag.Int("files", 2000, "files in src/")
	top := flag.Int("top", 50, "files at the repository's top")
	status := flag.Int("status", 20, "git status runs per round")
	rounds := flag.Int("rounds", 3, "rounds")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "openperm: fanotify permission events need root")
		os.Exit(2)
	}
	ws, err := os.MkdirTemp("", "openperm-")
	check(err)
	defer os.RemoveAll(ws)
	git(ws, "init", "-q", "-b", "main")
	write := func(round int) {
		for i := range *files {
			check(os.MkdirAll(filepath.Join(ws, "src", fmt.Sprint(i%50)), 0o755))
			check(os.WriteFile(filepath.Join(ws, "src", fmt.Sprint(i%50), fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("%d %d\n", round, i)), 0o644))
		}
		for i := range *top {
			check(os.WriteFile(filepath.Join(ws, fmt.Sprintf("top%d.txt", i)), []byte(fmt.Sprintf("%d %d\n", round, i)), 0o644))
		}
	}
	write(0)
	git(ws, "add", "-A")
	git(ws, "commit", "-qm", "0")
	var plainStatus, markedStatus, plainCommit, markedCommit []time.Duration
	var events atomic.Int64
	workload := func(round int, st, cm *[]time.Duration) {
		start := time.Now()
		for range *status {
			git(ws, "status", "--porcelain")
		}
		*st = append(*st, time.Since(start))
		write(round)
		start = time.Now()
		git(ws, "add", "-A")
		git(ws, "commit", "-qm", fmt.Sprint(round))
		*cm = append(*cm, time.Since(start))
	}
	// A warm-up, then the two ways alternating (which goes first changes each round).
	var warm []time.Duration
	workload(1, &warm, &warm)
	for r := 1; r <= *rounds; r++ {
		if r%2 == 1 {
			workload(2*r, &plainStatus, &plainCommit)
		}
		stop := listen(ws, &events)
		before := events.Load()
		workload(2*r+1, &markedStatus, &markedCommit)
		stop()
		fmt.Printf("round %d: %d events with the marks\n", r, events.Load()-before)
		if r%2 == 0 {
			workload(2*r, &plainStatus, &plainCommit)
		}
	}
	fmt.Printf("git status x%d: plain %v, marked %v (%.2fx)\n", *status, median(plainStatus), median(markedStatus), ratio(markedStatus, plainStatus))
	fmt.Printf("git add -A && git commit (%d files rewritten): plain %v, marked %v (%.2fx)\n", *files+*top, median(plainCommit), median(markedCommit), ratio(markedCommit, plainCommit))
}

// listen marks ws and ws/.git and answers every permission event in a thread of its own, as
// the rule would (the opener's flags, the file's birth time); stop removes the group.
func listen(ws string, events *atomic.Int64) (stop func()) {
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK|unix.FAN_REPORT_TID, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_LARGEFILE)
	check(err)
	for _, d := range []string{ws, filepath.Join(ws, ".git")} {
		check(unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, d))
	}
	var quit [2]int
	check(unix.Pipe2(quit[:], unix.O_CLOEXEC))
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		buf := make([]byte, 64*1024)
		for {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(quit[0]), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
				return
			}
			if pfd[1].Revents != 0 {
				return
			}
			n, err := unix.Read(fd, buf)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				return
			}
			for off := 0; off+unix.FAN_EVENT_METADATA_LEN <= n; {
				m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
				off += int(m.Event_len)
				if m.Fd < 0 {
					continue
				}
				events.Add(1)
				// What the rule reads: the opener's flags (the third word of openat's
				// arguments) and the file's birth time.
				if sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", m.Pid)); err == nil {
					_ = strings.Fields(string(sc))
				}
				var stx unix.Statx_t
				unix.Statx(int(m.Fd), "", unix.AT_EMPTY_PATH, unix.STATX_BTIME|unix.STATX_INO, &stx)
				resp := unix.FanotifyResponse{Fd: m.Fd, Response: unix.FAN_ALLOW}
				unix.Write(fd, (*[unsafe.Sizeof(resp)]byte)(unsafe.Pointer(&resp))[:])
				unix.Close(int(m.Fd))
			}
		}
	}()
	return func() {
		// The workload has ended: nothing is pending. Closing the group would allow what were.
		unix.Write(quit[1], []byte{0})
		<-done
		unix.Close(fd)
		unix.Close(quit[0])
		unix.Close(quit[1])
	}
}

func git(dir string, args ...string) {
	c := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@example.org"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := c.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "git %v: %v\n%s", args, err, out)
		os.Exit(1)
	}
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func ratio(a, b []time.Duration) float64 { return float64(median(a)) / float64(median(b)) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "openperm:", err)
		os.Exit(1)
	}
}
