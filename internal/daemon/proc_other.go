//go:build !linux

package daemon

import "errors"

func hostSockets() ([]string, error) { return nil, errors.New("not supported") }
