//go:build !linux

package daemon

import "errors"

func processStartTime(pid int) (uint64, error) { return 0, errors.New("not supported") }
func sameProcess(pid int, start uint64) bool   { return false }
func alive(pid int) bool                       { return false }

func hostSockets() ([]string, error) { return nil, errors.New("not supported") }

var rootOnlyDirs []string

func rootOnlyPaths([]string) ([]string, error) { return nil, errors.New("not supported") }
