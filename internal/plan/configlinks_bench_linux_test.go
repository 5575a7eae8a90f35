//go:build linux

package plan

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkConfigLinks: FindConfigLinks and CheckConfigLinks of a home shaped like a dotfiles
// user's (60 dot-entries, 15 of them links; 20 configuration folders of 10 entries, 2 links
// each; ~/.config of 40 entries, 10 links), and of the machine's own home with the same
// folders, and with the folders of this process's PATH beside them, whose programs' links
// the daemon reads too (docs/benchmarks.md). Beside the wall time, the process's CPU time per call
// (getrusage), since this machine's wall time follows its load; and CheckWorkspace with the
// harness homes resolved at each call, the yardstick of review 17's figures.
func BenchmarkConfigLinks(b *testing.B) {
	root, _ := filepath.EvalSymlinks(b.TempDir())
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	os.MkdirAll(dot, 0o755)
	var folders []string
	for i := 0; i < 60; i++ {
		name := filepath.Join(home, ".d"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		switch {
		case i < 15:
			os.MkdirAll(home, 0o755)
			os.WriteFile(filepath.Join(dot, filepath.Base(name)), nil, 0o644)
			os.Symlink(filepath.Join(dot, filepath.Base(name)), name)
		case i < 35:
			os.MkdirAll(name, 0o755)
			folders = append(folders, name)
			for j := 0; j < 10; j++ {
				f := filepath.Join(name, "e"+string(rune('a'+j)))
				if j < 2 {
					os.Symlink(filepath.Join(dot, "x"), f)
				} else {
					os.WriteFile(f, nil, 0o644)
				}
			}
		default:
			os.WriteFile(name, nil, 0o644)
		}
	}
	cfg := filepath.Join(home, ".config")
	os.MkdirAll(cfg, 0o755)
	folders = append(folders, cfg)
	for j := 0; j < 40; j++ {
		f := filepath.Join(cfg, "c"+string(rune('a'+j%26))+string(rune('a'+j/26)))
		if j < 10 {
			os.Symlink(filepath.Join(dot, "c", filepath.Base(f)), f)
		} else {
			os.MkdirAll(f, 0o755)
		}
	}
	own, _ := os.UserHomeDir()
	var ownFolders []string
	for _, h := range append(append([]string(nil), HarnessHomes...), ConfigFolders...) {
		ownFolders = append(ownFolders, filepath.Join(own, h))
	}
	// The benchmark's own folders were made just now: the cache's racy rule would keep none.
	defer func(now func() time.Time) { linkNow = now }(linkNow)
	linkNow = func() time.Time { return time.Now().Add(time.Hour) }
	path := filepath.SplitList(os.Getenv("PATH"))
	for _, c := range []struct {
		name    string
		home    string
		folders []string
		path    []string
		cold    bool // linkCache emptied before each call: every folder read again
	}{{"dotfiles-home", home, folders, nil, false}, {"dotfiles-home-uncached", home, folders, nil, true},
		{"own-home", own, ownFolders, nil, false}, {"own-home-uncached", own, ownFolders, nil, true},
		{"own-home-and-PATH", own, ownFolders, path, false}, {"own-home-and-PATH-uncached", own, ownFolders, path, true}} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime()
			for i := 0; i < b.N; i++ {
				if c.cold {
					linkCache.Lock()
					clear(linkCache.folders)
					linkCache.Unlock()
				}
				if err := CheckConfigLinks("/tmp/project/x", c.home, findLinks(b, c.home, c.folders, c.path)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N)/1e3, "cpu-µs/op")
		})
	}
}

func BenchmarkCheckWorkspaceCPU(b *testing.B) {
	home, _ := os.UserHomeDir()
	f := WorkspaceFacts{Home: ResolveExisting(home), Harness: []string{".cache/tool"}}
	before := cpuTime()
	for i := 0; i < b.N; i++ {
		CheckWorkspace("/tmp/project/x", f)
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N)/1e3, "cpu-µs/op")
}

// cpuTime is the process's user and system CPU time so far, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
