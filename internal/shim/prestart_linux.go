package shim

import "github.com/agentbox/agentbox/internal/engine"

// prestarted is a box a spare shim started ahead of its launch, with the name of the engine
// that started it: startBox uses it only for a launch of that engine.
type prestarted struct {
	engine string
	box    engine.Prestarted
}

// prestart starts the named engine's default box ahead of its launch when the engine can
// (engine.Prestarter); it returns nil and no error when the engine cannot.
func prestart(name string) (*prestarted, error) {
	eng, err := engine.Get(name)
	if err != nil {
		return nil, err
	}
	p, ok := eng.(engine.Prestarter)
	if !ok {
		return nil, nil
	}
	box, err := p.Prestart()
	if err != nil {
		return nil, err
	}
	return &prestarted{engine: name, box: box}, nil
}
