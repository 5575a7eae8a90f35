package shim

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Hook sets a test's shim process installs (InstallTestHooks), each forcing one interleaving.
const (
	// HooksStopRace: a stop reaches the shim after it decided to start the box and before the
	// engine starts it (startBox waits for the stop), and the stop is held, once recorded as
	// one before the box, until startBox has looked for such a stop: the interleavings in which
	// a stop recorded after the lock was released went unseen (a detached launch), and in which
	// the stop of a held box being started was taken for one before any start.
	HooksStopRace = "stop-race"
	// HooksWriteFail: the first attached client's connection reader waits, before it reads a
	// frame, until a write to that client has failed and been handled: the interleaving in
	// which a client that sent its detach and closed its connection met a write of the
	// program's output before the reader had read the detach.
	HooksWriteFail = "write-fail"
)

// RaceMarker is the file a shim with test hooks writes in its working launch directory once
// the interleaving its hooks force has happened (the test then knows the race was forced).
const RaceMarker = "race-forced"

// hookWait bounds a hook's wait for the other side of the race; past it the race was not
// forced, no marker is written and the test says so (it never passes by waiting).
const hookWait = 10 * time.Second

// InstallTestHooks installs this process's shim's hooks of set (HooksStopRace,
// HooksWriteFail); launchDir is where RaceMarker goes.
func InstallTestHooks(set, launchDir string) {
	forced := func() { os.WriteFile(filepath.Join(launchDir, RaceMarker), nil, 0o600) }
	// closer closes ch the first time it is called; waitFor reports whether ch closed in time.
	closer := func(ch chan struct{}) func() {
		var once sync.Once
		return func() { once.Do(func() { close(ch) }) }
	}
	waitFor := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-time.After(hookWait):
			return false
		}
	}
	switch set {
	case HooksStopRace:
		recorded, checked := make(chan struct{}), make(chan struct{})
		testHooks.beforeStart = func() { waitFor(recorded) }
		signalRecorded := closer(recorded)
		testHooks.stopBeforeBox = func() {
			signalRecorded()
			if waitFor(checked) {
				forced()
			}
		}
		testHooks.stopChecked = closer(checked)
	case HooksWriteFail:
		failed := make(chan struct{})
		testHooks.writeFailed = closer(failed)
		var once sync.Once
		testHooks.clientRead = func() {
			once.Do(func() {
				if waitFor(failed) {
					forced()
				}
			})
		}
	}
}
