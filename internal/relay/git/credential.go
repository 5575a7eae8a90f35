package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/relay"
)

const (
	// maxSecret bounds what is read from a credential file or command.
	maxSecret = 64 << 10
	// commandTTL is how long a credential command's output is reused.
	commandTTL = 5 * time.Minute
	// commandTimeout bounds one run of a credential command.
	commandTimeout = 30 * time.Second
)

// errCredential is the class of every failure to obtain a git credential; its messages name
// the config key and the reason, never the secret.
var errCredential = errors.New("git credential unusable")

// source obtains one credential's secret host-side.
type source struct {
	key  string
	cred Credential
	uid  int
	now  func() time.Time

	mu      sync.Mutex
	cached  string
	expires time.Time
}

func newSource(key string, c Credential) *source {
	return &source{key: key, cred: c, uid: os.Getuid(), now: time.Now}
}

// get returns the secret.
func (s *source) get(ctx context.Context) (string, error) {
	if s.cred.File != "" {
		return s.readFile()
	}
	return s.runCommand(ctx)
}

func (s *source) readFile() (string, error) {
	key, path := s.key+".file", s.cred.File
	b, err := relay.ReadSecretFile(path, s.uid, maxSecret)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q %v", errCredential, key, path, err)
	}
	return clean(key, b)
}

func clean(key string, b []byte) (string, error) {
	v, err := relay.CleanSecret(b, maxSecret)
	if err != nil {
		return "", fmt.Errorf("%w: %s %v", errCredential, key, err)
	}
	return v, nil
}

func (s *source) runCommand(ctx context.Context) (string, error) {
	key := s.key + ".command"
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cached != "" && now.Before(s.expires) {
		return s.cached, nil
	}
	// Not the request's context alone: one client going away must not fail the others
	// waiting on the lock; the timeout bounds the run.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, s.cred.Command[0], s.cred.Command[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &out, max: maxSecret + 1}
	// Stderr is dropped: a failing helper may print what it was given.
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil {
			return "", fmt.Errorf("%w: %s %q did not finish within %s", errCredential, key, s.cred.Command[0], commandTimeout)
		}
		return "", fmt.Errorf("%w: %s %q failed: %v", errCredential, key, s.cred.Command[0], err)
	}
	v, err := clean(key, out.Bytes())
	if err != nil {
		return "", err
	}
	s.cached, s.expires = v, now.Add(commandTTL)
	return v, nil
}

// invalidate drops a cached command output (the remote refused it).
func (s *source) invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.expires = "", time.Time{}
}

// describe names where the secret comes from, for messages.
func (s *source) describe() string {
	if s.cred.File != "" {
		return fmt.Sprintf("%s.file %q", s.key, s.cred.File)
	}
	return s.key + ".command"
}

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room < len(p) {
		if room > 0 {
			l.b.Write(p[:room])
		}
		return len(p), nil // keep draining the command; clean refuses the oversize value
	}
	return l.b.Write(p)
}
