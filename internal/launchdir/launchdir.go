// Package launchdir names the directories and files of a launch directory (docs/internals.md),
// in one place for the daemon, the shim, the launch pipeline, the brokers and the readiness
// probe. It holds names only: what each file contains is defined by the package that writes it.
package launchdir

import "path/filepath"

// LaunchesDir, in the runtime directory R, holds one launch directory per launch:
// R/launches/<id>.
const LaunchesDir = "launches"

// Names in a launch directory L.
const (
	// RunDir is L/run, bound read-only at /run/agentbox in the box (relay and agent sockets,
	// generated files). It is the only part of L a box sees.
	RunDir = "run"
	// ShimConfigFile is shim.Config, written by the daemon.
	ShimConfigFile = "shim.json"
	// RequestFile is the engine's request bytes (engine.Engine.Request), written by the daemon.
	RequestFile = "request.json"
	// SocketFile is the shim's socket (attach, watch, status).
	SocketFile = "shim.sock"
	// StatusFile is shim.Status, written atomically by the shim when the launch ends.
	StatusFile = "status.json"
	// OutputFile is a detached box's output.
	OutputFile = "output.log"
	// ShimLogFile is the shim's own log (its stderr).
	ShimLogFile = "shim.log"
	// IntegrityFile is the integrity broker's snapshot of the launch's protected paths.
	IntegrityFile = "integrity.json"
	// IntegrityFoldersFile is the integrity broker's record of the folders in git-ignored
	// places present when the launch began (integrity.State.RecordFolders), saved once made.
	IntegrityFoldersFile = "integrity-folders.json"
	// GuardsFile is the integrity broker's record of the guards of absent protected paths.
	GuardsFile = "guards.json"
	// EgressStateFile is the egress broker's record of the allowlist and port the launch
	// started with, so that a restarted daemon serves the same.
	EgressStateFile = "egress.json"
	// SSHStateFile is the ssh broker's record of the git.ssh the launch started with, so that
	// a restarted daemon serves the same legs.
	SSHStateFile = "sshbroker.json"
	// BrokersEndedFile, written by the daemon once every broker's end is done for the launch
	// (the check at exit among them), tells a daemon that settles the launch again (its
	// outcome's record failed, or the daemon ended before it) to only record the outcome.
	BrokersEndedFile = "brokers-ended"
)

// Dir returns the launch directory of launch id in runtime directory runtimeDir.
func Dir(runtimeDir, id string) string {
	return filepath.Join(runtimeDir, LaunchesDir, id)
}
