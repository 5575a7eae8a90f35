package sshbroker

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkSign compares ed25519 signatures through the broker with signatures straight from
// the user's ssh-agent, each over one connection.
func BenchmarkSign(b *testing.B) {
	r := newRig(b, rigOptions{})
	data := make([]byte, 64)
	rand.Read(data)
	for _, c := range []struct{ name, socket string }{
		{"direct", r.agent.Socket},
		{"broker", r.launch.AgentSocket()},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := dialAgent(b, c.socket)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Sign(r.granted.Pub, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClone compares a git clone over ssh of a repository with an 8 MiB file through a
// leg (box-init's forward stand-in, the leg, the broker's agent) with the same clone straight
// to the server with the user's agent.
func BenchmarkClone(b *testing.B) {
	r := newRig(b, rigOptions{})
	r.server.BareRepo(b, "repo.git", 8<<20)
	direct := strings.Replace(sshCommand(r.runDir, r.server.Port), "IdentityAgent="+r.launch.AgentSocket(), "IdentityAgent="+r.agent.Socket, 1)
	for _, c := range []struct{ name, ssh string }{
		{"direct", direct},
		{"leg", sshCommand(r.runDir, r.fw.port)},
	} {
		b.Run(c.name, func(b *testing.B) {
			env := append(gitIdentity(), "GIT_SSH_COMMAND="+c.ssh)
			i := 0
			for b.Loop() {
				dst := filepath.Join(r.dir, fmt.Sprintf("clone-%s-%d", c.name, i))
				i++
				run(b, env, "git", "clone", "-q", r.remote("repo.git"), dst)
				b.StopTimer()
				os.RemoveAll(dst)
				b.StartTimer()
			}
		})
	}
}
