package llmtest

import (
	"bufio"
	"bytes"
	"io"
)

// Event is one server-sent event as a client reads it.
type Event struct {
	Name string // the event: field; "" for data-only events
	Data string // the data: lines joined by "\n"
}

// EventReader reads server-sent events one at a time, as they arrive.
type EventReader struct {
	br *bufio.Reader
}

// NewEventReader returns an EventReader reading r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event. At the end of the stream it returns io.EOF, or
// io.ErrUnexpectedEOF if the stream ended inside an event.
func (er *EventReader) Next() (Event, error) {
	var ev Event
	var data []string
	seen := false
	for {
		line, err := er.br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && (seen || len(line) > 0) {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if !seen {
				continue
			}
			ev.Data = joinLines(data)
			return ev, nil
		}
		seen = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			data = append(data, string(value))
		}
	}
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}
