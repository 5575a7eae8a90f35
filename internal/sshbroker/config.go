// Package sshbroker brokers the user's ssh agent and ssh connections into a box: a per-launch
// agent socket that lists and signs with granted keys only (everything else is answered
// SSH_AGENT_FAILURE without reaching the user's agent), one ssh leg per configured host (an
// in-box loopback port the daemon connects to host:port), and the ssh_config and known_hosts
// that make the box's ssh use them. Key material never enters the box.
package sshbroker

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/config/field"

	"golang.org/x/crypto/ssh"
)

// Config is the `git.ssh` section of agentbox's configuration. Its zero value is valid and
// turns the broker off: no agent socket, no legs, no generated file, and the launch's plan is
// exactly what it would be without the broker.
type Config struct {
	// Hosts are the ssh hosts a box may reach (git.ssh.hosts), as "host" (port 22) or
	// "host:port" ("[v6]:port" for an IPv6 address). Host names compare case-insensitively;
	// one host has one port. Empty means the broker is off.
	Hosts []string `json:"hosts,omitempty" yaml:"hosts,omitempty" jsonschema_description:"ssh hosts the box may reach through the ssh broker: host or host:port. Empty turns the broker off."`
	// Keys are the agent keys a box may list and sign with (git.ssh.keys), as SHA-256
	// fingerprints in ssh-keygen's form ("SHA256:…", see ssh-add -l). A certificate is granted
	// with its key. Empty means no key: the box's agent lists nothing and signs nothing.
	Keys []string `json:"keys,omitempty" yaml:"keys,omitempty" jsonschema_description:"SHA-256 fingerprints (SHA256:…, as ssh-add -l prints them) of the agent keys the box may use; every other key is hidden."`
}

// Enabled reports whether the broker serves launches: at least one host is configured.
func (c Config) Enabled() bool { return len(c.Hosts) > 0 }

// Validate reports every invalid value of c, each error naming its key ("git.ssh.hosts[1]:
// …"). A nil result means Start accepts c.
func (c Config) Validate() error {
	_, err := c.compile()
	return err
}

// HostNames returns the host names of c.Hosts without their ports, lowercase, in order: the
// hosts whose ssh-form remotes (git@host:…) the git relay's gitconfig must leave to ssh.
func (c Config) HostNames() []string {
	hs, _ := c.compile()
	if hs == nil {
		return nil
	}
	out := make([]string, 0, len(hs.hosts))
	for _, h := range hs.hosts {
		out = append(out, h.Name)
	}
	return out
}

// Host is one parsed entry of git.ssh.hosts.
type Host struct {
	Name string // lowercase host name or IP address (IPv6 without brackets)
	Port int    // 22 unless the entry names another
}

// Addr returns the address the daemon dials: host:port.
func (h Host) Addr() string { return net.JoinHostPort(h.Name, strconv.Itoa(h.Port)) }

// KnownHostsName returns the host's name as known_hosts files write it: "host" for port 22,
// "[host]:port" otherwise.
func (h Host) KnownHostsName() string {
	if h.Port == 22 {
		return h.Name
	}
	return "[" + h.Name + "]:" + strconv.Itoa(h.Port)
}

func (h Host) String() string { return h.KnownHostsName() }

// ParseHost parses a git.ssh.hosts entry: "host", "host:port", "v6addr", "[v6addr]" or
// "[v6addr]:port".
func ParseHost(s string) (Host, error) {
	raw := s
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Host{}, errors.New("empty")
	case strings.Contains(s, "@"):
		return Host{}, fmt.Errorf("%q: write the host only (the user, such as git@, comes from the remote URL)", raw)
	case strings.Contains(s, "://") || strings.Contains(s, "/"):
		return Host{}, fmt.Errorf("%q: write host or host:port, not a URL or path", raw)
	}
	name, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		if h, p, err := net.SplitHostPort(s); err == nil {
			name, port = h, p
		} else if strings.HasSuffix(s, "]") {
			name = s[1 : len(s)-1]
		} else {
			return Host{}, fmt.Errorf("%q: %v", raw, err)
		}
	case strings.Count(s, ":") == 1:
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return Host{}, fmt.Errorf("%q: %v", raw, err)
		}
		name, port = h, p
	}
	name = strings.ToLower(name)
	if strings.Contains(name, ":") {
		if ip := net.ParseIP(name); ip == nil || ip.To4() != nil {
			return Host{}, fmt.Errorf("%q: %q is not a valid IPv6 address", raw, name)
		}
	} else if !validHostname(name) {
		return Host{}, fmt.Errorf("%q: %q is not a valid host name", raw, name)
	}
	h := Host{Name: name, Port: 22}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return Host{}, fmt.Errorf("%q: port %q is not a number from 1 to 65535", raw, port)
		}
		h.Port = n
	}
	return h, nil
}

func validHostname(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") || strings.HasPrefix(h, "-") {
		return false
	}
	for _, c := range h {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// Fingerprint returns key's SHA-256 fingerprint in ssh-keygen's form, "SHA256:" and the
// unpadded base64 of the hash. A certificate's fingerprint is its key's, as ssh-add -l shows.
func Fingerprint(key ssh.PublicKey) string {
	if c, ok := key.(*ssh.Certificate); ok {
		key = c.Key
	}
	return ssh.FingerprintSHA256(key)
}

// fingerprintBlob returns the fingerprint of a wire-format public key, "" when it does not
// parse.
func fingerprintBlob(blob []byte) string {
	k, err := ssh.ParsePublicKey(blob)
	if err != nil {
		return ""
	}
	return Fingerprint(k)
}

// checkFingerprint validates a git.ssh.keys entry.
func checkFingerprint(s string) error {
	b64, ok := strings.CutPrefix(s, "SHA256:")
	if !ok {
		if strings.HasPrefix(s, "MD5:") || strings.Count(s, ":") >= 15 {
			return fmt.Errorf("%q: MD5 fingerprints are not accepted; use the SHA256: form (ssh-add -l -E sha256)", s)
		}
		return fmt.Errorf("%q: want a SHA-256 fingerprint, SHA256:… as ssh-add -l prints it", s)
	}
	b, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil || len(b) != sha256.Size {
		return fmt.Errorf("%q: not a SHA-256 fingerprint (SHA256: and 43 base64 characters)", s)
	}
	return nil
}

// compiled is a validated Config.
type compiled struct {
	hosts []Host
	keys  map[string]bool
}

func (c Config) compile() (*compiled, error) {
	var errs []error
	out := &compiled{keys: map[string]bool{}}
	seen := map[string]int{}
	for i, s := range c.Hosts {
		h, err := ParseHost(s)
		if err != nil {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.ssh.hosts[%d]", i), "%v", err))
			continue
		}
		if j, dup := seen[h.Name]; dup {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.ssh.hosts[%d]", i), "%q names host %s again (git.ssh.hosts[%d]); one host has one port", s, h.Name, j))
			continue
		}
		seen[h.Name] = i
		out.hosts = append(out.hosts, h)
	}
	for i, s := range c.Keys {
		s = strings.TrimSpace(s)
		if err := checkFingerprint(s); err != nil {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.ssh.keys[%d]", i), "%v", err))
			continue
		}
		out.keys[s] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
