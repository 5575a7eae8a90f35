//go:build !linux

package integrity

// Registry reference-counts placeholders (Linux only).
type Registry struct {
	Path string
}

// Acquire is not supported off Linux.
func (r *Registry) Acquire(launch string, ps []Placeholder) error {
	if len(ps) == 0 {
		return nil
	}
	return ErrNotSupported
}

// Release is not supported off Linux.
func (r *Registry) Release(launch string) ([]string, error) { return nil, nil }

// Held is not supported off Linux.
func (r *Registry) Held(launch string) ([]string, error) { return nil, nil }
