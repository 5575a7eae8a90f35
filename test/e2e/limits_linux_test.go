package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAttackTmpfsSizes guards issue 21 finding 11 (tmpfs): a box's /tmp, home and /dev/shm
// each had the kernel's default size, half of the host's RAM, which a box could fill and hold.
// Now every tmpfs has a size (limits.tmpMiB, limits.homeMiB, limits.shmMiB; /dev/shm 64 MiB by
// default): writing past it fails with ENOSPC, in both engines.
func TestAttackTmpfsSizes(t *testing.T) {
	for _, engine := range []string{"native", "bwrap"} {
		t.Run(engine, func(t *testing.T) {
			if engine == "bwrap" {
				if _, err := exec.LookPath("bwrap"); err != nil {
					t.Skipf("bwrap is not installed: %v", err)
				}
			}
			e := NewEnv(t)
			// Defaults: sizes only (filling 2 GiB is not this test's business), and /dev/shm filled.
			writeConfig(t, e, "engine: "+engine+"\n")
			checkTmpfs(t, e, map[string]string{"/tmp": "2097152 -", "home": "2097152 -", "/dev/shm": "65536 refused"})
			// Configured: each refuses a write one MiB past its size.
			writeConfig(t, e, "engine: "+engine+"\nlimits:\n  tmpMiB: 8\n  homeMiB: 6\n  shmMiB: 4\n")
			e.Run("", "daemon", "stop")
			checkTmpfs(t, e, map[string]string{"/tmp": "8192 refused", "home": "6144 refused", "/dev/shm": "4096 refused"})
		})
	}
}

// checkTmpfs runs a box that prints, for /tmp, the home and /dev/shm, the size statfs reports
// in KiB and whether writing one MiB more than that size succeeded ("-": not tried, when want
// says "-"), and compares with want (keyed by folder, "home" for the home).
func checkTmpfs(t *testing.T, e *Env, want map[string]string) {
	t.Helper()
	try := func(k string) string {
		if strings.HasSuffix(want[k], " -") {
			return "0"
		}
		kib, _, _ := strings.Cut(want[k], " ")
		return itoa(atoi(kib)/1024 + 1)
	}
	r := e.Box(`for d in /tmp "$HOME" /dev/shm; do
  kib=$(df -k --output=size "$d" | tail -1 | tr -d ' ')
  case $d in /tmp) n=` + try("/tmp") + `;; /dev/shm) n=` + try("/dev/shm") + `;; *) n=` + try("home") + `;; esac
  w=-
  if [ "$n" != 0 ]; then
    if head -c ${n}M /dev/zero > "$d/fill" 2>/dev/null; then w=written; else w=refused; fi
    rm -f "$d/fill"
  fi
  echo "$d $kib $w"
done`)
	if r.Code != 0 {
		t.Fatalf("box: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("box output %q", r.Stdout)
	}
	for _, l := range lines {
		d, got, _ := strings.Cut(l, " ")
		k := d
		if d != "/tmp" && d != "/dev/shm" {
			k = "home"
		}
		if got != want[k] {
			t.Errorf("%s: size in KiB and a write past it: %q, want %q", d, got, want[k])
		}
	}
}
