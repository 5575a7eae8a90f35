package engine

import (
	"errors"
	"testing"
)

// TestRecvEventAfterPeerClosedWithOursUnread: box-init that fails to build the box after the
// shim sent it EventGo exits with that message unread; the kernel then reports ECONNRESET on
// the shim's end ahead of box-init's EventError. The error must still be read, then the end
// (CI, stop 34: "the box ended before its program started" instead of the refusal's reason).
func TestRecvEventAfterPeerClosedWithOursUnread(t *testing.T) {
	shimEnd, boxEnd, err := ControlPair()
	if err != nil {
		t.Fatal(err)
	}
	defer shimEnd.Close()
	if err := SendEvent(shimEnd, Event{Kind: EventGo}); err != nil { // never read by the box
		t.Fatal(err)
	}
	if err := SendEvent(boxEnd, Event{Kind: EventError, Code: CodeBoxSetupFailed, Message: "why"}); err != nil {
		t.Fatal(err)
	}
	boxEnd.Close()
	ev, _, err := RecvEvent(shimEnd)
	if err != nil || ev.Kind != EventError || ev.Message != "why" {
		t.Fatalf("first event: %+v, %v; want the box's EventError", ev, err)
	}
	if _, _, err := RecvEvent(shimEnd); !errors.Is(err, ErrControlClosed) {
		t.Fatalf("after the last event: %v; want ErrControlClosed", err)
	}
}
