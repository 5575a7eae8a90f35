package harnessstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/linux/landlock"
)

// ScrubCommand is argv[1] of the daemon's binary when it runs as the helper that edits a box's
// OpenCode database: `agentbox-daemon harness-scrub FOLDER NAME`, the host's saved answers
// (JSON) on its standard input.
const ScrubCommand = "harness-scrub"

// helperExe is the binary run as the helper: the daemon's own (its entries include
// ScrubCommand; a test binary's TestMain dispatches it too).
var helperExe = os.Executable

// runScrub edits the database name in the box's state folder through the helper, which
// Landlock confines to that folder: a database a box crafted, or a link it slipped in while
// another box of the workspace runs, cannot make the daemon's side write anything elsewhere,
// and a fault in SQLite's reading of it ends the helper, not the daemon.
func runScrub(folder, name string, rules []openCodeRule) error {
	exe, err := helperExe()
	if err != nil {
		return fmt.Errorf("the helper: %w", err)
	}
	in, _ := json.Marshal(rules)
	cmd := exec.Command(exe, ScrubCommand, folder, name)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("edit %s: %v: %s", filepath.Join(folder, name), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// ScrubMain is the helper's entry (ScrubCommand): it confines itself to FOLDER with Landlock
// (read and write beneath it, nothing else), then edits the OpenCode database NAME in it.
func ScrubMain(args []string) int {
	if len(args) != 2 || !filepath.IsAbs(args[0]) || strings.ContainsRune(args[1], '/') {
		fmt.Fprintf(os.Stderr, "usage: agentbox-daemon %s FOLDER NAME (run by the daemon only)\n", ScrubCommand)
		return 2
	}
	var rules []openCodeRule
	if err := json.NewDecoder(os.Stdin).Decode(&rules); err != nil {
		fmt.Fprintf(os.Stderr, "%s: the host's rules: %v\n", ScrubCommand, err)
		return 2
	}
	if err := landlock.RestrictProcess(landlock.Policy{MinABI: 1, RW: []string{args[0]}}); err != nil {
		fmt.Fprintf(os.Stderr, "%s: Landlock: %v\n", ScrubCommand, err)
		return 1
	}
	if err := scrubOpenCode(filepath.Join(args[0], args[1]), rules); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", ScrubCommand, err)
		return 1
	}
	return 0
}
