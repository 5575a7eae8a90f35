package plan

import "testing"

// TestBuildSizesEveryTmpfs: every tmpfs of a plan has a size, a profile's private folders (a
// broker mount) included; zero limits mean the defaults, set ones are used.
func TestBuildSizesEveryTmpfs(t *testing.T) {
	for _, tc := range []struct {
		name           string
		lim            Limits
		tmp, home, shm int
	}{
		{"defaults", Limits{}, DefaultLimits.TmpMiB, DefaultLimits.HomeMiB, DefaultLimits.ShmMiB},
		{"configured", Limits{TmpMiB: 8, HomeMiB: 6, ShmMiB: 4}, 8, 6, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			in.Limits = tc.lim
			in.Brokers.Mounts = []Mount{{Kind: MountTmpfs, Target: "/home/u/.claude/session-env"}}
			p, err := Build(in)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range p.Mounts {
				if m.Kind != MountTmpfs {
					continue
				}
				n++
				want := tc.home
				if m.Target == "/tmp" {
					want = tc.tmp
				}
				if m.SizeMiB != want {
					t.Errorf("tmpfs %s: %d MiB, want %d", m.Target, m.SizeMiB, want)
				}
			}
			if n != 3 {
				t.Errorf("%d tmpfs mounts, want 3 (home, /tmp, the private folder)", n)
			}
			if p.ShmMiB != tc.shm {
				t.Errorf("/dev/shm: %d MiB, want %d", p.ShmMiB, tc.shm)
			}
		})
	}
}
