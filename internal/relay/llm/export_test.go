package llm

import "github.com/agentbox/agentbox/internal/relay"

// CheckCredentialFile is the relay's secret-file check, exported to the tests.
var CheckCredentialFile = relay.CheckSecretFile
