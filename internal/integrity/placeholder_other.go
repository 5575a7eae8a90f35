//go:build !linux

package integrity

// Registry reference-counts placeholders (Linux only).
type Registry struct {
	Path string
}

// Prepare is not supported off Linux.
func (r *Registry) Prepare(launch, ws string, extra []string) (*Layout, error) {
	return nil, ErrNotSupported
}

// HoldBoxRepo is not supported off Linux.
func (r *Registry) HoldBoxRepo(launch, ws string) {}

// Release is not supported off Linux.
func (r *Registry) Release(launch string) ([]string, error) { return nil, nil }

// Held is not supported off Linux.
func (r *Registry) Held(launch string) ([]string, error) { return nil, nil }

// Hold is not supported off Linux.
func (r *Registry) Hold(launch string, phs []Placeholder) ([]string, error) {
	return nil, ErrNotSupported
}

// Holders is not supported off Linux.
func (r *Registry) Holders() ([]string, error) { return nil, nil }
