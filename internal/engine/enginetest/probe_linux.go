package enginetest

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/linux/fds"
)

// probes are the checks the probe program runs inside a box; each prints its findings.
var probes = map[string]func() error{
	"interfaces": probeInterfaces,
	"fds":        probeFDs,
}

func probeMain(args []string) int {
	if len(args) != 1 || probes[args[0]] == nil {
		fmt.Fprintf(os.Stderr, "usage: %s NAME (one of the suite's probes)\n", ProbeCommand)
		return 2
	}
	if err := probes[args[0]](); err != nil {
		fmt.Fprintf(os.Stderr, "probe %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// probeInterfaces prints each network interface and whether it is up, one a line.
func probeInterfaces() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		state := "down"
		if i.Flags&net.FlagUp != 0 {
			state = "up"
		}
		fmt.Printf("%s %s\n", i.Name, state)
	}
	return nil
}

// probeFDs prints the open descriptors, without the one it lists them with. It reads the
// directory with raw system calls so that the Go runtime opens nothing of its own.
func probeFDs() error {
	open, err := fds.Open()
	if err != nil {
		return err
	}
	sort.Ints(open)
	s := make([]string, len(open))
	for i, fd := range open {
		s[i] = strconv.Itoa(fd)
	}
	fmt.Println(strings.Join(s, " "))
	return nil
}
