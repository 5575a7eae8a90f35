//go:build !linux

package daemon

func landlockABI() string { return "0" }
