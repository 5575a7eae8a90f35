// Command startup measures box start-up in one run, side by side: /bin/true bare, under
// bubblewrap, and through `agentbox run` with a warm daemon; then the daemon's idle RSS and
// box-init's RSS. It prints a Markdown table for docs/benchmarks.md.
//
// Beside them it measures floors, what no daemon-mediated launch can go below on the same
// machine: a Go program that does nothing (this binary with -noop), the agentbox CLI's own
// start and exit (`agentbox --version`), and a launch through a daemon with no box at all: a
// Go client (this binary, -floor-client) asks a Go server (this binary, -floor-serve) on a
// unix socket to run /bin/true, and exits with its status; and a box alone: a box of the native
// engine, prestarted as the daemon's spare shim prestarts it, handed the request of /bin/true,
// timed until its box-init has exited (prestartedFloor). With -pairs they run in the same
// rounds as the launches.
//
// After the table it prints where the time of agentbox's launches went: the stages of the
// launch whose end-to-end time was the median (the daemon's record of it, `agentbox launches
// --json`: internal/launch's stage timings, and those of its end the daemon adds: the box's run,
// the brokers' end with the check at exit, box-init's exit, the work folders' removal), next to
// each stage's median over all of them.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/boxmain"
	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
)

func main() {
	// The prestarted box's floor (prestartedFloor) runs its box-init and box-exec from this
	// binary, as the agentbox-box helper does.
	if len(os.Args) > 1 {
		if entry, ok := boxmain.Entries[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	n := flag.Int("n", 100, "iterations per case")
	gap := flag.Duration("gap", 0, "pause between iterations (0: back to back); a person's launches are seconds apart, and agentbox replaces its spare shim in the background after each")
	bin := flag.String("agentbox", "bin/agentbox", "agentbox binary")
	noop := flag.Bool("noop", false, "exit at once (a floor)")
	floorServe := flag.String("floor-serve", "", "serve the floor's launches on this unix socket (internal)")
	floorClient := flag.String("floor-client", "", "ask the floor's server on this unix socket to run the argument (internal)")
	pairs := flag.Bool("pairs", false, "(b), (c) and the floors, alternating: n rounds, each ratio within its round (on a loaded machine only same-run ratios mean anything)")
	base := flag.String("base", "", "with -pairs: another build's agentbox binary (the code before a change), run with its own daemon in the same rounds as (b) and (c)")
	engineName := flag.String("engine", "", "the engine of (c) and (c0) (config.yaml's engine; empty: the default)")
	flag.BoolVar(&homeCaches, "caches", false, "the home holds the package caches a developer's home has (~/.npm, ~/.cache/pip, ~/.cache/uv, ~/.cache/go-build, ~/.cargo, ~/go/pkg/mod), one small file each: each launch's box then mounts their box-cache overlays, as a developer's does (without it, an empty home: the Python bytecode's overlay only)")
	flag.BoolVar(&gitWork, "git", false, "the launches' workspace is a git repository with one commit (as an agent's usually is; without it, a folder in no repository)")
	like := flag.Bool("like", false, "with -pairs: also bwrap run with the argv agentbox's own bwrap engine renders for the same plan, /bin/true in place of its box-init (like for like)")
	flag.Parse()
	switch {
	case *noop:
		return
	case *floorServe != "":
		serveFloor(*floorServe)
		return
	case *floorClient != "":
		os.Exit(askFloor(*floorClient, flag.Arg(0)))
	}
	config := ""
	if *engineName != "" {
		config = "engine: " + *engineName + "\n"
	}
	ab, runtimeRoot, stop := startAgentbox(*bin, config)
	defer stop()

	self, err := os.Executable()
	check(err)
	sock := filepath.Join(runtimeRoot, "floor.sock")
	srv := exec.Command(self, "-floor-serve", sock)
	srv.Stdout = os.Stderr
	check(srv.Start())
	defer func() { srv.Process.Kill(); srv.Wait() }()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		} else if i == 500 {
			fatalf("floor server: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cases := []struct {
		name   string
		cmd    func() *exec.Cmd
		stages bool // an agentbox launch: print its stages' breakdown
	}{
		{"floor: a Go program that does nothing", func() *exec.Cmd { return exec.Command(self, "-noop") }, false},
		{"floor: the agentbox CLI's start and exit (agentbox --version)", func() *exec.Cmd { return ab("--version") }, false},
		{"floor: a Go client asks a Go server on a unix socket to run /bin/true, no box", func() *exec.Cmd {
			return exec.Command(self, "-floor-client", sock, "/bin/true")
		}, false},
		{"(a) /bin/true bare", func() *exec.Cmd { return exec.Command("/bin/true") }, false},
		{"(b) bwrap --unshare-all --ro-bind / / --dev /dev --proc /proc /bin/true", func() *exec.Cmd {
			return exec.Command("bwrap", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "/bin/true")
		}, false},
		{"(c) agentbox run /bin/true (warm daemon, end to end)", func() *exec.Cmd { return ab("run", "/bin/true") }, true},
	}
	if *pairs {
		rivals := []rival{{name: cases[4].name, cmd: cases[4].cmd}, {name: cases[5].name, cmd: cases[5].cmd, ab: ab}}
		if *base != "" {
			bab, _, bstop := startAgentbox(*base, config)
			defer bstop()
			rivals = append(rivals, rival{name: "(c0) the same, built from " + *base, cmd: func() *exec.Cmd { return bab("run", "/bin/true") }, ab: bab})
		}
		if *like {
			args, lstop := bwrapArgv(*bin)
			defer lstop()
			rivals = append(rivals, rival{name: fmt.Sprintf("(b1) bwrap with the argv of agentbox's bwrap engine for the same plan (%d arguments), /bin/true as its program", len(args)),
				cmd: func() *exec.Cmd { return exec.Command("bwrap", args...) }})
		}
		// The floors, in the same rounds: what no launch through agentbox's daemon can go
		// below on this machine at this moment.
		for _, c := range cases[:3] {
			rivals = append(rivals, rival{name: c.name, cmd: c.cmd})
		}
		if prep, run, err := prestartedFloor(runtimeRoot); err != nil {
			fmt.Fprintf(os.Stderr, "startup: no prestarted box's floor: %v\n", err)
		} else {
			rivals = append(rivals, rival{name: prestartedName, prep: prep, run: run})
		}
		runPairs(rivals, *n, *gap)
		return
	}
	fmt.Printf("Iterations %v apart. CPU: all processes of the machine, per iteration (from /proc/stat).\n\n", *gap)
	fmt.Printf("| case | n | median | p95 | CPU |\n|---|---|---|---|---|\n")
	var breakdown string
	for _, c := range cases {
		if _, err := exec.LookPath(c.cmd().Path); err != nil {
			fmt.Printf("| %s | – | not installed | |\n", c.name)
			continue
		}
		var ds []time.Duration
		var busy time.Duration
		for i := 0; i < *n; i++ {
			cmd := c.cmd()
			b0 := busyCPU()
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				fatalf("%s: %v: %s", c.name, err, out)
			}
			ds = append(ds, time.Since(t0))
			time.Sleep(*gap) // what the launch left running in the background counts too
			busy += busyCPU() - b0
		}
		inOrder := slices.Clone(ds)
		med, p95 := stats(ds)
		fmt.Printf("| %s | %d | %s | %s | %s |\n", c.name, *n, ms(med), ms(p95), ms(busy/time.Duration(*n)))
		if c.stages {
			breakdown = stageBreakdown(ab, inOrder)
		}
	}
	if prep, run, err := prestartedFloor(runtimeRoot); err != nil {
		fmt.Printf("| %s | – | %v | |\n", prestartedName, err)
	} else {
		r := rival{name: prestartedName, prep: prep, run: run}
		var ds []time.Duration
		for i := 0; i < *n; i++ {
			ds = append(ds, r.time())
			time.Sleep(*gap)
		}
		med, p95 := stats(ds)
		fmt.Printf("| %s | %d | %s | %s | |\n", prestartedName, *n, ms(med), ms(p95))
	}
	fmt.Print(breakdown)

	// RSS: the idle daemon, and box-init of a running box.
	pidb, err := os.ReadFile(filepath.Join(runtimeRoot, "run", "agentbox", "daemon.pid"))
	check(err)
	daemonPid := strings.TrimSpace(string(pidb))
	idOut, err := ab("run", "-d", "sleep", "--", "60").Output()
	check(err)
	id := strings.TrimSpace(string(idOut))
	var boxPid int
	for i := 0; i < 500 && boxPid == 0; i++ {
		lo, _ := ab("launches", "--json").Output()
		var ls []struct {
			ID     string `json:"id"`
			BoxPid int    `json:"boxPid"`
			State  string `json:"state"`
		}
		json.Unmarshal(lo, &ls)
		for _, l := range ls {
			if l.ID == id && l.State == "running" {
				boxPid = l.BoxPid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("\n| process | RSS |\n|---|---|\n")
	fmt.Printf("| daemon (idle, after %d launches) | %s |\n", 2**n+1, rss(daemonPid))
	if boxPid != 0 {
		fmt.Printf("| box-init (PID 1 of a running box) | %s |\n", rss(fmt.Sprint(boxPid)))
		shimPid := ppid(boxPid)
		fmt.Printf("| box-shim (one per box) | %s |\n", rss(shimPid))
	}
	ab("stop", id).Run()
}

// stageBreakdown returns, as a Markdown table, the stages of the launch whose end-to-end time
// was the median of the runs just made (ds, in the order they ran), from the launches' records
// (`agentbox launches --json`), next to each stage's median over all of them.
func stageBreakdown(ab func(...string) *exec.Cmd, ds []time.Duration) string {
	out, err := ab("launches", "--json", "--limit", fmt.Sprint(len(ds))).Output()
	check(err)
	var ls []struct {
		ID     string `json:"id"`
		Stages []struct {
			Name     string        `json:"name"`
			Duration time.Duration `json:"durationNs"`
		} `json:"stages"`
	}
	check(json.Unmarshal(out, &ls))
	if len(ls) != len(ds) {
		return fmt.Sprintf("\n(stage breakdown: %d launch records for %d runs)\n", len(ls), len(ds))
	}
	slices.Reverse(ls) // oldest first, as the runs
	idx := make([]int, len(ds))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return ds[idx[a]] < ds[idx[b]] })
	mid := idx[len(idx)/2]
	all := map[string][]time.Duration{}
	for _, l := range ls {
		for _, s := range l.Stages {
			all[s.Name] = append(all[s.Name], s.Duration)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nStages of the median launch (%s end to end, launch %.8s) and each stage's median over the %d launches "+
		"(the daemon's records; record and shim overlap when an attached launch finds a spare; watch runs after the answer, "+
		"while the client attaches; box is the watch to the shim's final status: the client's attach, the box's start, the program and the box's end; "+
		"end-brokers is every broker's end, the check at exit among them; box-init-exit the wait for box-init's exit after that):\n\n| stage | median launch | median of all |\n|---|---|---|\n", ms(ds[mid]), ls[mid].ID, len(ls))
	var sum time.Duration
	for _, s := range ls[mid].Stages {
		m, _ := stats(all[s.Name])
		note := ""
		if s.Name == "work-removal" {
			note = " (after the answer: not in the client's time)"
		} else {
			sum += s.Duration
		}
		fmt.Fprintf(&b, "| %s%s | %s | %s |\n", s.Name, note, ms(s.Duration), ms(m))
	}
	fmt.Fprintf(&b, "| (sum of the stages before the answer) | %s | |\n| (the rest: the CLI's start, the request's and the answers' ways, the record's commit, the CLI's exit; less where stages overlapped) | %s | |\n",
		ms(sum), ms(ds[mid]-sum))
	return b.String()
}

const prestartedName = "floor: a box of the native engine, prestarted, handed the request of /bin/true until box-init's exit (no daemon, shim or client)"

// rival is one case of runPairs: a command (cmd), or a function run in this process (run,
// after prep, which is not timed); ab, for an agentbox, runs its CLI (for the stages).
type rival struct {
	name string
	cmd  func() *exec.Cmd
	prep func() error
	run  func() error
	ab   func(...string) *exec.Cmd
}

// time runs r once and returns how long it took.
func (r rival) time() time.Duration {
	if r.prep != nil {
		if err := r.prep(); err != nil {
			fatalf("%s: %v", r.name, err)
		}
	}
	t0 := time.Now()
	if r.run != nil {
		if err := r.run(); err != nil {
			fatalf("%s: %v", r.name, err)
		}
		return time.Since(t0)
	}
	if out, err := r.cmd().CombinedOutput(); err != nil {
		fatalf("%s: %v: %s", r.name, err, out)
	}
	return time.Since(t0)
}

// runPairs runs n rounds of the rivals (bwrap first, then agentbox builds), each round in
// another order (rotated), gap apart, and prints each one's median and p95, the median of the
// rounds' ratios to the first, the load average at the start and the end, and the stages of
// each agentbox's median launch.
func runPairs(rivals []rival, n int, gap time.Duration) {
	load0 := loadavg()
	ds := make([][]time.Duration, len(rivals))
	ratios := make([][]time.Duration, len(rivals)) // to rivals[0], in thousandths
	for i := 0; i < n; i++ {
		round := make([]time.Duration, len(rivals))
		for k := range rivals {
			j := (i + k) % len(rivals)
			round[j] = rivals[j].time()
			time.Sleep(gap)
		}
		for j, d := range round {
			ds[j] = append(ds[j], d)
			ratios[j] = append(ratios[j], d*1000/round[0])
		}
	}
	fmt.Printf("%d rounds, each in another order, %v apart; load average %s at the start, %s at the end.\n\n", n, gap, load0, loadavg())
	fmt.Printf("| case | median | p95 | median of the rounds' ratios to (b) |\n|---|---|---|---|\n")
	var breakdowns []string
	inOrder := make([][]time.Duration, len(rivals))
	for j, r := range rivals {
		inOrder[j] = slices.Clone(ds[j])
		m, p := stats(ds[j])
		rm, _ := stats(ratios[j])
		fmt.Printf("| %s | %s | %s | %.2f × |\n", r.name, ms(m), ms(p), float64(rm)/1000)
		if r.ab != nil {
			breakdowns = append(breakdowns, r.name+":\n"+stageBreakdown(r.ab, inOrder[j]))
		}
	}
	for j := 2; j < len(rivals); j++ {
		if !strings.HasPrefix(rivals[j].name, "(") { // a floor
			continue
		}
		var r []time.Duration
		for i := range inOrder[1] {
			r = append(r, inOrder[1][i]*1000/inOrder[j][i])
		}
		rm, _ := stats(r)
		fmt.Printf("\n(c) against %s, median of the rounds' ratios: %.3f ×\n", strings.SplitN(rivals[j].name, " ", 2)[0], float64(rm)/1000)
	}
	for _, b := range breakdowns {
		fmt.Print("\n", b)
	}
}

// gitWork: startAgentbox makes each workspace a git repository (-git).
var gitWork bool

// homeCaches: startAgentbox fills the home with the package caches' folders (-caches).
var homeCaches bool

// startAgentbox starts bin's daemon with a home, state, configuration and runtime folder of
// its own (the first launch starts it) and returns how to run bin's CLI there, the runtime
// root, and how to stop the daemon and remove the folders.
func startAgentbox(bin, config string) (ab func(args ...string) *exec.Cmd, runtimeRoot string, stop func()) {
	abs, err := filepath.Abs(bin)
	check(err)
	root, err := os.MkdirTemp("/tmp", "abbench")
	check(err)
	// XDG_RUNTIME_DIR is a tmpfs on a systemd host (/run/user/UID); /dev/shm stands in for it
	// here, so that the runtime files of a launch cost what they cost there.
	// Not for the bwrap engine, whose box mounts a /dev of its own over the host's, nor as
	// root: a root-run box's runtime folder under /dev/shm cannot be opened by its box uid
	// (its launches fail with mount_failed, on main as well; a tmpfs elsewhere works).
	runtimeRoot = root
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && !strings.Contains(config, "bwrap") && os.Geteuid() != 0 {
		runtimeRoot, err = os.MkdirTemp("/dev/shm", "abbench")
		check(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + mk(root, "home"), "XDG_RUNTIME_DIR=" + mk(runtimeRoot, "run"),
		"XDG_STATE_HOME=" + mk(root, "state"), "XDG_CONFIG_HOME=" + mk(root, "config")}
	work := mk(root, "work")
	if homeCaches {
		for _, rel := range []string{".npm", ".cache/pip", ".cache/uv", ".cache/go-build", ".cargo", "go/pkg/mod"} {
			d := filepath.Join(root, "home", rel)
			check(os.MkdirAll(d, 0o700))
			check(os.WriteFile(filepath.Join(d, "bench"), []byte("bench\n"), 0o644))
		}
	}
	if gitWork {
		check(os.WriteFile(filepath.Join(work, "main.go"), []byte("package main\n"), 0o644))
		check(os.WriteFile(filepath.Join(work, ".gitignore"), []byte("*.log\nbuild/\n"), 0o644))
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=bench", "-c", "user.email=bench@example.org", "commit", "-qm", "bench"}} {
			c := exec.Command("git", args...)
			c.Dir = work
			if out, err := c.CombinedOutput(); err != nil {
				fatalf("git %v in the workspace: %v: %s", args, err, out)
			}
		}
	}
	if config != "" {
		check(os.WriteFile(filepath.Join(mk(root, "config/agentbox"), "config.yaml"), []byte(config), 0o600))
	}
	ab = func(args ...string) *exec.Cmd {
		c := exec.Command(abs, args...)
		c.Env, c.Dir = env, work
		return c
	}
	stop = func() {
		ab("daemon", "stop").Run()
		os.RemoveAll(root)
		if runtimeRoot != root {
			os.RemoveAll(runtimeRoot)
		}
	}
	// Warm the daemon (the first run starts it). A launch that fails may have started it:
	// it is stopped before the bench exits.
	// Then wait for the daemon's Python bytecode mirrors (made in the background after its
	// start, and after a launch whose Python set has none; a launch meanwhile waits up to
	// 200 ms for its mirror in its plan stage): a warm daemon has them. A build under way is a
	// folder .new-* in the runtime directory's bytecode folder.
	building := func() bool {
		m, _ := filepath.Glob(filepath.Join(runtimeRoot, "run", "agentbox", "bytecode", ".new-*"))
		return len(m) > 0
	}
	t0 := time.Now()
	for i := 0; i < 5; i++ {
		if out, err := ab("run", "/bin/true").CombinedOutput(); err != nil {
			stop()
			fatalf("warm-up of %s: %v: %s", bin, err, out)
		}
		if !building() {
			break
		}
		for building() && time.Since(t0) < 5*time.Minute {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if building() {
		fmt.Fprintf(os.Stderr, "startup: %s's bytecode mirror still being made after %v\n", bin, time.Since(t0).Round(time.Second))
	}
	return ab, runtimeRoot, stop
}

// bwrapArgv returns the bwrap argv that agentbox's bwrap engine renders for a launch of
// /bin/true's plan, and how to end it: bin's daemon, configured with `engine: bwrap`, runs a
// detached launch (sleep) whose request (the launch directory's request.json) holds the argv
// while it runs (its run directory, bound into the box, exists as long). The argv is expanded
// as the engine's monitor expands it (bwrap.ExpandArgs: masks, binds beneath the workspace —
// by path here, where the monitor passes the descriptor it opened), without the monitor's
// status descriptor, and with /bin/true where the engine runs its bwrap-init.
func bwrapArgv(bin string) (args []string, stop func()) {
	ab, runtimeRoot, abStop := startAgentbox(bin, "engine: bwrap\n")
	out, err := ab("run", "--detach", "sleep", "3600").Output()
	if err != nil {
		fatalf("a detached launch with the bwrap engine: %v", err)
	}
	id := strings.TrimSpace(string(out))
	stop = func() { ab("stop", id).Run(); abStop() }
	raw, err := os.ReadFile(filepath.Join(runtimeRoot, "run", "agentbox", "launches", id, launchdir.RequestFile))
	if err != nil {
		stop()
		fatalf("the bwrap engine's request: %v", err)
	}
	req, err := bwrap.ParseRequest(raw)
	if err != nil {
		stop()
		fatalf("the bwrap engine's request: %v", err)
	}
	stat := func(p string) (isDir, ok bool) {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir(), err == nil
	}
	open := func(src, _ string) (string, error) { _, err := os.Stat(src); return src, err }
	exp, err := bwrap.ExpandArgs(req.Args, stat, open)
	if err != nil {
		stop()
		fatalf("expand the bwrap engine's argv: %v", err)
	}
	for i := 0; i < len(exp); i++ {
		switch {
		case exp[i] == "--json-status-fd":
			i++
		case exp[i] == "--":
			return append(args, "--", "/bin/true"), stop
		default:
			args = append(args, exp[i])
		}
	}
	stop()
	fatalf("the bwrap engine's argv has no program: %q", exp)
	return nil, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	check(err)
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// serveFloor runs, for each connection on the unix socket at path, the program named on its
// first line, and answers with its exit status (one byte): a launch through a daemon, with
// nothing else.
func serveFloor(path string) {
	ln, err := net.Listen("unix", path)
	check(err)
	for {
		c, err := ln.Accept()
		check(err)
		go func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			code := 0
			if err := exec.Command(strings.TrimSpace(line)).Run(); err != nil {
				code = 1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			c.Write([]byte{byte(code)})
		}()
	}
}

// askFloor asks the floor's server at path to run prog and returns its exit status.
func askFloor(path, prog string) int {
	c, err := net.Dial("unix", path)
	check(err)
	_, err = fmt.Fprintln(c, prog)
	check(err)
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	check(err)
	return int(b[0])
}

// busyCPU is the CPU time the machine's CPUs (those this process may run on) spent not idle
// since boot (/proc/stat).
func busyCPU() time.Duration {
	m, err := proc.ReadMachineCPU()
	check(err)
	return time.Duration(m.Total-m.Idle) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

func mk(root, name string) string {
	d := filepath.Join(root, name)
	check(os.Mkdir(d, 0o700))
	return d
}

func stats(ds []time.Duration) (median, p95 time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)*95/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func rss(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "n/a (" + err.Error() + ")"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "n/a"
}

func ppid(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "0"
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[1]
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "startup: "+format+"\n", a...)
	os.Exit(1)
}
