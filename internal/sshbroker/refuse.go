package sshbroker

import (
	"encoding/binary"
	"net"

	"github.com/agentbox/agentbox/internal/connlimit"
)

// Refusal writes the answer to a connection refused past a bound (the broker's own cap of a
// listener, or the daemon's budget of broker connections through Options.Bound), in the terms
// its client shows, once the client's first bytes have been read (connlimit.Refuse, which then
// closes it). reason says which bound, for a person. It never reads.
type Refusal func(c net.Conn, reason string)

// refuse answers c with answer and closes it, bounded (connlimit.Refuse).
func refuse(c net.Conn, answer Refusal, reason string) {
	connlimit.Refuse(c, func(c net.Conn) { answer(c, reason) })
}

// refusal answers a connection to the agent socket: the agent protocol carries no text, so the
// client's first request is answered SSH_AGENT_FAILURE (ssh-add prints "agent refused
// operation"; ssh goes on without the agent's keys); the daemon's log line says why.
func (s *agentServer) refusal(c net.Conn, _ string) { c.Write(frame(failure)) }

// refusal answers a leg connection (the box's ssh client speaks first, its identification
// string): an identification string, then an SSH_MSG_DISCONNECT (RFC 4253, 11.1) with reason
// SSH_DISCONNECT_TOO_MANY_CONNECTIONS and the reason, which ssh prints on its stderr:
// "Received disconnect from 127.0.0.1 port P:12: agentbox: ssh connection to HOST refused: …".
func (s *legServer) refusal(c net.Conn, reason string) {
	c.Write(disconnectBanner("agentbox: ssh connection to " + s.leg.Host.String() + " refused: " + reason))
}

// Identification and disconnect (RFC 4253, 4.2 and 11.1).
const (
	serverIdent                 = "SSH-2.0-agentbox\r\n"
	msgDisconnect               = 1
	disconnectTooManyConnection = 12
)

// disconnectBanner is what a server that refuses a connection sends: its identification, then
// an unencrypted SSH_MSG_DISCONNECT packet (before key exchange: no MAC, padding to a multiple
// of 8 of at least 4 bytes) carrying msg (at most 400 bytes, which is what OpenSSH prints).
func disconnectBanner(msg string) []byte {
	if len(msg) > 400 {
		msg = msg[:400]
	}
	payload := []byte{msgDisconnect}
	payload = binary.BigEndian.AppendUint32(payload, disconnectTooManyConnection)
	payload = binary.BigEndian.AppendUint32(payload, uint32(len(msg)))
	payload = append(payload, msg...)
	payload = binary.BigEndian.AppendUint32(payload, 0) // language tag
	pad := 8 - (5+len(payload))%8
	if pad < 4 {
		pad += 8
	}
	b := []byte(serverIdent)
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(payload)+pad))
	b = append(b, byte(pad))
	b = append(b, payload...)
	return append(b, make([]byte, pad)...)
}
