package relay

import (
	"io"
	"net/http"
	"sync/atomic"
)

// CountingWriter records the status and counts the body bytes of a response, for the brokers'
// request logs. It keeps http.Flusher working (directly, and through Unwrap for
// http.ResponseController), which SSE streaming needs. Status 0 means nothing was written yet.
type CountingWriter struct {
	http.ResponseWriter
	Status int
	N      int64
}

func (w *CountingWriter) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *CountingWriter) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.N += int64(n)
	return n, err
}

// Flush flushes the underlying writer when it can.
func (w *CountingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer (http.ResponseController).
func (w *CountingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var _ http.Flusher = (*CountingWriter)(nil)

// CountingBody counts a request body's bytes. The transport may still be reading it from its
// own goroutine when the handler returns, hence the atomic.
type CountingBody struct {
	io.ReadCloser
	N atomic.Int64
}

func (b *CountingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.N.Add(int64(n))
	return n, err
}
