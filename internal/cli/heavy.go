package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
)

// Heavy is what only the daemon binary (cmd/agentbox-daemon) links: the daemon, and a
// readiness probe in this process — with them SQLite, the relays, the brokers and the engines.
// The daemon binary sets it (internal/daemonmain). In the agentbox CLI it is empty, so that
// the CLI starts quickly (every `agentbox run` pays its start-up), and a command that needs it
// runs the daemon binary in its place with the same arguments (execDaemon): the two binaries
// have the same commands.
var Heavy struct {
	// RunDaemon serves launches until ctx ends (`agentbox daemon`).
	RunDaemon func(ctx context.Context) error
	// RunSystem renders the system policy's managed locks (`agentbox daemon --system`).
	RunSystem func(ctx context.Context, every time.Duration) error
	// Probe runs a readiness probe of engine ("" for the configured one) in this process.
	Probe func(ctx context.Context, engine string) (*api.Readiness, error)
	// Commands returns the commands of HeavyCommands (internal/cli/heavy): the configuration's
	// parsers and checks, the profiles, the attack battery and wrap mode's policy reading.
	Commands func() []*cobra.Command
}

// HeavyCommands are the commands only the daemon binary has, with their one-line help: the CLI
// lists them in its help and runs the daemon binary in its place for them (runsHeavy).
var HeavyCommands = []struct{ Name, Short string }{
	{"config", "Validate, show and describe agentbox configuration"},
	{"profiles", "List program profiles and where each program was found on your PATH"},
	{"selftest", "Try every known way out of a box, on this machine, and report"},
	{"wrap", "Wrap mode: PATH-first launchers that run managed programs boxed"},
}

// HeavyShort returns the one-line help of the heavy command name (HeavyCommands).
func HeavyShort(name string) string {
	for _, h := range HeavyCommands {
		if h.Name == name {
			return h.Short
		}
	}
	panic("cli: no heavy command " + name)
}

// heavyStubs returns, for the CLI, a command per HeavyCommands that runs the daemon binary in
// this process's place (Execute does so before cobra parses anything; these keep `agentbox
// --help` and completion of command names whole).
func heavyStubs() []*cobra.Command {
	var out []*cobra.Command
	for _, h := range HeavyCommands {
		out = append(out, &cobra.Command{
			Use: h.Name, Short: h.Short, DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error { return execDaemon() },
		})
	}
	return out
}

// runsHeavy reports whether args (os.Args[1:]) name one of HeavyCommands, directly or through
// `help` or cobra's completion requests, so that the CLI runs the daemon binary for them.
func runsHeavy(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case strings.HasPrefix(a, "-"):
			continue // the root's own flags (--help, --version) take no value
		case a == "help" || a == cobra.ShellCompRequestCmd || a == cobra.ShellCompNoDescRequestCmd:
			continue
		}
		for _, h := range HeavyCommands {
			if a == h.Name {
				return true
			}
		}
		return false
	}
	return false
}

// daemonBinary opens the daemon binary installed with this agentbox: this very binary when it
// is the daemon binary, else agentbox-daemon beside it or in ../libexec/agentbox/, used only
// when its owner and mode are safe and it was built from the same source (boxhelper). It
// returns the path to run it by — /proc/self/fd/N of the file that was checked, so that what
// runs is what was checked — and a function that closes that descriptor.
func daemonBinary() (path string, closeFn func(), err error) {
	if Heavy.RunDaemon != nil {
		return "/proc/self/exe", func() {}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	f, _, err := boxhelper.OpenBinary(exe, boxhelper.DaemonName)
	if err != nil {
		return "", nil, fmt.Errorf("%w\n  hint: agentbox runs its daemon from %s, installed beside %s (make build builds bin/%s; the package installs it in /usr/libexec/agentbox)",
			err, boxhelper.DaemonName, exe, boxhelper.DaemonName)
	}
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd()), func() { f.Close() }, nil
}

// execDaemon replaces this process with the daemon binary, run with this process's arguments
// (it has the same commands): for what the CLI does not link.
func execDaemon() error {
	p, closeFn, err := daemonBinary()
	if err != nil {
		return err
	}
	defer closeFn()
	return fmt.Errorf("run %s: %w", boxhelper.DaemonName, syscall.Exec(p, append([]string{"agentbox"}, os.Args[1:]...), os.Environ()))
}
