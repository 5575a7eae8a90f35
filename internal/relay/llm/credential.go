package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/relay"
)

// Defaults applied to zero Credential fields.
const (
	DefaultCredentialTTL     = 5 * time.Minute
	DefaultCredentialTimeout = 30 * time.Second
)

// maxCredential bounds what is read from a credential file or command.
const maxCredential = 64 << 10

// errCredential is the class of every failure to obtain the gateway credential.
var errCredential = errors.New("gateway credential missing")

// Credential says where the daemon finds a gateway's credential, host-side. Exactly one of
// File and Command is set; with neither, requests are refused with 401
// gateway_credential_missing.
type Credential struct {
	// File is a file holding the credential (credential.file). It must be a regular file
	// owned by the daemon's user and not readable by others (mode 0600 or stricter). It is
	// looked at (stat) at every request and read again whenever it changed, so a rotated
	// credential takes effect at once.
	File string
	// Command is a program and its arguments (credential.command; no shell) whose standard
	// output is the credential.
	Command []string
	// TTL is how long a Command's output is reused (credential.ttl). Zero means
	// DefaultCredentialTTL; negative runs the command for every request. An upstream 401
	// drops the cached value.
	TTL time.Duration
	// Timeout bounds one run of Command. Zero means DefaultCredentialTimeout.
	Timeout time.Duration
	// Header is the header that carries the credential upstream (credential.header): a name
	// ("x-api-key"), or a name and a value prefix ("Authorization: Bearer"). Zero means
	// "x-api-key" for anthropic, "Authorization: Bearer" for openai and "x-goog-api-key" for
	// gemini.
	Header string
}

// parseHeader splits "Name" or "Name: Prefix" into the header name and the value prefix
// (with its trailing space).
func parseHeader(h string) (name, prefix string, err error) {
	name, prefix, _ = strings.Cut(h, ":")
	name, prefix = strings.TrimSpace(name), strings.TrimSpace(prefix)
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return "", "", fmt.Errorf("header %q is not a valid header name", h)
	}
	if strings.ContainsFunc(prefix, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", "", fmt.Errorf("header %q has control characters", h)
	}
	if prefix != "" {
		prefix += " "
	}
	return name, prefix, nil
}

// source obtains one gateway's credential.
type source struct {
	key  string // config key prefix, "gateway.anthropic.credential"
	cred Credential
	now  func() time.Time
	uid  int

	mu      sync.Mutex
	cached  string // a command's output, until expires
	expires time.Time
	file    string    // the file's credential, while the file's state is fileSt
	fileSt  fileState // (see readFile)
}

// get returns the credential, or an error wrapping errCredential whose message names the
// config key and the reason but never holds the credential.
func (s *source) get(ctx context.Context) (string, error) {
	switch {
	case s.cred.File != "":
		return s.readFile()
	case len(s.cred.Command) > 0:
		return s.runCommand(ctx)
	}
	return "", fmt.Errorf("%w: neither %s.file nor %s.command is set in the daemon's configuration",
		errCredential, s.key, s.key)
}

// readFile returns the credential file's credential. What was read is reused while a stat of
// the path says exactly what the stat of the file read said: same file (device and inode),
// mode, owner, size, modification and change times. Any write, chmod, chown or replacement
// changes the change time, so the reuse never outlives a rotation or a mode the checks would
// refuse. A file changed less than racyWindow before it was read is not reused at all: a later
// write within the same timestamp tick could leave its stat unchanged.
func (s *source) readFile() (string, error) {
	key, path := s.key+".file", s.cred.File
	if st, ok := statFile(path); ok {
		s.mu.Lock()
		v, same := s.file, st == s.fileSt
		s.mu.Unlock()
		if v != "" && same {
			return v, nil
		}
	}
	b, fi, err := relay.ReadSecretFileInfo(path, s.uid, maxCredential)
	var v string
	if err == nil {
		v, err = s.clean(key, b)
	} else {
		err = fmt.Errorf("%w: %s %q %v", errCredential, key, path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file = ""
	if err != nil {
		return "", err
	}
	if st, ok := fileStateOf(fi); ok && racyNow().Sub(st.changed()) >= racyWindow {
		s.file, s.fileSt = v, st
	}
	return v, nil
}

// racyWindow: a credential file changed less than this before it was read is read again at the
// next request (see readFile).
const racyWindow = 2 * time.Second

// racyNow is the clock file times are compared with (a variable for the tests).
var racyNow = time.Now

func statFile(path string) (fileState, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{}, false
	}
	return fileStateOf(fi)
}

func (s *source) clean(key string, b []byte) (string, error) {
	v, err := relay.CleanSecret(b, maxCredential)
	if err != nil {
		return "", fmt.Errorf("%w: %s %v", errCredential, key, err)
	}
	return v, nil
}

func (s *source) runCommand(ctx context.Context) (string, error) {
	key := s.key + ".command"
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl := s.cred.TTL
	if ttl == 0 {
		ttl = DefaultCredentialTTL
	}
	now := s.now()
	if s.cached != "" && ttl > 0 && now.Before(s.expires) {
		return s.cached, nil
	}
	timeout := s.cred.Timeout
	if timeout <= 0 {
		timeout = DefaultCredentialTimeout
	}
	// Not the request's context: one client going away must not fail the others waiting.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, s.cred.Command[0], s.cred.Command[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &out, max: maxCredential + 1}
	// Stderr is dropped: a failing helper may print what it was given.
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil {
			return "", fmt.Errorf("%w: %s %q did not finish within %s", errCredential, key, s.cred.Command[0], timeout)
		}
		return "", fmt.Errorf("%w: %s %q failed: %v", errCredential, key, s.cred.Command[0], err)
	}
	v, err := s.clean(key, out.Bytes())
	if err != nil {
		return "", err
	}
	if ttl > 0 {
		s.cached, s.expires = v, now.Add(ttl)
	}
	return v, nil
}

// invalidate drops a cached command output or file credential (the upstream refused it).
func (s *source) invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.expires, s.file = "", time.Time{}, ""
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
