//go:build unix && !linux

package atomicfile

const oPath = 0
