//go:build !linux

package harnessstate

import "errors"

// ScrubCommand is argv[1] of the daemon's binary when it runs as the helper that edits a box's
// OpenCode database (Linux only).
const ScrubCommand = "harness-scrub"

// runScrub needs the Linux helper.
func runScrub(folder, name string, rules []openCodeRule) error {
	return errors.New("editing a box's OpenCode database needs Linux (Landlock)")
}

// ScrubMain is the helper's entry; it runs on Linux only.
func ScrubMain(args []string) int { return 2 }
