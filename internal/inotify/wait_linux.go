package inotify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// NewWake returns an eventfd for Wait's wake: Wake writes it.
func NewWake() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	return fd, nil
}

// Wake ends a Wait on wake (an eventfd; NewWake), now or, none waiting, the next one, and
// every later one: nothing reads the eventfd back, so a woken wake stays woken. The guard
// depends on that (its Finish may come before its Run waits).
func Wake(wake int) {
	unix.Write(wake, binary.NativeEndian.AppendUint64(nil, 1))
}

// Wait waits in poll(2), on the calling goroutine's thread, until the non-blocking inotify
// descriptor fd has events or wake was written (Wake), at most timeout milliseconds (-1: no
// bound), and reports whether wake was written. A signal ends it early, with neither.
//
// The descriptor is never in the runtime's poller: the kernel wakes a waiter for each event
// it queues, and a descriptor in the runtime's epoll set has one (its poller thread) between
// its owner's reads as well, so a writer of many files paid a wake-up of the watching process
// for each of them (docs/benchmarks.md, "Work in the box", the thirtieth session). poll waits
// on the descriptor only while it is called.
func Wait(fd, wake, timeout int) (woken bool, err error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
		return false, err
	}
	return fds[1].Revents != 0, nil
}

// Reader reads a non-blocking inotify descriptor as an io.Reader, waiting in Wait while it has
// nothing (never through the runtime's poller), and adds its watches (AddWatch). Close ends a
// Read that waits, waits for it and for any AddWatch under way to return, and closes the
// descriptor: before, a watch added while the descriptor was being closed could land on
// another instance that reused its number (review 30b). A Read waiting holds an OS thread of
// its own (the daemon has one per launch it watches, within fs.inotify.max_user_instances).
type Reader struct {
	fd, wake int
	mu       sync.Mutex
	closed   bool
	reading  sync.WaitGroup
}

// NewReader returns a Reader of fd, which it closes at Close.
func NewReader(fd int) (*Reader, error) {
	wake, err := NewWake()
	if err != nil {
		return nil, err
	}
	return &Reader{fd: fd, wake: wake}, nil
}

// use begins a use of the descriptor: false once Close has begun. done ends it.
func (r *Reader) use() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.reading.Add(1)
	return true
}

// AddWatch adds (or changes) the descriptor's watch of path with mask; after Close it
// returns os.ErrClosed.
func (r *Reader) AddWatch(path string, mask uint32) (int, error) {
	if !r.use() {
		return -1, os.ErrClosed
	}
	defer r.reading.Done()
	return unix.InotifyAddWatch(r.fd, path, mask)
}

// Read reads the events the descriptor has (whole events: Parse), waiting while it has none;
// after Close it returns os.ErrClosed.
func (r *Reader) Read(b []byte) (int, error) {
	if !r.use() {
		return 0, os.ErrClosed
	}
	defer r.reading.Done()
	for {
		n, err := unix.Read(r.fd, b)
		switch {
		case err == nil && n == 0 && len(b) > 0:
			return 0, io.EOF
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EAGAIN):
			return 0, err
		}
		woken, err := Wait(r.fd, r.wake, -1)
		if err != nil {
			return 0, err
		}
		if woken {
			return 0, os.ErrClosed
		}
	}
}

// Close ends a Read that waits, waits for it to return, and closes the descriptor (which
// returns once the kernel has freed its watches); later calls do nothing.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	Wake(r.wake)
	r.reading.Wait()
	unix.Close(r.wake)
	return unix.Close(r.fd)
}
