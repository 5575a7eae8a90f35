package shim

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// StopRaceMarker is the file a shim with InstallStopRaceHooks writes in its working launch
// directory once a stop that came before its box was set has been held past startBox's look
// for it (the test then knows the race it forces happened).
const StopRaceMarker = "stop-race-forced"

// InstallStopRaceHooks makes this process's shim hold a stop that arrives before the box is set
// until startBox has looked for stops (or 10 s have passed): the interleaving in which a stop
// recorded after the lock was released went unseen.
func InstallStopRaceHooks(launchDir string) {
	checked := make(chan struct{})
	var once sync.Once
	testHookStopChecked = func() { once.Do(func() { close(checked) }) }
	testHookStopBeforeBox = func() {
		select {
		case <-checked:
			os.WriteFile(filepath.Join(launchDir, StopRaceMarker), nil, 0o600)
		case <-time.After(10 * time.Second):
		}
	}
}
