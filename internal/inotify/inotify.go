// Package inotify parses the events the kernel's inotify descriptors return, for the packages
// that watch folders (the integrity watch, box-init's mount keeper, the guard of absent
// protected paths). It is the one place that reads the raw event layout.
package inotify

import (
	"bytes"
	"encoding/binary"
)

// headerSize is the size of struct inotify_event without its name: wd, mask, cookie, len.
const headerSize = 16

// Event is one inotify event.
type Event struct {
	Wd     int32  // the watch descriptor the event is for (-1 for IN_Q_OVERFLOW)
	Mask   uint32 // IN_* bits
	Cookie uint32 // pairs IN_MOVED_FROM with its IN_MOVED_TO
	// Name is the entry's name in the watched folder, "" for an event on the folder itself.
	Name string
}

// Parse calls fn for each event in buf, what one read of an inotify descriptor returned
// (whole events only, in the byte order of this machine). A truncated event at the end is
// ignored.
func Parse(buf []byte, fn func(Event)) {
	for len(buf) >= headerSize {
		n := int(binary.NativeEndian.Uint32(buf[12:16]))
		if n > len(buf)-headerSize {
			return
		}
		name := buf[headerSize : headerSize+n]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i] // the kernel pads the name with NULs
		}
		fn(Event{
			Wd:     int32(binary.NativeEndian.Uint32(buf[0:4])),
			Mask:   binary.NativeEndian.Uint32(buf[4:8]),
			Cookie: binary.NativeEndian.Uint32(buf[8:12]),
			Name:   string(name),
		})
		buf = buf[headerSize+n:]
	}
}
