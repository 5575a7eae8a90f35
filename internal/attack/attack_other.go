//go:build !linux

package attack

// attempts is empty where there are no boxes.
var attempts []Attempt

// Context is what an attempt gets inside the box.
type Context struct {
	Targets    Targets
	InitialFDs []int
}

// HostOptions say where the boxes under attack are launched from.
type HostOptions struct {
	Home, XDGRuntimeDir, RuntimeDir, Workspace string
	OutsideDirs                                []string
	Netns                                      bool
	CallerTTY                                  string
	Sessions                                   Sessions
}

// Sessions makes and revokes pairing sessions of the daemon under test.
type Sessions interface {
	Create() (id, pairing string, err error)
	Revoke(id string) error
}

// SecretEnvNames are the variables Host.Env sets to fake secrets.
var SecretEnvNames = []string{"ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY"}

// Host holds the host-side targets of the attempts.
type Host struct {
	Targets      Targets
	InjectMarker string
}

// SetUp returns ErrNotSupported.
func SetUp(o HostOptions) (*Host, error) { return nil, ErrNotSupported }

// Env returns nothing.
func (h *Host) Env() []string { return nil }

// Accepted returns 0.
func (h *Host) Accepted(name string) int { return 0 }

// Close does nothing.
func (h *Host) Close() error { return nil }

// ProcessesIn returns ErrNotSupported.
func ProcessesIn(ns string) ([]int, error) { return nil, ErrNotSupported }

// ProbeMain reports that probes are not supported.
func ProbeMain(args []string) int {
	println(ErrNotSupported.Error())
	return 2
}
