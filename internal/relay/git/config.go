package git

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/config/field"
	"github.com/agentbox/agentbox/internal/relay"
)

// Config is the `git:` section of agentbox's configuration. Its zero value is valid and
// refuses every git request: nothing is allowed, nothing may be pushed, no credential is
// attached, and allowed requests go straight to the remote.
type Config struct {
	// Allow lists the remotes the box may reach through the git relay (git.allow), as
	// prefixes: "github.com/org" admits every repository under github.com/org/. An entry is
	// "host[:port][/path]" for an https remote, or names its scheme, "http://host:port/path",
	// for a plain-HTTP one (an internal mirror). Hosts compare case-insensitively with the
	// scheme's default port filled in; paths compare case-sensitively, element by element,
	// and a final element matches with or without ".git". Empty means no remote is reachable.
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty" jsonschema_description:"Remotes the box may reach through the git relay, as prefixes: host[:port][/path] (https) or http://host:port/path (plain HTTP). Matched per path element; hosts case-insensitive."`
	// PushAllow lists the remotes the box may push to (git.pushAllow), in the same form as
	// Allow. A push needs both: its remote must match Allow and PushAllow. Empty means no push
	// is allowed.
	PushAllow []string `json:"pushAllow,omitempty" yaml:"pushAllow,omitempty" jsonschema_description:"Remotes the box may push to, in the form of git.allow; a push must match both lists."`
	// Credentials are attached host-side to allowed requests (git.credentials); the box never
	// sees them. For each request the entry with the longest matching prefix applies. Empty
	// means requests go out without a credential.
	Credentials []Credential `json:"credentials,omitempty" yaml:"credentials,omitempty" jsonschema_description:"Static git credentials attached host-side to allowed requests; the longest matching prefix wins."`
	// EgressUpstream, when set, is an https URL of an L7 egress endpoint that carries every
	// upstream request instead of a direct connection (git.egressUpstream): a request for
	// https://host/path goes to <egressUpstream>/host/path with Host set to the egress host.
	// Empty means the daemon connects to remotes itself.
	EgressUpstream string `json:"egressUpstream,omitempty" yaml:"egressUpstream,omitempty" jsonschema_description:"https URL of an L7 egress endpoint that carries the git relay's upstream requests (<egressUpstream>/<host>/<path>)."`
}

// Credential is one static git credential (an entry of git.credentials). Exactly one of File
// and Command is set.
type Credential struct {
	// Prefix is the remote prefix the credential is for, in the form of a git.allow entry.
	// Required.
	Prefix string `json:"prefix" yaml:"prefix" jsonschema_description:"Remote prefix the credential is for, in the form of a git.allow entry."`
	// Username is sent with the secret as HTTP basic authentication (for GitHub tokens any
	// non-empty name works, such as x-access-token). Required.
	Username string `json:"username" yaml:"username" jsonschema_description:"User name sent with the secret (HTTP basic authentication)."`
	// File is a file holding the secret (a token or password). It must be a regular file
	// owned by the daemon's user with mode 0600 or stricter; it is looked at (stat) at every
	// request and read again whenever it changed, so a rotated secret takes effect at once.
	File string `json:"file,omitempty" yaml:"file,omitempty" jsonschema_description:"File holding the secret: owned by you, mode 0600 or stricter."`
	// Command is a program and its arguments (no shell) whose standard output is the secret.
	// Its output is reused for five minutes, and dropped when the remote refuses it.
	Command []string `json:"command,omitempty" yaml:"command,omitempty" jsonschema_description:"Program and arguments (no shell) printing the secret on standard output."`
}

// CheckPushWithinAllow reports a git.pushAllow entry that overlaps no git.allow entry: a push
// must match both lists, so such an entry allows nothing and is a mistake. It is checked on
// the merged configuration (git.allow may come from another file than git.pushAllow) and
// assumes c is otherwise valid.
func (c Config) CheckPushWithinAllow() error {
	p, err := compile(c)
	if err != nil {
		return err
	}
	var errs []error
	for i, e := range p.push {
		if !overlapsAny(e, p.allow) {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.pushAllow[%d]", i), "%q lies within no git.allow entry, so it allows nothing (a push must match both lists): add it to git.allow or remove it", e.raw))
		}
	}
	return errors.Join(errs...)
}

// Validate reports every invalid value of c, each error naming its key
// ("git.allow[2]: …"). A nil result means New accepts c.
func (c Config) Validate() error {
	_, err := compile(c)
	return err
}

// entry is one parsed prefix (an allow, pushAllow or credential entry).
type entry struct {
	raw    string
	scheme string   // "https" or "http"
	host   string   // lowercase, IPv6 without brackets
	port   string   // always set: explicit or the scheme's default
	path   []string // prefix elements, possibly none
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// hostport returns host[:port] with the port left out when it is the scheme's default: the
// form used in relay paths and in the remote's own URLs.
func (e *entry) hostport() string {
	return joinHostPort(e.host, e.port, e.scheme)
}

func joinHostPort(host, port, scheme string) string {
	h := host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if port == defaultPort(scheme) {
		return h
	}
	return h + ":" + port
}

// origin returns scheme://host[:port].
func (e *entry) origin() string { return e.scheme + "://" + e.hostport() }

func (e *entry) String() string {
	s := e.origin()
	if len(e.path) > 0 {
		s += "/" + strings.Join(e.path, "/")
	}
	return s
}

// parseEntry parses "host[:port][/path]" or "scheme://host[:port][/path]".
func parseEntry(s string) (*entry, error) {
	raw := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	if !strings.Contains(s, "://") {
		if strings.HasPrefix(s, "git@") || strings.Contains(strings.SplitN(s, "/", 2)[0], "@") {
			return nil, fmt.Errorf("%q looks like an ssh remote; write the host and path (github.com/org/repo)", raw)
		}
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", raw, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("%q: scheme %q is not served (want https:// or http://; git over ssh is configured under the ssh broker)", raw, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("%q: credentials in the URL are refused; use git.credentials", raw)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return nil, fmt.Errorf("%q: a query or fragment is not allowed", raw)
	}
	host, port, err := splitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", raw, err)
	}
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	e := &entry{raw: raw, scheme: u.Scheme, host: host, port: port}
	p := strings.Trim(u.Path, "/")
	if p != "" {
		for _, el := range strings.Split(p, "/") {
			if err := checkElem(el); err != nil {
				return nil, fmt.Errorf("%q: %v", raw, err)
			}
			e.path = append(e.path, el)
		}
	}
	return e, nil
}

func checkElem(el string) error {
	switch {
	case el == "":
		return errors.New("empty path element (doubled slash)")
	case el == "." || el == "..":
		return fmt.Errorf("path element %q", el)
	case strings.ContainsAny(el, "%#?"):
		// An element is used as it is, never decoded again: a "%" here would be decoded by
		// the remote (%2e%2e is a dot segment there), and "#" or "?" would end its path.
		return fmt.Errorf("path element %q has %%, # or ?: repository paths are plain names (percent-encoding is decoded once, by the relay, and never again)", el)
	case strings.ContainsAny(el, "*[]"):
		return fmt.Errorf("path element %q: prefixes are matched per path element, not as patterns (write github.com/org for every repository of org)", el)
	case strings.ContainsFunc(el, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return fmt.Errorf("path element %q has control characters or a backslash", el)
	}
	return nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port", lowercases the host and
// checks both parts.
func splitHostPort(hp string) (host, port string, err error) {
	host = hp
	if strings.HasPrefix(hp, "[") || strings.Count(hp, ":") == 1 {
		if h, p, e := net.SplitHostPort(hp); e == nil {
			host, port = h, p
		} else if strings.HasPrefix(hp, "[") && strings.HasSuffix(hp, "]") {
			host = hp[1 : len(hp)-1]
		} else {
			return "", "", fmt.Errorf("host %q: %v", hp, e)
		}
	}
	host = strings.ToLower(host)
	if host == "" {
		return "", "", errors.New("no host")
	}
	if strings.Contains(host, ":") {
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", "", fmt.Errorf("host %q is not a valid IPv6 address", host)
		}
	} else if !validHostname(host) {
		return "", "", fmt.Errorf("host %q is not a valid host name", host)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	return host, port, nil
}

func validHostname(h string) bool {
	if len(h) > 253 || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for _, c := range h {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// matches reports whether a remote location (scheme, lowercase host, port, repository path
// elements) lies under e. scheme "" means "the scheme of e" (a relay path carries none);
// port "" means the default port of that scheme.
func (e *entry) matches(scheme, host, port string, elems []string) bool {
	if scheme == "" {
		scheme = e.scheme
	}
	if port == "" {
		port = defaultPort(scheme)
	}
	if scheme != e.scheme || host != e.host || port != e.port || len(elems) < len(e.path) {
		return false
	}
	for i, p := range e.path {
		if elems[i] == p {
			continue
		}
		// "org/repo" and "org/repo.git" name the same repository.
		if i == len(e.path)-1 && strings.TrimSuffix(elems[i], ".git") == strings.TrimSuffix(p, ".git") {
			continue
		}
		return false
	}
	return true
}

// policy is a validated Config.
type policy struct {
	allow  []*entry
	push   []*entry
	creds  []*credEntry
	egress *url.URL
}

type credEntry struct {
	entry *entry
	key   string // "git.credentials[i]"
	cred  Credential
	src   *relay.CredentialSource
}

// compile validates c and returns its policy; the error joins one error per invalid value.
func compile(c Config) (*policy, error) {
	var errs []error
	p := &policy{}
	parseList := func(key string, list []string) []*entry {
		var out []*entry
		for i, s := range list {
			e, err := parseEntry(s)
			if err != nil {
				errs = append(errs, field.Errorf(fmt.Sprintf("git.%s[%d]", key, i), "%v", err))
				continue
			}
			out = append(out, e)
		}
		return out
	}
	p.allow = parseList("allow", c.Allow)
	p.push = parseList("pushAllow", c.PushAllow)

	// A relay path carries host[:port] but no scheme: the same host and port cannot be both
	// an https and an http remote.
	seen := map[string]*entry{}
	for i, e := range p.allow {
		k := e.host + "\x00" + e.port
		if o := seen[k]; o != nil && o.scheme != e.scheme {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.allow[%d]", i), "%q names %s:%s with scheme %s, but %q names it with %s; one host and port is one remote",
				e.raw, e.host, e.port, e.scheme, o.raw, o.scheme))
			continue
		}
		seen[k] = e
	}
	for i, e := range p.push {
		if o := seen[e.host+"\x00"+e.port]; o != nil && o.scheme != e.scheme {
			errs = append(errs, field.Errorf(fmt.Sprintf("git.pushAllow[%d]", i), "%q uses scheme %s, but git.allow names %s:%s with %s", e.raw, e.scheme, e.host, e.port, o.scheme))
		}
	}

	for i, cr := range c.Credentials {
		key := fmt.Sprintf("git.credentials[%d]", i)
		e, err := parseEntry(cr.Prefix)
		switch {
		case cr.Prefix == "":
			errs = append(errs, field.Errorf(key+".prefix", "required"))
		case err != nil:
			errs = append(errs, field.Errorf(key+".prefix", "%v", err))
		case !overlapsAny(e, p.allow):
			errs = append(errs, field.Errorf(key+".prefix", "%q is not covered by any git.allow entry, so the credential would never be used", cr.Prefix))
		}
		switch {
		case cr.Username == "":
			errs = append(errs, field.Errorf(key+".username", "required (HTTP basic authentication sends a user name with the secret)"))
		case strings.ContainsAny(cr.Username, ":\r\n\x00"):
			errs = append(errs, field.Errorf(key+".username", "must not contain a colon or control characters"))
		}
		switch {
		case cr.File == "" && len(cr.Command) == 0:
			errs = append(errs, field.Errorf(key, "set file or command"))
		case cr.File != "" && len(cr.Command) > 0:
			errs = append(errs, field.Errorf(key, "set one of file and command, not both"))
		case len(cr.Command) > 0 && cr.Command[0] == "":
			errs = append(errs, field.Errorf(key+".command", "empty program name"))
		case cr.File != "" && !filepath.IsAbs(cr.File):
			errs = append(errs, field.Errorf(key+".file", "%q is not an absolute path (no ~ or variable is expanded): write the full path", cr.File))
		}
		if err == nil && e != nil {
			p.creds = append(p.creds, &credEntry{entry: e, key: key, cred: cr, src: newSource(key, cr)})
		}
	}

	if c.EgressUpstream != "" {
		u, err := url.Parse(c.EgressUpstream)
		switch {
		case err != nil:
			errs = append(errs, field.Errorf("git.egressUpstream", "%v", err))
		case u.Scheme != "https":
			errs = append(errs, field.Errorf("git.egressUpstream", "%q must be an https URL (the upstream leg carries git credentials)", c.EgressUpstream))
		case u.Host == "":
			errs = append(errs, field.Errorf("git.egressUpstream", "%q has no host", c.EgressUpstream))
		case u.User != nil:
			errs = append(errs, field.Errorf("git.egressUpstream", "credentials in the URL are refused"))
		case u.RawQuery != "" || u.Fragment != "":
			errs = append(errs, field.Errorf("git.egressUpstream", "%q has a query or fragment, which is not allowed", c.EgressUpstream))
		default:
			u.Path = strings.TrimSuffix(u.Path, "/")
			u.RawPath = ""
			p.egress = u
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// overlapsAny reports whether some allowed location lies under both e and one of list.
func overlapsAny(e *entry, list []*entry) bool {
	for _, a := range list {
		if e.matches(a.scheme, a.host, a.port, a.path) || a.matches(e.scheme, e.host, e.port, e.path) {
			return true
		}
	}
	return false
}

// match returns the longest entry of list under which the location lies, or nil.
func match(list []*entry, scheme, host, port string, elems []string) *entry {
	var best *entry
	for _, e := range list {
		if e.matches(scheme, host, port, elems) && (best == nil || len(e.path) > len(best.path)) {
			best = e
		}
	}
	return best
}

// credentialFor returns the credential with the longest prefix over the location, or nil.
func (p *policy) credentialFor(scheme, host, port string, elems []string) *credEntry {
	var best *credEntry
	for _, c := range p.creds {
		if c.entry.matches(scheme, host, port, elems) && (best == nil || len(c.entry.path) > len(best.entry.path)) {
			best = c
		}
	}
	return best
}
