package mount

import (
	"os"
	"path/filepath"
	"testing"
)

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
	// A watched name that holds a file or a folder after the loss is taken as replaced (bound or
	// masked again); one that holds a symlink, which no replacement of a bound file makes, or
	// nothing is removed (TestHostReplacementAfterLostEvents runs it in a real box).
	dir := t.TempDir()
	for name, mk := range map[string]func(string) error{
		"file":    func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"folder":  func(p string) error { return os.Mkdir(p, 0o700) },
		"symlink": func(p string) error { return os.Symlink("file", p) },
		"nothing": func(string) error { return nil },
	} {
		p := filepath.Join(dir, name)
		if err := mk(p); err != nil {
			t.Fatal(err)
		}
		r.names[p] = true
		r.overflow = true
		if got, want := r.removed(p), name == "symlink" || name == "nothing"; got != want {
			t.Errorf("after lost events, a watched path holding %s: removed %v, want %v", name, got, want)
		}
	}
}
