//go:build !linux

package boxhelper

import (
	"errors"
	"io"
)

var errNoImage = errors.New("box helper: sealed copies need Linux (memfd)")

// Image is a sealed in-memory copy of the box helper (Linux only).
type Image struct {
	Path   string
	Digest string
}

// Load is not supported on this platform: shims start from agentbox itself.
func Load(exe string) (*Image, error) { return nil, errNoImage }

// Seal is not supported on this platform.
func Seal(r io.ReaderAt, path string) (*Image, error) { return nil, errNoImage }

// ExecPath is never called on this platform.
func (m *Image) ExecPath() string { return "" }

// Close does nothing on this platform.
func (m *Image) Close() error { return nil }
