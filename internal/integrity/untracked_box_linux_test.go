package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrackedUnlistedSaid (review 16, F5): a real box adds a file to the user's untracked
// scratch/ (git status: "?? scratch/" before and after) and a new file at the top (git status
// names it). The end of the run names the first, and only it; both stay in the workspace, as
// every untracked file does.
func TestUntrackedUnlistedSaid(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "bin/\n")
	write(t, filepath.Join(e.work, "scratch", "notes.txt"), "the user's notes\n")
	out := e.boxPlant(`printf 'package scratch\n' > scratch/x_test.go && printf 'package main\n' > new.go && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "untracked files that git status does not name") {
			line = l
		}
	}
	if !strings.Contains(line, ": 1 files: scratch/x_test.go (git status shows the untracked folder holding each as one line: scratch/)") || strings.Contains(line, "new.go") {
		t.Errorf("the end of the run: %q, want scratch/x_test.go named, new.go not:\n%s", line, out)
	}
	for _, rel := range []string{"scratch/x_test.go", "new.go", "scratch/notes.txt"} {
		if _, err := os.Lstat(filepath.Join(e.work, rel)); err != nil {
			t.Errorf("%s is gone from the workspace: %v", rel, err)
		}
	}
}

// TestIgnoredAndUntrackedAtOnce: one launch leaves both kinds of files the check at exit looks
// for: a real box leaves bin/tool (ignored) and scratch/x_test.go (in the user's untracked
// scratch/); the first is moved out of the workspace into the proposed changes, the second
// named at the end of the run and left.
func TestIgnoredAndUntrackedAtOnce(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "bin/\n")
	write(t, filepath.Join(e.work, "scratch", "notes.txt"), "the user's notes\n")
	out := e.boxPlant(`mkdir -p bin && printf '#!/bin/sh\n' > bin/tool && printf 'package scratch\n' > scratch/x_test.go && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(e.work, "bin", "tool")); err == nil {
		t.Errorf("bin/tool, left in a git-ignored place, is still in the workspace")
	}
	if listed := e.run("changes", e.lastLaunch().ID); !strings.Contains(listed, "bin/tool (left in a git-ignored place") {
		t.Errorf("agentbox changes does not list bin/tool:\n%s", listed)
	}
	if !strings.Contains(out, ": 1 files: scratch/x_test.go (git status shows the untracked folder holding each as one line: scratch/)") {
		t.Errorf("the end of the run does not name scratch/x_test.go:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(e.work, "scratch", "x_test.go")); err != nil {
		t.Errorf("scratch/x_test.go is gone from the workspace: %v", err)
	}
}
