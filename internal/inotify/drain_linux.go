package inotify

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Drain reads the events pending on the non-blocking inotify descriptor fd into buf (which
// must hold at least one event with the longest name: unix.SizeofInotifyEvent+unix.NAME_MAX+1
// bytes) and calls fn for each, until none is left. It returns nil once the descriptor has
// nothing more to read (EAGAIN), and the read's error otherwise.
func Drain(fd int, buf []byte, fn func(Event)) error {
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case err != nil:
			return err
		case n <= 0:
			return nil
		}
		Parse(buf[:n], fn)
	}
}
