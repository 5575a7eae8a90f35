package mount

import "testing"

// TestLostEventsCountOnlyWhereTheBoxWrites guards issue #20's lost events: after an inotify
// queue overflow, every kept path counted as removed, so that a host replacing /etc/shadow (a
// password change, by rename) in a root-run box, whose /etc is read-only there and never
// watched, stopped the box ("denied path /etc/shadow removed on the host") instead of masking
// the new file again. Now lost events make only a watched name (in a folder the box can write,
// where it could have created the file after a removal) count as removed; elsewhere what is
// at the path decides, and a removal seen before the loss still counts.
func TestLostEventsCountOnlyWhereTheBoxWrites(t *testing.T) {
	r := &removals{fd: -1, dirs: map[int32]string{}, seen: map[string]bool{"/home/u/.config/gone": true},
		names: map[string]bool{"/ws/.envrc": true, "/home/u/.config/token": true, "/home/u/.config/gone": true}}
	if r.removed("/etc/shadow") || r.removed("/ws/.envrc") {
		t.Fatal("a path counts as removed with no event")
	}
	r.overflow, r.pending = true, true
	for path, want := range map[string]bool{
		"/ws/.envrc": true, "/home/u/.config/token": true, "/home/u/.config/gone": true, // the box could have made them
		"/etc/shadow": false, "/etc/gshadow": false, // read-only in the box, never watched
	} {
		if got := r.removed(path); got != want {
			t.Errorf("after lost events, %s removed: %v, want %v", path, got, want)
		}
	}
	// The pass that follows the loss still treats watched names as possibly removed.
	if !r.begin() || !r.removed("/ws/.envrc") || r.removed("/etc/shadow") {
		t.Error("the pass after the loss")
	}
}
