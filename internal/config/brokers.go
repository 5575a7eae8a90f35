package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/agentbox/agentbox/internal/config/field"
	"github.com/agentbox/agentbox/internal/relay"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

// Gateway configures the model gateways the LLM relay forwards to; the credential stays on the
// host. The zero value forwards to the providers' public APIs and attaches no credential, so
// every request is refused with gateway_credential_missing until a credential is configured.
type Gateway struct {
	// Anthropic is the gateway of /sandbox/anthropic/… (Anthropic Messages API).
	Anthropic GatewayProvider `json:"anthropic,omitzero" jsonschema_description:"Gateway of the Anthropic Messages API (/sandbox/anthropic/…)."`
	// OpenAI is the gateway of /sandbox/openai/… (OpenAI-compatible APIs).
	OpenAI GatewayProvider `json:"openai,omitzero" jsonschema_description:"Gateway of OpenAI-compatible APIs (/sandbox/openai/…)."`
	// Gemini is the gateway of /sandbox/gemini/… (the Gemini API: generateContent,
	// streamGenerateContent).
	Gemini GatewayProvider `json:"gemini,omitzero" jsonschema_description:"Gateway of the Gemini API (/sandbox/gemini/…)."`
}

// gatewayHeaders are the credential.header values each gateway accepts (compared without
// regard to case).
var gatewayHeaders = map[string][]string{
	"anthropic": {"x-api-key", "Authorization: Bearer"},
	"openai":    {"x-api-key", "Authorization: Bearer"},
	"gemini":    {"x-goog-api-key", "Authorization: Bearer"},
}

// GatewayProvider is one gateway.
type GatewayProvider struct {
	// URL is the upstream base URL: /sandbox/<provider>/v1/messages goes to <url>/v1/messages.
	// "" means the provider's public API (https://api.anthropic.com, https://api.openai.com,
	// https://generativelanguage.googleapis.com).
	URL string `json:"url,omitempty" jsonschema_description:"Upstream base URL: /sandbox/<provider>/<path> goes to <url>/<path>; empty means the provider's public API."`
	// Credential is attached host-side to every relayed request.
	Credential GatewayCredential `json:"credential,omitzero" jsonschema_description:"Credential attached host-side; never visible in the box."`
	// Allow are requests the relay forwards besides its provider's inference endpoints (the
	// built-in list in docs/configuration.md), each "METHOD /path", * matching any run of
	// characters but /: e.g. "POST /v1/embeddings". Every other request is refused
	// (gateway_path_refused): the box never wields the credential for the rest of the API.
	Allow []string `json:"allow,omitempty" jsonschema_description:"Requests the relay forwards besides the provider's inference endpoints: \"METHOD /path\", * matching any run of characters but /."`
	// ServerTools are the server-side tools (the provider runs them: web search, URL
	// fetching, MCP servers, code execution) a model call may declare besides the built-in
	// ones that reach nothing beyond the provider (docs/configuration.md), each named as the
	// provider spells its type without the version date: "web_search", "web_fetch", "mcp",
	// "code_execution"; Gemini's "googleSearch", "urlContext". Nil allows none: a request
	// declaring another is refused (gateway_tool_refused), as it would reach hosts egressAllow
	// does not list.
	ServerTools []string `json:"serverTools,omitempty" jsonschema_description:"Server-side tools a model call may declare besides the built-in ones: the tool's type without its version date, e.g. web_search, web_fetch, mcp, code_execution (Gemini: googleSearch, urlContext). The provider runs them, reaching hosts egressAllow does not list."`
}

// GatewayCredential names where the gateway credential comes from: exactly one of File and
// Command. Zero means none is configured.
type GatewayCredential struct {
	// File holds the credential; it must be owned by you with mode 0600.
	File string `json:"file,omitempty" jsonschema_description:"File holding the credential: owned by you, mode 0600."`
	// Command is a program and arguments (no shell) printing the credential.
	Command []string `json:"command,omitempty" jsonschema_description:"Program and arguments (no shell) printing the credential."`
	// TTL is how long a command's output is reused. Zero means 5m.
	TTL Duration `json:"ttl,omitempty" jsonschema_description:"How long a credential command's output is reused (default 5m)."`
	// Header is the header that carries it: "x-api-key" or "Authorization: Bearer" (anthropic,
	// openai), "x-goog-api-key" or "Authorization: Bearer" (gemini). "" means x-api-key for
	// anthropic, Authorization: Bearer for openai and x-goog-api-key for gemini.
	Header string `json:"header,omitempty" jsonschema_description:"Header carrying the credential: x-api-key or \"Authorization: Bearer\" (anthropic, openai), x-goog-api-key or \"Authorization: Bearer\" (gemini); default per provider."`
}

// Git configures the git relay and the ssh broker. The zero value reaches no remote.
type Git struct {
	Allow          []string              `json:"allow,omitempty" jsonschema_description:"Remotes the box may reach through the git relay, as prefixes: host[:port][/path] (https) or http://host:port/path (plain HTTP)."`
	PushAllow      []string              `json:"pushAllow,omitempty" jsonschema_description:"Remotes the box may push to, in the form of git.allow; a push must match both lists."`
	Credentials    []gitrelay.Credential `json:"credentials,omitempty" jsonschema_description:"Static git credentials attached host-side to allowed requests; the longest matching prefix wins."`
	EgressUpstream string                `json:"egressUpstream,omitempty" jsonschema_description:"https URL of an L7 egress endpoint that carries the git relay's upstream requests."`
	// SSH configures git over ssh through the ssh agent broker; empty hosts turn it off.
	SSH GitSSH `json:"ssh,omitzero" jsonschema_description:"git over ssh through the ssh broker: hosts and granted agent keys."`
}

// GitSSH is the ssh broker's configuration (git.ssh); see sshbroker.Config. It is its own type
// here so that the schema generator, which names types by their Go name, does not confuse it
// with Config.
type GitSSH sshbroker.Config

// Broker returns the ssh broker's view of s.
func (s GitSSH) Broker() sshbroker.Config { return sshbroker.Config(s) }

// Relay returns the git relay's view of g.
func (g Git) Relay() gitrelay.Config {
	return gitrelay.Config{Allow: g.Allow, PushAllow: g.PushAllow, Credentials: g.Credentials, EgressUpstream: g.EgressUpstream}
}

// validateBrokers checks the broker sections with their own validators and reports the first
// problem at its key.
func validateBrokers(file string, body ast.Node, c *Config) error {
	var gitCmds []error
	for i, cr := range c.Git.Credentials {
		if err := CheckCommand(cr.Command); err != nil {
			gitCmds = append(gitCmds, field.Errorf(fmt.Sprintf("git.credentials[%d].command", i), "%v", err))
		}
	}
	for _, err := range []error{c.Git.Relay().Validate(), errors.Join(gitCmds...), c.Git.SSH.Broker().Validate(), validateGateway(c.Gateway)} {
		if err == nil {
			continue
		}
		var fe *field.Error
		if !errors.As(err, &fe) {
			return &InvalidError{File: file, Field: "git", Msg: err.Error()}
		}
		path := fieldPath(fe.Key)
		n := nodeAt(body, path)
		for k := len(path); n == nil && k > 1; k-- {
			n = nodeAt(body, path[:k-1])
		}
		return errorAt(file, n, fe.Key, fe.Msg)
	}
	return nil
}

func validateGateway(g Gateway) error {
	var errs []error
	for _, gp := range []struct {
		name string
		p    GatewayProvider
	}{{"anthropic", g.Anthropic}, {"openai", g.OpenAI}, {"gemini", g.Gemini}} {
		name, p := gp.name, gp.p
		key := "gateway." + name
		if p.Credential.File != "" && p.Credential.Command != nil {
			errs = append(errs, field.Errorf(key+".credential", "set file or command, not both"))
		}
		if p.Credential.Command != nil && len(p.Credential.Command) == 0 {
			errs = append(errs, field.Errorf(key+".credential.command", "an empty command"))
		} else if err := CheckCommand(p.Credential.Command); err != nil {
			errs = append(errs, field.Errorf(key+".credential.command", "%v", err))
		}
		if f := p.Credential.File; f != "" && !filepath.IsAbs(f) {
			errs = append(errs, field.Errorf(key+".credential.file", "%q is not an absolute path (no ~ or variable is expanded): write the full path", f))
		}
		if p.URL != "" {
			if err := checkGatewayURL(p.URL); err != nil {
				errs = append(errs, field.Errorf(key+".url", "%s %v", p.URL, err))
			}
		}
		for i, a := range p.Allow {
			if _, err := llm.ParseEndpoint(a); err != nil {
				errs = append(errs, field.Errorf(fmt.Sprintf("%s.allow[%d]", key, i), "%v", err))
			}
		}
		for i, t := range p.ServerTools {
			if err := llm.ParseServerTool(t); err != nil {
				errs = append(errs, field.Errorf(fmt.Sprintf("%s.serverTools[%d]", key, i), "%v", err))
			}
		}
		if h := p.Credential.Header; h != "" && !slices.ContainsFunc(gatewayHeaders[name], func(a string) bool { return strings.EqualFold(h, a) }) {
			errs = append(errs, field.Errorf(key+".credential.header", "%s (allowed: %s)", h, strings.Join(gatewayHeaders[name], ", ")))
		}
	}
	return errors.Join(errs...)
}

// checkGatewayURL refuses what the LLM relay would refuse: anything but an http(s) URL with a
// host, credentials in the URL, a query or a fragment.
func checkGatewayURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return errors.New("is not an http(s) URL with a host")
	case u.User != nil:
		return errors.New("holds credentials: put them in credential")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return errors.New("has a query or fragment")
	}
	return nil
}

// CheckCredentialFiles reports every credential file of c the relays would refuse now, as
// `agentbox config validate` shows it: one that is absent, not a regular file, not owned by
// uid or open to group or others. The relays read the files at each request, so a file fixed
// later works without a restart; Load does not refuse a configuration for them.
func CheckCredentialFiles(c Config, uid int) error {
	var errs []error
	check := func(key, path string) {
		if path == "" || !filepath.IsAbs(path) {
			return // a relative path is refused by the decoder
		}
		f, err := os.Open(path)
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil {
				err = relay.CheckSecretFile(fi, uid)
			}
			f.Close()
		} else if errors.Is(err, fs.ErrNotExist) {
			err = errors.New("does not exist")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %v", key, path, err))
		}
	}
	for _, cr := range c.Credentials() {
		check(cr.Key+".file", cr.File)
	}
	return errors.Join(errs...)
}

// CredentialRef is one credential the configuration names: where a relay finds it host-side.
type CredentialRef struct {
	// Key is its configuration key: "gateway.anthropic.credential", "git.credentials[0]".
	Key string
	// Source is the key whose source (Effective.Sources) says which file sets it:
	// "gateway.anthropic.credential.file" or ".command", "git.credentials".
	Source string
	// File and Command are the credential's (at most one is set).
	File    string
	Command []string
}

// Credentials lists the credentials c names that have a file or a command: the gateway's
// (anthropic, openai, gemini), then git.credentials in order. The relays read each file and
// run each command on the host, outside any box, so a launch refuses a workspace that holds
// one (docs/security.md).
func (c Config) Credentials() []CredentialRef {
	var out []CredentialRef
	for _, gp := range []struct {
		name string
		p    GatewayProvider
	}{{"anthropic", c.Gateway.Anthropic}, {"openai", c.Gateway.OpenAI}, {"gemini", c.Gateway.Gemini}} {
		cr := gp.p.Credential
		key := "gateway." + gp.name + ".credential"
		switch {
		case cr.File != "":
			out = append(out, CredentialRef{Key: key, Source: key + ".file", File: cr.File})
		case len(cr.Command) > 0:
			out = append(out, CredentialRef{Key: key, Source: key + ".command", Command: cr.Command})
		}
	}
	for i, cr := range c.Git.Credentials {
		if cr.File != "" || len(cr.Command) > 0 {
			out = append(out, CredentialRef{Key: fmt.Sprintf("git.credentials[%d]", i), Source: "git.credentials", File: cr.File, Command: cr.Command})
		}
	}
	return out
}

// CommandPaths returns the paths the arguments of command (after its program) name, with
// the index of the argument, for the launch to compare with the workspace: the relays run a
// credential command on the host in "/" with the daemon's $HOME. Each argument is read as a
// shell would split a -c script, near enough (commandWords): quotes and backslashes dropped
// ("ho""me" is one word to a shell), $HOME, ${HOME} and a leading ~ read as home (when
// absolute), split at blanks and at = : , ; | & ( ) < > { }. A word holding "/" is a path:
// absolute as written, else resolved against "/" (pass's anthropic/key names /anthropic/key,
// harmless unless that is the workspace). err refuses what this reading cannot follow
// (CheckCommand); paths are then not to be trusted.
func CommandPaths(command []string, home string) (paths []string, index []int, err error) {
	if err := CheckCommand(command); err != nil {
		return nil, nil, err
	}
	for i, arg := range command {
		if i == 0 {
			continue
		}
		words, _ := commandWords(arg, home)
		for _, w := range words {
			if !strings.Contains(w, "/") {
				continue
			}
			if !filepath.IsAbs(w) {
				w = "/" + w
			}
			paths, index = append(paths, filepath.Clean(w)), append(index, i)
		}
	}
	return paths, index, nil
}

// shells run a -c script whose words commandWords reads; the interpreters' inline code
// (python3 -c, perl -e, node --eval, an awk program) is not read at all.
var (
	interpreters = []string{"python", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "tclsh", "pwsh", "osascript", "Rscript", "julia", "awk", "gawk", "mawk", "nawk"}
	inlineCode   = []string{"-c", "-e", "-E", "-r", "-p", "--eval", "--print", "--command", "-Command"}
	chdirWords   = []string{"cd", "pushd", "popd", "chdir"}
	chdirOptions = []string{"-C", "--chdir", "--directory", "--cwd", "--workdir", "--working-directory", "--work-tree", "--git-dir"}
)

// CheckCommand refuses a credential command whose paths CommandPaths cannot read from its
// words (review 19b, finding 1): one that changes directory (a cd or pushd word, env -C, a
// --chdir option), a word starting ./ or ../ (relative to a folder not known), an expansion
// other than $HOME and ${HOME} ($D, $1, $(…), `…`, ~user, a brace or glob pattern beside a
// path), or inline code of an interpreter other than a shell (python3 -c, perl -e, an awk
// program), which may build any path. The fix is the same for each: name the script by its
// absolute path, outside the workspace, and let it do the rest.
func CheckCommand(command []string) error {
	const fix = "name the script by its absolute path (outside any workspace) and let it do the rest"
	interp, awk := false, false
	for i, arg := range command {
		words, err := commandWords(arg, "/home")
		if err != nil {
			return fmt.Errorf("argument %d %q: %v, which the launch cannot follow to the files the relay runs on the host: %s", i, arg, err, fix)
		}
		for _, w := range words {
			switch {
			case slices.Contains(chdirWords, w) || slices.Contains(chdirOptions, w):
				return fmt.Errorf("argument %d %q: %q changes the working folder, so a relative path after it names a file the launch cannot see: %s", i, arg, w, fix)
			case w == "." || w == ".." || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../"):
				return fmt.Errorf("argument %d %q: %q is relative to a working folder not known: %s", i, arg, w, fix)
			case interp && slices.Contains(inlineCode, w):
				return fmt.Errorf("argument %d %q: inline code of an interpreter other than a shell (%q) is not read, and it may build any path: %s", i, arg, w, fix)
			case awk && w == "-f":
				awk = false
			case isInterpreter(w):
				interp = true
				awk = awk || strings.HasSuffix(filepath.Base(w), "awk")
			}
		}
	}
	if awk {
		return fmt.Errorf("%q: an awk program is not read, and it may build any path: %s", command, fix)
	}
	return nil
}

// isInterpreter reports whether w names an interpreter whose inline code CheckCommand does not
// read: python3, /usr/bin/perl5.36, gawk.
func isInterpreter(w string) bool {
	base := filepath.Base(w)
	return slices.ContainsFunc(interpreters, func(n string) bool {
		return base == n || strings.HasPrefix(base, n) && strings.Trim(base[len(n):], "0123456789.") == ""
	})
}

// commandWords splits one argument of a credential command into the words a shell running it
// as a -c script would see, near enough (CommandPaths); err names an expansion it cannot read.
func commandWords(arg, home string) ([]string, error) {
	arg = strings.NewReplacer(`"`, "", `'`, "", `\`, "").Replace(arg)
	var b strings.Builder
	for i := 0; i < len(arg); i++ {
		c := arg[i]
		switch {
		case c == '`':
			return nil, errors.New("a command substitution (`…`)")
		case c == '$':
			rest := arg[i+1:]
			switch {
			case strings.HasPrefix(rest, "{HOME}"):
				i += len("{HOME}")
			case strings.HasPrefix(rest, "HOME") && (len(rest) == 4 || !isNameByte(rest[4])):
				i += len("HOME")
			case rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n':
				b.WriteByte(c)
				continue
			default:
				return nil, errors.New("an expansion other than $HOME (a variable, $(…), $1)")
			}
			if !filepath.IsAbs(home) {
				return nil, errors.New("$HOME, with no absolute home known")
			}
			b.WriteString(home)
		case c == '{' && i+1 < len(arg) && !strings.ContainsRune(" \t\n", rune(arg[i+1])):
			return nil, errors.New("a brace pattern ({a,b})")
		default:
			b.WriteByte(c)
		}
	}
	sep := func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || strings.ContainsRune("=:,;|&()<>{}", r)
	}
	words := strings.FieldsFunc(b.String(), sep)
	for i, w := range words {
		switch {
		case w == "~" || strings.HasPrefix(w, "~/"):
			if !filepath.IsAbs(home) {
				return nil, errors.New("~, with no absolute home known")
			}
			words[i] = home + w[1:]
		case strings.HasPrefix(w, "~"):
			return nil, fmt.Errorf("%q (another user's home)", w)
		case strings.Contains(w, "/") && strings.ContainsAny(w, "*?["):
			return nil, fmt.Errorf("%q (a pattern the shell expands)", w)
		}
	}
	return words, nil
}

// isNameByte reports whether c may continue a shell variable's name.
func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
