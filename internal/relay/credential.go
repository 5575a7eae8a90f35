package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// Defaults applied to zero Credential fields.
const (
	DefaultCredentialTTL     = 5 * time.Minute
	DefaultCredentialTimeout = 30 * time.Second
)

// maxCredential bounds what is read from a credential file or command.
const maxCredential = 64 << 10

// errCredential is the class of a credential failure whose Credential names none.
var errCredential = errors.New("credential unusable")

// Credential says where a broker finds one credential host-side: the LLM relay's gateway
// credentials and the git relay's. Exactly one of File and Command is set.
type Credential struct {
	// Key is the config key of the credential ("gateway.anthropic.credential"), named in
	// every error.
	Key string
	// File is a file holding the credential. It must be a regular file owned by the daemon's
	// user and not readable by others (mode 0600 or stricter). It is looked at (stat) at every
	// request and read again whenever it changed, so a rotated credential takes effect at once.
	File string
	// Command is a program and its arguments (no shell) whose standard output is the
	// credential.
	Command []string
	// TTL is how long a Command's output is reused. Zero means DefaultCredentialTTL; negative
	// runs the command for every request. Invalidate drops the cached value.
	TTL time.Duration
	// Timeout bounds one run of Command. Zero means DefaultCredentialTimeout.
	Timeout time.Duration
	// Class is the error class every failure wraps (errors.Is), so that a broker tells its
	// own credential failures apart. Nil means an unexported class of this package.
	Class error
	// Now is the clock of the TTL. Nil means time.Now.
	Now func() time.Time
	// FileClock is the clock a credential file's change time is compared with (see
	// CredentialSource.Get). Nil means time.Now.
	FileClock func() time.Time
}

// CredentialError is a failure to obtain a credential. Its fields never hold the credential.
type CredentialError struct {
	// Class is Credential.Class: the error unwraps to it.
	Class error
	// Detail names the config key and says what is wrong ("gateway.anthropic.credential.file
	// \"/k\" is mode 0644; chmod 600 it"), for a message that adds what to do.
	Detail string
}

func (e *CredentialError) Error() string { return e.Class.Error() + ": " + e.Detail }
func (e *CredentialError) Unwrap() error { return e.Class }

// CredentialSource obtains one credential host-side. It is safe for concurrent use.
type CredentialSource struct {
	c   Credential
	uid int

	mu      sync.Mutex
	cached  string // a command's output, until expires
	expires time.Time
	file    string    // the file's credential, while the file's state is fileSt
	fileSt  fileState // (see readFile)

	// prog is Command's program, found once when the source was made (hostprog.Find), or
	// progErr why not: never looked up again, so that nothing written after the launch's
	// check (a box's script where an absent helper was named) takes its place.
	prog    hostprog.Program
	progErr error
}

// NewCredentialSource returns the source of c. A credential file must be owned by the
// caller's uid. A command's program is found now (hostprog.Find), and only now: one not
// found fails every Get with the reason.
func NewCredentialSource(c Credential) *CredentialSource {
	if c.Class == nil {
		c.Class = errCredential
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FileClock == nil {
		c.FileClock = time.Now
	}
	s := &CredentialSource{c: c, uid: os.Getuid()}
	if len(c.Command) > 0 {
		s.prog, s.progErr = hostprog.Find(c.Command[0])
	}
	return s
}

// Describe names where the credential comes from, for messages: the config key and the file,
// never the credential.
func (s *CredentialSource) Describe() string {
	if s.c.File != "" {
		return fmt.Sprintf("%s.file %q", s.c.Key, s.c.File)
	}
	return s.c.Key + ".command"
}

// Get returns the credential, or a *CredentialError naming the config key and the reason.
//
// A file's content is reused while a stat of the path says exactly what the stat of the file
// read said: same file (device and inode), mode, owner, size, modification and change times.
// Any write, chmod, chown or replacement changes the change time, so the reuse never outlives
// a rotation or a mode the checks would refuse. A file changed less than racyWindow before it
// was read is not reused at all: a later write within the same timestamp tick could leave its
// stat unchanged.
func (s *CredentialSource) Get(ctx context.Context) (string, error) {
	switch {
	case s.c.File != "":
		return s.readFile()
	case len(s.c.Command) > 0:
		return s.runCommand(ctx)
	}
	return "", s.fail("neither %s.file nor %s.command is set in the daemon's configuration", s.c.Key, s.c.Key)
}

// Invalidate drops a cached command output or file credential (the upstream refused it).
func (s *CredentialSource) Invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cached, s.expires, s.file = "", time.Time{}, ""
}

func (s *CredentialSource) fail(format string, a ...any) error {
	return &CredentialError{Class: s.c.Class, Detail: fmt.Sprintf(format, a...)}
}

// racyWindow: a credential file changed less than this before it was read is read again at the
// next request (see Get).
const racyWindow = 2 * time.Second

func (s *CredentialSource) readFile() (string, error) {
	key, path := s.c.Key+".file", s.c.File
	if st, ok := statFile(path); ok {
		s.mu.Lock()
		v, same := s.file, st == s.fileSt
		s.mu.Unlock()
		if v != "" && same {
			return v, nil
		}
	}
	b, fi, err := ReadSecretFileInfo(path, s.uid, maxCredential)
	var v string
	if err == nil {
		v, err = s.clean(key, b)
	} else {
		err = s.fail("%s %q %v", key, path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file = ""
	if err != nil {
		return "", err
	}
	if st, ok := fileStateOf(fi); ok && s.c.FileClock().Sub(st.changed()) >= racyWindow {
		s.file, s.fileSt = v, st
	}
	return v, nil
}

func statFile(path string) (fileState, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{}, false
	}
	return fileStateOf(fi)
}

func (s *CredentialSource) clean(key string, b []byte) (string, error) {
	v, err := CleanSecret(b, maxCredential)
	if err != nil {
		return "", s.fail("%s %v", key, err)
	}
	return v, nil
}

func (s *CredentialSource) runCommand(ctx context.Context) (string, error) {
	key := s.c.Key + ".command"
	s.mu.Lock()
	defer s.mu.Unlock()
	ttl := s.c.TTL
	if ttl == 0 {
		ttl = DefaultCredentialTTL
	}
	now := s.c.Now()
	if s.cached != "" && ttl > 0 && now.Before(s.expires) {
		return s.cached, nil
	}
	timeout := s.c.Timeout
	if timeout <= 0 {
		timeout = DefaultCredentialTimeout
	}
	// Not the request's context alone: one client going away must not fail the others
	// waiting on the lock; the timeout bounds the run.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if s.progErr != nil {
		return "", s.fail("%s %q: %v (looked up once, when this relay started: install it or fix the configuration, then launch again)", key, s.c.Command[0], s.progErr)
	}
	cmd := s.prog.Command(cctx, s.c.Command[1:]...)
	// In "/": a relative path among its arguments names nothing a box writes, whatever the
	// folder the daemon was started in (the launch's rule compares the absolute ones).
	cmd.Dir = "/"
	ownGroup(cmd)
	// A descendant that outlives the kill and still holds stdout is not waited for.
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &out, max: maxCredential + 1}
	// Stderr is dropped: a failing helper may print what it was given.
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil {
			return "", s.fail("%s %q did not finish within %s", key, s.c.Command[0], timeout)
		}
		return "", s.fail("%s %q failed: %v", key, s.c.Command[0], err)
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

// limitedBuffer keeps the first max bytes written to it and drains the rest.
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
