//go:build !linux

package integrity

import "errors"

var errOutside = errors.New("leads out of the workspace")

// QuarantineSuffix is what a file moved aside gets before its number.
const QuarantineSuffix = ".agentbox-quarantined-"

func readBeneath(ws, path string, max int64) ([]byte, error) { return nil, ErrNotSupported }

func moveAside(ws, path string) (string, error) { return "", ErrNotSupported }
