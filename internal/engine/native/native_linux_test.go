package native_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/native"
)

func TestMain(m *testing.M) {
	enginetest.Main(m, map[string]func([]string) int{
		"box-init":     native.BoxInitMain,
		"box-exec":     execstage.Main,
		"native-probe": nativeProbe,
		"test-shim":    testShim,
	})
}

func TestConformance(t *testing.T) {
	enginetest.Run(t, func() engine.Engine { return &native.Engine{} })
}
