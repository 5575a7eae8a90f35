package git

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// GitconfigPath is where the box finds its generated gitconfig: the launch directory holding
// it is bound at /run/agentbox.
const GitconfigPath = "/run/agentbox/gitconfig"

// IdentityKeys are the only keys of the user's own git configuration that reach the box.
var IdentityKeys = []string{
	"author.email", "author.name",
	"committer.email", "committer.name",
	"user.email", "user.name",
}

// Identity holds the user's git identity: values of IdentityKeys, by key. Missing keys are
// not set in the box.
type Identity map[string]string

// ReadIdentity reads IdentityKeys from the user's global git configuration host-side, with
// one `git config --global --get-regexp` (a launch must not pay a git process per key), and
// keeps nothing else of it. git names the git program; "" means git as found once through
// the process's PATH (hostprog: never looked up again). A key that is
// not set is left out; when a key is set more than once the last value wins, as in git.
func ReadIdentity(ctx context.Context, git string) (Identity, error) {
	if git == "" {
		git = "git"
	}
	cmd := hostprog.Command(ctx, git, "config", "--global", "--null", "--get-regexp", identityRegexp)
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return Identity{}, nil // none set
	case err != nil:
		return nil, fmt.Errorf("read git identity: %w", err)
	}
	allowed := map[string]bool{}
	for _, k := range IdentityKeys {
		allowed[k] = true
	}
	id := Identity{}
	// With --null, each entry is "key\nvalue\x00".
	for _, entry := range bytes.Split(out, []byte{0}) {
		k, v, ok := bytes.Cut(entry, []byte{'\n'})
		if !ok || !allowed[strings.ToLower(string(k))] {
			continue
		}
		id[strings.ToLower(string(k))] = string(v)
	}
	return id, nil
}

// identityRegexp matches exactly IdentityKeys (git compares section and key names
// case-insensitively and lower-cases them in its output).
const identityRegexp = `^(author|committer|user)\.(name|email)$`

// Gitconfig describes the gitconfig of one launch: the box's only git configuration
// (GIT_CONFIG_GLOBAL, with GIT_CONFIG_NOSYSTEM). It rewrites every allowed remote's URL to the
// git relay, hands the relay the launch's pairing as an extra header scoped to the relay's
// URL, empties the credential helpers and carries the user's identity, nothing else.
type Gitconfig struct {
	// RelayURL is the relay as the box reaches it: a loopback http URL such as
	// "http://127.0.0.1:7070". Required.
	RelayURL string
	// Pairing is the launch session's pairing. Required.
	Pairing session.Pairing
	// Allow is git.allow: every host it names gets its URLs rewritten to the relay. Empty
	// means no rewrite (the relay reaches nothing anyway).
	Allow []string
	// SSHHosts are the hosts an ssh broker serves: their ssh-form remotes (git@host:…) are
	// left to it. For the other allowed hosts, ssh-form remotes are rewritten to a relay URL
	// that is refused with a message naming the https remote. Nil means no ssh broker.
	SSHHosts []string
	// Identity is the user's git identity (ReadIdentity). Nil means none: git in the box
	// then refuses to commit until one is given.
	Identity Identity
}

// Bytes returns the gitconfig file. It is deterministic: the same Gitconfig gives the same
// bytes. The file holds the pairing; write it mode 0600.
func (g Gitconfig) Bytes() ([]byte, error) {
	relayBase, err := relayURL(g.RelayURL)
	if err != nil {
		return nil, err
	}
	if !session.WellFormed(g.Pairing.Reveal()) {
		return nil, errors.New("gitconfig: the pairing is missing or malformed")
	}
	gitBase := relayBase + strings.TrimPrefix(PathPrefix, "/")

	type rewrite struct {
		to   string
		from []string
	}
	byTo := map[string]*rewrite{}
	add := func(to, from string) {
		rw := byTo[to]
		if rw == nil {
			rw = &rewrite{to: to}
			byTo[to] = rw
		}
		if !slices.Contains(rw.from, from) {
			rw.from = append(rw.from, from)
		}
	}
	sshDone := map[string]bool{}
	for i, s := range g.Allow {
		e, err := parseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("gitconfig: git.allow[%d]: %v", i, err)
		}
		hp := e.hostport()
		add(gitBase+hp+"/", e.origin()+"/")
		if e.scheme != "https" || sshDone[e.host] || slices.ContainsFunc(g.SSHHosts, func(h string) bool { return strings.EqualFold(h, e.host) }) {
			continue
		}
		sshDone[e.host] = true
		to := relayBase + strings.TrimPrefix(sshPrefix, "/") + e.host + "/"
		sshHost := e.host // ssh forms carry no http port
		if strings.Contains(sshHost, ":") {
			sshHost = "[" + sshHost + "]"
		}
		add(to, "git@"+sshHost+":")
		add(to, "ssh://git@"+sshHost+"/")
		add(to, "ssh://"+sshHost+"/")
	}
	for k, v := range g.Identity {
		if !slices.Contains(IdentityKeys, k) {
			return nil, fmt.Errorf("gitconfig: identity key %q is not one of %s", k, strings.Join(IdentityKeys, ", "))
		}
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return nil, fmt.Errorf("gitconfig: identity %s has control characters", k)
		}
	}

	var b bytes.Buffer
	b.WriteString("# Generated by agentbox for one launch: the box's only git configuration.\n")
	b.WriteString("# Remotes go through the daemon's git relay, which holds the credentials.\n")
	b.WriteString("[credential]\n\thelper = \"\"\n")
	fmt.Fprintf(&b, "[http %s]\n", quote(gitBase))
	fmt.Fprintf(&b, "\textraHeader = %s\n", quote(session.HeaderName+": "+g.Pairing.Reveal()))
	b.WriteString("\tproxy = \"\"\n")
	tos := make([]string, 0, len(byTo))
	for to := range byTo {
		tos = append(tos, to)
	}
	slices.Sort(tos)
	for _, to := range tos {
		rw := byTo[to]
		slices.Sort(rw.from)
		fmt.Fprintf(&b, "[url %s]\n", quote(to))
		for _, f := range rw.from {
			fmt.Fprintf(&b, "\tinsteadOf = %s\n", quote(f))
		}
	}
	section := ""
	for _, k := range IdentityKeys {
		v, ok := g.Identity[k]
		if !ok {
			continue
		}
		sec, name, _ := strings.Cut(k, ".")
		if sec != section {
			fmt.Fprintf(&b, "[%s]\n", sec)
			section = sec
		}
		fmt.Fprintf(&b, "\t%s = %s\n", name, quote(v))
	}
	return b.Bytes(), nil
}

// relayURL checks the relay's in-box URL and returns it ending in "/".
func relayURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("gitconfig: relay URL: %v", err)
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	switch {
	case u.Scheme != "http":
		return "", fmt.Errorf("gitconfig: relay URL %q: want http:// (the relay listens on the box's loopback)", s)
	case host != "localhost" && (ip == nil || !ip.IsLoopback()):
		return "", fmt.Errorf("gitconfig: relay URL %q: the host must be loopback", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", fmt.Errorf("gitconfig: relay URL %q: want scheme, host and port only", s)
	}
	return "http://" + u.Host + "/", nil
}

// quote writes s as a double-quoted gitconfig value (or subsection name), escaping what git
// would otherwise read differently.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Env returns the environment the box's git needs: GIT_CONFIG_GLOBAL pointing at the
// generated file (path; "" means GitconfigPath), no system configuration, and no terminal
// prompts (a credential prompt in the box could only be answered with a secret the box must
// not hold).
func Env(path string) []string {
	if path == "" {
		path = GitconfigPath
	}
	return []string{
		"GIT_CONFIG_GLOBAL=" + path,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
	}
}

// IdentityCache reads the user's git identity (ReadIdentity) again only when the global git
// configuration files change: a launch would otherwise pay a git process (≈10 ms) for the same
// answer. The cache is keyed on the contents of the files git reads for --global
// ($GIT_CONFIG_GLOBAL, or $XDG_CONFIG_HOME/git/config and ~/.gitconfig; with --global git does
// not follow their includes). When the environment adds configuration (GIT_CONFIG_COUNT,
// GIT_CONFIG_PARAMETERS) every read asks git, since the key cannot see it. Its zero value is
// ready to use.
type IdentityCache struct {
	// Git names the git program; "" means git as found through $PATH (ReadIdentity).
	Git string

	mu  sync.Mutex
	key string
	id  Identity
}

// Read returns the user's git identity, from the cache when the configuration is unchanged.
func (c *IdentityCache) Read(ctx context.Context) (Identity, error) {
	key, cacheable := globalConfigKey()
	c.mu.Lock()
	if cacheable && c.id != nil && key == c.key {
		id := maps.Clone(c.id)
		c.mu.Unlock()
		return id, nil
	}
	c.mu.Unlock()
	id, err := ReadIdentity(ctx, c.Git)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if cacheable {
		c.key, c.id = key, maps.Clone(id)
	} else {
		c.key, c.id = "", nil
	}
	c.mu.Unlock()
	return id, nil
}

// globalConfigKey identifies the contents of the global git configuration files; cacheable is
// false when something the key cannot see may change the answer.
func globalConfigKey() (key string, cacheable bool) {
	if os.Getenv("GIT_CONFIG_COUNT") != "" || os.Getenv("GIT_CONFIG_PARAMETERS") != "" {
		return "", false
	}
	var files []string
	if f := os.Getenv("GIT_CONFIG_GLOBAL"); f != "" {
		files = []string{f}
	} else {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			xdg = filepath.Join(home, ".config")
		}
		files = []string{filepath.Join(xdg, "git", "config"), filepath.Join(home, ".gitconfig")}
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(h, "%s absent\n", f)
		case err != nil:
			return "", false
		default:
			fmt.Fprintf(h, "%s %d %x\n", f, len(b), sha256.Sum256(b))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), true
}
