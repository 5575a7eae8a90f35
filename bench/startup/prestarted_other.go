//go:build !linux

package main

import "errors"

// prestartedFloor needs the native engine, Linux only.
func prestartedFloor(string) (prep, run func() error, err error) {
	return nil, nil, errors.New("a prestarted box needs Linux")
}
