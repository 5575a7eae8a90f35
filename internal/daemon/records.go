package daemon

import (
	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/store"
)

func toStore(l *api.Launch, dir string) *store.Launch {
	return &store.Launch{Launch: *l, LaunchDir: dir}
}

func fromStore(l *store.Launch) api.Launch { return l.Launch }
