package sshbroker

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// fuzzKeyring is an in-process user agent holding two keys, the first granted.
func fuzzKeyring(t testing.TB) (agent.Agent, []ssh.PublicKey) {
	kr := agent.NewKeyring()
	var pubs []ssh.PublicKey
	for i := range 2 {
		seed := bytes.Repeat([]byte{byte(i + 1)}, ed25519.SeedSize)
		priv := ed25519.NewKeyFromSeed(seed)
		if err := kr.Add(agent.AddedKey{PrivateKey: priv, Comment: "k"}); err != nil {
			t.Fatal(err)
		}
		pub, err := ssh.NewPublicKey(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, pub)
	}
	return kr, pubs
}

// FuzzAgentFrames feeds arbitrary bytes to one box connection of the broker, whose user agent
// is an in-process keyring holding a granted and an other key. Whatever arrives, every reply is
// a well-formed frame that is a failure, an identities answer listing only the granted key, or
// a signature by the granted key; and the keyring still holds both keys, unlocked.
func FuzzAgentFrames(f *testing.F) {
	kr, pubs := fuzzKeyring(f)
	granted, other := pubs[0], pubs[1]
	sign := func(k ssh.PublicKey, flags uint32) []byte {
		b := appendString([]byte{msgSignRequest}, k.Marshal())
		b = appendString(b, []byte("data"))
		return binary.BigEndian.AppendUint32(b, flags)
	}
	f.Add(frame([]byte{msgRequestIDs}))
	f.Add(append(frame(sign(granted, 0)), frame(sign(other, 0))...))
	f.Add(frame(sign(granted, 4)))
	f.Add(frame([]byte{19}))
	f.Add(frame(append([]byte{22}, appendString(nil, []byte("pw"))...)))
	f.Add(frame([]byte{27, 0, 0, 0, 5, 'q', 'u', 'e', 'r', 'y'}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 4, 0, 1, msgRequestIDs})
	f.Add([]byte{0, 0, 0, 9, msgSignRequest, 0xff, 0xff, 0xff, 0xff})

	fp := Fingerprint(granted)
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &agentServer{
			keys: []string{fp},
			upstream: func() (net.Conn, error) {
				a, b := net.Pipe()
				go func() { agent.ServeAgent(kr, b); b.Close() }()
				return a, nil
			},
			log:   newRecorder(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, ""),
			conns: &budget{max: 8},
		}
		box := &bufConn{r: bytes.NewReader(in)}
		s.serveConn(box)
		var replies [][]byte
		for {
			b, err := readFrameMax(&box.w, maxUpstreamFrame)
			if err != nil {
				break
			}
			replies = append(replies, b)
		}
		for _, r := range replies {
			switch r[0] {
			case msgFailure:
				if len(r) != 1 {
					t.Fatalf("failure with a body: %x", r)
				}
			case msgIdentitiesAnswer:
				keys, err := parseIdentities(r[1:])
				if err != nil {
					t.Fatalf("malformed identities answer: %v", err)
				}
				for _, k := range keys {
					if fingerprintBlob(k.Blob) != fp {
						t.Fatalf("a key other than the granted one was listed: %s", fingerprintBlob(k.Blob))
					}
				}
			case msgSignResponse:
				blob, rest, ok := parseString(r[1:])
				var sig ssh.Signature
				if !ok || len(rest) != 0 || ssh.Unmarshal(blob, &sig) != nil {
					t.Fatalf("malformed sign response %x", r)
				}
				if sig.Format != ssh.KeyAlgoED25519 {
					t.Fatalf("signature format %s", sig.Format)
				}
			default:
				t.Fatalf("unexpected reply %x", r)
			}
		}
		keys, err := kr.List()
		if err != nil || len(keys) != 2 {
			t.Fatalf("the user's agent changed: %d keys, %v", len(keys), err)
		}
	})
}

// FuzzKnownHostsLine checks that any known_hosts line parses without panic and that what
// seedKnownHosts writes from it is one line naming only the requested host.
func FuzzKnownHostsLine(f *testing.F) {
	f.Add("example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ")
	f.Add("@cert-authority *.example.com,!bad.example.com ssh-ed25519 AAAA comment")
	f.Add("|1|MDEyMzQ1Njc4OWFiY2RlZmdoaWo=|aGFzaA== ssh-rsa AAAA")
	f.Add("[example.com]:2222,10.0.0.1 ecdsa-sha2-nistp256 AAAA")
	f.Fuzz(func(t *testing.T, line string) {
		e, ok := parseKnownHostsLine(line)
		if !ok {
			return
		}
		for _, name := range []string{"example.com", "[example.com]:2222"} {
			if e.matches(name) {
				for _, fld := range []string{e.keyType, e.key} {
					if fld == "" || bytes.ContainsAny([]byte(fld), " \t\r\n") {
						t.Fatalf("field %q would break the seeded line", fld)
					}
				}
			}
		}
	})
}

// bufConn is a box connection whose requests are a fixed byte string and whose replies are
// collected.
type bufConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (c *bufConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *bufConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *bufConn) Close() error                     { return nil }
func (c *bufConn) LocalAddr() net.Addr              { return &net.UnixAddr{} }
func (c *bufConn) RemoteAddr() net.Addr             { return &net.UnixAddr{} }
func (c *bufConn) SetDeadline(time.Time) error      { return nil }
func (c *bufConn) SetReadDeadline(time.Time) error  { return nil }
func (c *bufConn) SetWriteDeadline(time.Time) error { return nil }
