// Package handoff hands a TCP connection accepted inside a box over to the daemon: box-init
// accepts a client on a forwarded in-box loopback port, sends the connection's descriptor
// over the forward's unix socket (SCM_RIGHTS), and the daemon serves that connection itself.
// No process then copies the bytes between the box's TCP connection and the unix socket.
//
// The daemon's side (Listener) still serves clients that speak on the unix socket directly,
// and accepts a handed-over descriptor only if it is a connected TCP socket: whatever a
// process in the box sends there gets at most a connection of its own to the daemon's
// server, which it could open anyway.
package handoff

// Magic is the one message of a handover, sent with the descriptor attached.
const Magic = "agentbox-handoff/1\n"
