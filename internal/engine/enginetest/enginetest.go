// Package enginetest is the conformance suite every engine's tests run: real boxes on the real
// kernel, started in-process by the test binary acting as the shim.
//
// An engine's test package wires it up in TestMain, so that the test binary can also serve as
// the box's re-exec entry points and as the probe program the suite runs in boxes:
//
//	func TestMain(m *testing.M) {
//		enginetest.Main(m, map[string]func([]string) int{
//			"box-init": native.BoxInitMain,
//			"box-exec": execstage.Main,
//		})
//	}
//
//	func TestConformance(t *testing.T) {
//		enginetest.Run(t, func() engine.Engine { return &native.Engine{} })
//	}
package enginetest

import (
	"os"
	"testing"
)

// ProbeCommand is argv[1] of the test binary when it runs inside a box as the probe program.
const ProbeCommand = "enginetest-probe"

// Main is an engine test package's TestMain: when the test binary was re-executed with argv[1]
// naming one of entries (the engine's hidden entry points, "box-init" for the native engine) or ProbeCommand, it runs that and exits; otherwise it runs the tests.
func Main(m *testing.M, entries map[string]func(args []string) int) {
	if len(os.Args) > 1 {
		if os.Args[1] == ProbeCommand {
			os.Exit(probeMain(os.Args[2:]))
		}
		if entry, ok := entries[os.Args[1]]; ok {
			os.Exit(entry(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}
