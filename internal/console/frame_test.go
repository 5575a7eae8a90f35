package console

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	frames := []Frame{
		{FrameStdin, []byte("hello")},
		{FrameStdout, []byte{0, 1, 2, 255}},
		{FrameStderr, nil},
		{FrameResize, WindowSize{Rows: 24, Cols: 80}.Payload()},
		{FrameSignal, []byte{2}},
		{FrameStdinEOF, nil},
		{FrameExit, []byte(`{"code":7}`)},
		{FrameDetach, nil},
	}
	for _, f := range frames {
		if err := fw.WriteFrame(f.Type, f.Payload); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range frames {
		got, err := ReadFrame(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("got %v %q, want %v %q", got.Type, got.Payload, want.Type, want.Payload)
		}
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestFrameWire(t *testing.T) {
	// The wire format is fixed: type byte, big-endian uint32 length, payload.
	got := AppendFrame(nil, FrameStdout, []byte("ab"))
	want := []byte{2, 0, 0, 0, 2, 'a', 'b'}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendFrame = %v, want %v", got, want)
	}
	if p := (WindowSize{Rows: 0x0102, Cols: 0x0304}).Payload(); !bytes.Equal(p, []byte{1, 2, 3, 4}) {
		t.Fatalf("resize payload %v", p)
	}
}

func TestFrameErrors(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader([]byte{2, 0xff, 0, 0, 0})); !errors.Is(err, ErrProtocol) {
		t.Fatalf("oversize frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{2, 0, 0, 0, 5, 'a'})); err != io.ErrUnexpectedEOF {
		t.Fatalf("short payload: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{2, 0})); err != io.ErrUnexpectedEOF {
		t.Fatalf("short header: %v", err)
	}
	if _, err := ParseWindowSize([]byte{1, 2, 3}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("short resize: %v", err)
	}
}

func TestLargeWriteSplits(t *testing.T) {
	var buf bytes.Buffer
	big := bytes.Repeat([]byte("x"), MaxFramePayload+10)
	if err := NewFrameWriter(&buf).WriteFrame(FrameStdout, big); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		f, err := ReadFrame(&buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Payload...)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("reassembled %d bytes, want %d", len(got), len(big))
	}
}

func TestExitResult(t *testing.T) {
	// Every exit code is the program's, the ones shells use for "not found" included.
	for _, code := range []int{0, 1, 125, 126, 127, 130, 255} {
		if got, err := (Exit{Code: code}).Result(); err != nil || got != code {
			t.Errorf("Exit{%d}.Result() = %d, %v", code, got, err)
		}
	}
	_, err := Exit{Code: 127, ErrorCode: engine.CodeProgramNotFound, Message: "no /x"}.Result()
	var se *StartError
	if !errors.As(err, &se) || se.Code != engine.CodeProgramNotFound || !errors.Is(err, engine.ErrProgramNotFound) {
		t.Fatalf("start failure: %v", err)
	}
	if _, err := (Exit{ErrorCode: "something_new"}).Result(); !errors.Is(err, engine.ErrBoxSetup) {
		t.Fatalf("unknown code: %v", err)
	}
}

func TestReadLine(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader("one\n"+strings.Repeat("x", maxLine+1)+"\n"), 16)
	if l, err := ReadLine(br); err != nil || string(l) != "one" {
		t.Fatalf("ReadLine = %q, %v", l, err)
	}
	if _, err := ReadLine(br); !errors.Is(err, ErrProtocol) {
		t.Fatalf("long line: %v", err)
	}
	if _, err := ReadLine(bufio.NewReader(strings.NewReader("partial"))); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial line: %v", err)
	}
}
