package integrity

import (
	"crypto/sha1"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchWorkspace is a workspace whose .git holds 10,000 loose objects and whose integrity
// roots hold 1,000 files (hooks and workflows).
func benchWorkspace(b *testing.B) string {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	mustWrite(b, filepath.Join(ws, ".git/HEAD"), "ref: refs/heads/main\n")
	mustWrite(b, filepath.Join(ws, ".git/config"), "[core]\n\trepositoryformatversion = 0\n")
	for i := 0; i < 10000; i++ {
		mustWrite(b, filepath.Join(ws, ".git/objects", fmt.Sprintf("%02x", i%256), fmt.Sprintf("%038x", i)), fmt.Sprintf("blob %d", i))
	}
	for i := 0; i < 500; i++ {
		mustWrite(b, filepath.Join(ws, ".git/hooks", fmt.Sprintf("hook-%03d", i)), fmt.Sprintf("#!/bin/sh\necho %d\n", i))
		mustWrite(b, filepath.Join(ws, ".github/workflows", fmt.Sprintf("wf-%03d.yml", i)), fmt.Sprintf("on: push\njobs: {j%d: {}}\n", i))
	}
	for i := 0; i < 200; i++ {
		mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("p%d", i%20), fmt.Sprintf("f%d.go", i)), "package p\n")
	}
	return ws
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshot measures Resolve plus Snapshot (roots and the executable-configuration
// scan), reporting the process CPU time per snapshot (getrusage).
func BenchmarkSnapshot(b *testing.B) {
	ws := benchWorkspace(b)
	b.ResetTimer()
	start := cpuTime()
	files := 0
	for i := 0; i < b.N; i++ {
		lay, err := Resolve(ws, nil)
		if err != nil {
			b.Fatal(err)
		}
		s := Snapshot(lay, Limits{})
		files = 0
		for _, r := range s.Roots {
			files += len(r.Tree) + 1
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(files), "entries")
}

// BenchmarkVerify measures one periodic verification of the same roots.
func BenchmarkVerify(b *testing.B) {
	ws := benchWorkspace(b)
	// Configuration is older than the racy window in steady state (racyWindow).
	time.Sleep(time.Duration(racyWindow) + 100*time.Millisecond)
	lay, err := Resolve(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := Snapshot(lay, Limits{})
	time.Sleep(time.Duration(racyWindow) + 100*time.Millisecond)
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if ts := s.VerifyRoots(); len(ts) != 0 {
			b.Fatalf("transitions %+v", ts)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkHomePlaceholders measures what a launch of an agent profile pays for its home
// placeholders: Hold then Release of 24 absent entries (as many as Claude Code's profile holds
// in an empty ~/.claude: files and folders), against Prepare and Release of an empty workspace
// (every box's workspace placeholders), in the same run.
func BenchmarkHomePlaceholders(b *testing.B) {
	home, _ := filepath.EvalSymlinks(b.TempDir())
	h := filepath.Join(home, ".claude")
	mustWrite(b, filepath.Join(h, "settings.json"), "{}\n")
	var phs []Placeholder
	for i := 0; i < 24; i++ {
		phs = append(phs, Placeholder{Path: filepath.Join(h, fmt.Sprintf("entry-%02d", i)), Dir: i%2 == 0, Beneath: h})
	}
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	reg := &Registry{Path: filepath.Join(b.TempDir(), "placeholders.json")}
	b.Run("home-24", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := reg.Hold("l", phs); err != nil {
				b.Fatal(err)
			}
			if _, err := reg.Release("l"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("workspace", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := reg.Prepare("l", ws, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := reg.Release("l"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchSubmodules adds to ws what git's execution surface reaches beyond the workspace's own
// gitdir: 20 submodule gitdirs under .git/modules (each with a config, its worktree's .git
// file and git's 13 sample hooks plus one hook of its own), 2 linked worktrees' gitdirs, and
// 20 nested repositories in the source tree (each with a config and sample hooks).
func benchSubmodules(b *testing.B, ws string) {
	var gm strings.Builder
	samples := func(hooks string) {
		for i := 0; i < 13; i++ {
			mustWrite(b, filepath.Join(hooks, fmt.Sprintf("s%02d.sample", i)), "#!/bin/sh\n# sample\n")
		}
	}
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("lib%02d", i)
		gd := filepath.Join(ws, ".git/modules", name)
		mustWrite(b, filepath.Join(gd, "HEAD"), "0123456789012345678901234567890123456789\n")
		mustWrite(b, filepath.Join(gd, "config"), "[core]\n\tworktree = ../../../"+name+"\n[remote \"origin\"]\n\turl = https://git.example.org/"+name+"\n")
		samples(filepath.Join(gd, "hooks"))
		mustWrite(b, filepath.Join(gd, "hooks", "pre-commit"), "#!/bin/sh\nexit 0\n")
		mustWrite(b, filepath.Join(ws, name, ".git"), "gitdir: ../.git/modules/"+name+"\n")
		fmt.Fprintf(&gm, "[submodule %q]\n\tpath = %s\n\turl = https://git.example.org/%s\n", name, name, name)
		nested := filepath.Join(ws, "src", fmt.Sprintf("vendor%02d", i), ".git")
		mustWrite(b, filepath.Join(nested, "HEAD"), "ref: refs/heads/main\n")
		mustWrite(b, filepath.Join(nested, "config"), "[core]\n\tbare = false\n")
		samples(filepath.Join(nested, "hooks"))
	}
	mustWrite(b, filepath.Join(ws, ".gitmodules"), gm.String())
	for _, wt := range []string{"wt1", "wt2"} {
		mustWrite(b, filepath.Join(ws, ".git/worktrees", wt, "commondir"), "../..\n")
		mustWrite(b, filepath.Join(ws, ".git/worktrees", wt, "gitdir"), "/elsewhere/"+wt+"/.git\n")
		mustWrite(b, filepath.Join(ws, ".git/worktrees", wt, "HEAD"), "ref: refs/heads/"+wt+"\n")
	}
}

// BenchmarkSnapshotSubmodules is BenchmarkSnapshot over a workspace with submodules, linked
// worktrees and nested repositories (benchSubmodules).
func BenchmarkSnapshotSubmodules(b *testing.B) {
	ws := benchWorkspace(b)
	benchSubmodules(b, ws)
	b.ResetTimer()
	start := cpuTime()
	pinned := 0
	for i := 0; i < b.N; i++ {
		lay, err := Resolve(ws, nil)
		if err != nil {
			b.Fatal(err)
		}
		Snapshot(lay, Limits{})
		pinned = len(lay.Protected)
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(pinned), "pinned")
}

// BenchmarkScanExecSubmodules measures the full workspace scan of the check at exit over the
// same workspace.
func BenchmarkScanExecSubmodules(b *testing.B) {
	ws := benchWorkspace(b)
	benchSubmodules(b, ws)
	lay, err := Resolve(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := Snapshot(lay, Limits{})
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if ts := s.VerifyExec(); len(ts) != 0 {
			b.Fatalf("transitions %+v", ts)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkScanExecFolders measures the full workspace scan over 20,000 folders of 5 files
// each (a node_modules-like tree: 1,000 packages of 20 folders), the case whose bound used to
// be reached.
func BenchmarkScanExecFolders(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	for i := 0; i < 20000; i++ {
		d := filepath.Join(ws, "node_modules", fmt.Sprintf("pkg%d", i/20), fmt.Sprintf("d%d", i%20))
		for j := 0; j < 5; j++ {
			mustWrite(b, filepath.Join(d, fmt.Sprintf("f%d.js", j)), "x")
		}
	}
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if found, n := ScanExec(ws, nil, nil, Limits{}); len(found) != 0 || n != 0 {
			b.Fatalf("found %v, %d not checked", found, n)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkScanExecBytecode measures what recording python bytecode adds to the full
// workspace scan: a site-packages-like tree of 2,000 packages, each a folder of 5 modules and
// its __pycache__ of 5 .pyc files (10,000 .pyc in all), against the same tree with the
// bytecode named .pyd (not recorded).
func BenchmarkScanExecBytecode(b *testing.B) {
	for _, ext := range []string{".pyc", ".pyd"} {
		b.Run(ext, func(b *testing.B) {
			ws, _ := filepath.EvalSymlinks(b.TempDir())
			for i := 0; i < 2000; i++ {
				d := filepath.Join(ws, ".venv", "lib", "site-packages", fmt.Sprintf("pkg%d", i))
				for j := 0; j < 5; j++ {
					mustWrite(b, filepath.Join(d, fmt.Sprintf("m%d.py", j)), "x = 1\n")
					mustWrite(b, filepath.Join(d, "__pycache__", fmt.Sprintf("m%d.cpython-311%s", j, ext)), "bytecode")
				}
			}
			want := 0
			if ext == ".pyc" {
				want = 10000
			}
			b.ResetTimer()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if found, n := ScanExec(ws, nil, nil, Limits{}); len(found) != want || n != 0 {
					b.Fatalf("found %d, %d not checked", len(found), n)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkScanExecPackageJSON measures what reading every package.json (checkPackageJSON:
// read, parsed, the hook part hashed, the folder's .husky and .git/hooks looked for) adds to
// the full workspace scan: "packages", a monorepo of 2,000 packages each with a package.json of
// about 1.5 KB (scripts, dependencies; no hook keys), against the same tree with the files
// named package.jsonx (not read); "node_modules", 10,000 package.json files of dependencies
// beneath node_modules (which the scan does not read: no hook reads a dependency's), against
// the same names changed likewise.
func BenchmarkScanExecPackageJSON(b *testing.B) {
	var deps strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&deps, "%q: \"^%d.%d.0\", ", fmt.Sprintf("dependency-%02d", i), i%7, i%5)
	}
	pkg := fmt.Sprintf(`{"name": "p", "version": "1.0.0", "private": true, "scripts": {"build": "tsc -p .", "test": "vitest run", "lint": "eslint . --ext .ts", "format": "prettier --write ."}, "dependencies": {%s"last": "1.0.0"}}`, deps.String())
	for _, c := range []struct {
		name string
		dir  func(i int) string
		n    int
	}{
		{"packages", func(i int) string { return filepath.Join("packages", fmt.Sprintf("p%d", i)) }, 2000},
		{"node_modules", func(i int) string {
			return filepath.Join("node_modules", fmt.Sprintf("dep%d", i/10), "node_modules", fmt.Sprintf("sub%d", i%10))
		}, 10000},
	} {
		for _, name := range []string{"package.json", "package.jsonx"} {
			// One tree for every run (b.Run calls the function more than once).
			ws, _ := filepath.EvalSymlinks(b.TempDir())
			for i := 0; i < c.n; i++ {
				mustWrite(b, filepath.Join(ws, c.dir(i), name), pkg)
				mustWrite(b, filepath.Join(ws, c.dir(i), "index.js"), "module.exports = 1\n")
			}
			b.Run(c.name+"/"+name, func(b *testing.B) {
				b.ResetTimer()
				start := cpuTime()
				for i := 0; i < b.N; i++ {
					if found, n := ScanExec(ws, nil, nil, Limits{}); len(found) != 0 || n != 0 {
						b.Fatalf("found %d, %d not checked", len(found), n)
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// BenchmarkIndexHidden: what each full scan adds to check the index (verifyIndexes: the
// skip-worktree and assume-unchanged flags, and stat data that hides a changed file), for an
// index of 10,000 entries (versions 3 and 4) made by git: "old", files older than the launch
// (each is looked at with one fstatat); "changed", every file changed during the launch with
// its entry's stat data matching (each is read and hashed: a box's checkout of 10,000 files).
func BenchmarkIndexHidden(b *testing.B) {
	for _, version := range []string{"3", "4"} {
		for _, changed := range []bool{false, true} {
			name := "v" + version + "-old"
			if changed {
				name = "v" + version + "-changed"
			}
			b.Run(name, func(b *testing.B) {
				ws, _ := filepath.EvalSymlinks(b.TempDir())
				gitIn(ws, "", false, "init", "-q", ".")
				for i := 0; i < 10000; i++ {
					mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("file%05d.go", i)), "package x\n")
				}
				gitIn(ws, "", false, "add", ".")
				gitIn(ws, "", false, "update-index", "--index-version", version)
				gitIn(ws, "", false, "update-index", "--skip-worktree", "src/d00/file00000.go")
				s := &State{Workspace: ws, Started: time.Now().Add(time.Hour)}
				if changed {
					s.Started = time.Time{}
				}
				s.Hidden, _, _ = readHidden(ws, nil, nil)
				b.ResetTimer()
				start := cpuTime()
				for i := 0; i < b.N; i++ {
					if tr, _ := s.verifyIndexes(nil, false); len(tr) != 0 || len(s.Hidden) != 1 {
						b.Fatalf("transitions %v, hidden %v", tr, s.Hidden)
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// BenchmarkIndexFlagged: the index check (verifyIndexes) of an index of 10,000 entries all
// flagged assume-unchanged before the launch (a user who flags files for speed): each entry's
// file is looked at with one fstatat (flaggedChanged; the stat data check passes over flagged
// entries); "old", files older than the launch; "changed", every file changed during the
// launch and still its entry's object (each read and hashed, at every check, as nothing is
// cleared). Compare with BenchmarkIndexHidden's v3-old, the same index unflagged.
func BenchmarkIndexFlagged(b *testing.B) {
	for _, changed := range []bool{false, true} {
		name := "old"
		if changed {
			name = "changed"
		}
		b.Run(name, func(b *testing.B) {
			ws, _ := filepath.EvalSymlinks(b.TempDir())
			gitIn(ws, "", false, "init", "-q", ".")
			for i := 0; i < 10000; i++ {
				mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("file%05d.go", i)), "package x\n")
			}
			gitIn(ws, "", false, "add", ".")
			gitIn(ws, "", false, "update-index", "--index-version", "3")
			cmd := exec.Command("sh", "-c", "git ls-files -z | xargs -0 git update-index --assume-unchanged")
			cmd.Dir = ws
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("flag the entries: %v\n%s", err, out)
			}
			s := &State{Workspace: ws, Started: time.Now().Add(time.Hour)}
			if changed {
				s.Started = time.Time{}
			}
			s.Hidden, _, _ = readHidden(ws, nil, nil)
			if len(s.Hidden) != 10000 {
				b.Fatalf("%d entries flagged, want 10000", len(s.Hidden))
			}
			b.ResetTimer()
			start := cpuTime()
			for i := 0; i < b.N; i++ {
				if tr, _ := s.verifyIndexes(nil, false); len(tr) != 0 || len(s.Hidden) != 10000 {
					b.Fatalf("transitions %v, hidden %d", tr, len(s.Hidden))
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkIndexStrip: what the index check adds when the launch changed the index and left
// extensions in it (review 14, F1 and F9): the cache tree git commit writes ("tree"), or that
// and an untracked cache ("tree-untr"), in an index of 10,000 entries whose files are older
// than the launch: the index is parsed, its extensions removed and the index written under
// index.lock (write, fsync, rename). The index is put back before each check, not timed.
func BenchmarkIndexStrip(b *testing.B) {
	for _, untr := range []bool{false, true} {
		name := "tree"
		if untr {
			name = "tree-untr"
		}
		b.Run(name, func(b *testing.B) {
			ws, _ := filepath.EvalSymlinks(b.TempDir())
			gitIn(ws, "", false, "init", "-q", ".")
			for i := 0; i < 10000; i++ {
				mustWrite(b, filepath.Join(ws, "src", fmt.Sprintf("d%02d", i%100), fmt.Sprintf("file%05d.go", i)), "package x\n")
			}
			gitIn(ws, "", false, "add", ".")
			gitIn(ws, "", false, "write-tree")
			if untr {
				gitIn(ws, "", false, "update-index", "--force-untracked-cache")
				gitIn(ws, "", false, "-c", "core.untrackedCache=true", "status", "--porcelain")
			}
			index := filepath.Join(ws, ".git/index")
			orig, err := os.ReadFile(index)
			if err != nil {
				b.Fatal(err)
			}
			s := &State{Workspace: ws, Started: time.Now().Add(time.Second)}
			s.Hidden, _, _ = readHidden(ws, nil, nil)
			time.Sleep(time.Until(s.Started))
			b.ResetTimer()
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				mustWrite(b, index, string(orig))
				b.StartTimer()
				start := cpuTime()
				tr, _ := s.verifyIndexes(nil, false)
				cpu += cpuTime() - start
				if untr != (len(tr) == 1) {
					b.Fatalf("transitions %+v", tr)
				}
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			after, _ := os.ReadFile(index)
			if _, exts, err := indexContents(after, sha1.Size); err != nil || len(exts) != 0 {
				b.Fatalf("extensions left: %+v, %v", exts, err)
			}
		})
	}
}

// BenchmarkObjectsCheck: what the check at exit adds to verify the object store a box wrote
// (verifyObjects, review 12 F8): 10,300 objects (10,000 files of about 1 KiB and their trees
// and commits, written by git commit in 100 commits) as loose objects ("loose": each inflated
// and hashed), then after git gc ("gc": one pack, verified by git index-pack --verify, whose
// CPU is the child's), every one changed during the launch. "old": the same store, nothing
// changed during the launch (each file looked at with one lstat).
func BenchmarkObjectsCheck(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	gitIn(ws, "", false, "init", "-q", ".")
	gitIn(ws, "", false, "config", "gc.auto", "0")
	body := strings.Repeat("x", 1000)
	for c := 0; c < 100; c++ {
		for i := 0; i < 100; i++ {
			mustWrite(b, filepath.Join(ws, fmt.Sprintf("d%02d", c), fmt.Sprintf("f%03d.txt", i)), fmt.Sprintf("%d %d %s\n", c, i, body))
		}
		gitIn(ws, "", false, "add", ".")
		gitIn(ws, "", false, "commit", "-qm", fmt.Sprint(c))
	}
	gitdirs := []string{filepath.Join(ws, ".git")}
	for _, stage := range []string{"loose", "gc"} {
		if stage == "gc" {
			gitIn(ws, "", false, "-c", "gc.writeCommitGraph=false", "gc", "-q")
		}
		for _, changed := range []bool{true, false} {
			name := stage
			if !changed {
				name += "-old"
			}
			b.Run(name, func(b *testing.B) {
				s := &State{Workspace: ws}
				since := int64(0)
				if !changed {
					since = time.Now().Add(time.Hour).UnixNano()
				}
				b.ResetTimer()
				start, child := cpuTime(), childCPU()
				for i := 0; i < b.N; i++ {
					if tr := s.verifyObjects(gitdirs, since); len(tr) != 0 {
						b.Fatalf("transitions %+v", tr)
					}
				}
				b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64((childCPU()-child).Microseconds())/1000/float64(b.N), "git-cpu-ms/op")
			})
		}
	}
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerifyExecInFiles measures the watch's rescan of the folders a batch of file events
// names (VerifyExecIn) as a box's file-heavy work leaves them: 50 folders of 100 small files
// (5,000 in all, no configuration among them). While such work runs, every batch of events
// (50 ms apart) rescans each folder it wrote in, so this is paid again and again beside the
// box's program, on the host's CPU (docs/benchmarks.md, "Work in the box").
func BenchmarkVerifyExecInFiles(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	var dirs []string
	for d := 0; d < 50; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("d%d", d))
		dirs = append(dirs, dir)
		for i := d; i < 5000; i += 50 {
			mustWrite(b, filepath.Join(dir, fmt.Sprintf("f%d.txt", i)), fmt.Sprintf("line %d needle\n", i))
		}
	}
	s := &State{Workspace: ws}
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if ts := s.VerifyExecIn(dirs); len(ts) != 0 {
			b.Fatalf("transitions %+v", ts)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkVerifyExecInLargeFolder measures the watch's rescan of one folder of 100,000 empty
// files (TestAttackPathDirPastBound's PATH folder): what each targeted check costs while a box
// fills such a folder, and so how long the watch then gathers events before the next one (four
// times as long: gatherRatio).
func BenchmarkVerifyExecInLargeFolder(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	dir := filepath.Join(ws, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 100000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%07d", i)))
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	s := &State{Workspace: ws}
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		if ts := s.VerifyExecIn([]string{dir}); len(ts) != 0 {
			b.Fatalf("transitions %+v", ts)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkVerifyExitFiles measures the check at exit (VerifyRoots and VerifyExit, as the
// integrity broker's end runs them) after a box's file-heavy work: a repository snapshotted
// empty, then 50 folders of 100 small files written and committed (5,000 index entries whose
// files changed during the launch, each read and hashed; 5,052 loose objects, each inflated
// and hashed), as bench/filework's workload leaves it (docs/benchmarks.md, "Work in the box").
func BenchmarkVerifyExitFiles(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	gitIn(ws, "", false, "init", "-q", ".")
	lay, err := Resolve(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	s := Snapshot(lay, Limits{})
	for i := 0; i < 5000; i++ {
		mustWrite(b, filepath.Join(ws, fmt.Sprintf("d%d", i%50), fmt.Sprintf("f%d.txt", i)), fmt.Sprintf("line %d needle\n", i))
	}
	gitIn(ws, "", false, "add", "-A")
	gitIn(ws, "", false, "-c", "user.name=bench", "-c", "user.email=bench@example.org", "commit", "-qm", "work")
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if ts := append(s.VerifyRoots(), s.VerifyExit()...); len(ts) != 0 {
			b.Fatalf("transitions %+v", ts)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
