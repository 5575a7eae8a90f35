package llm

import (
	"time"

	"github.com/agentbox/agentbox/internal/relay"
)

// CheckCredentialFile is the relay's secret-file check, exported to the tests.
var CheckCredentialFile = relay.CheckSecretFile

// SetRacyNow replaces the clock credential file times are compared with, until restore.
func SetRacyNow(now func() time.Time) (restore func()) {
	old := racyNow
	racyNow = now
	return func() { racyNow = old }
}

// ServerTools is the relay's reading of the server-side tools a body declares, exported to the
// tests.
var ServerTools = serverTools
