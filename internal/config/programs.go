package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/profile"
)

// Managed are the locks the system daemon delivers into the agents' managed settings.
type Managed struct {
	// ClaudeCode are the keys written into Claude Code's managed settings.
	ClaudeCode ClaudeCodeManaged `json:"claudeCode,omitzero" jsonschema_description:"Keys written into Claude Code's managed settings (/etc/claude-code)."`
}

// ClaudeCodeManaged are Claude Code's managed-only locks, written exactly as Claude Code reads
// them. Claude Code honours them only from admin-writable sources, which is why only the
// system policy may set them.
type ClaudeCodeManaged struct {
	// AllowManagedHooksOnly makes Claude Code run only hooks from managed settings. False
	// means the key is not written.
	AllowManagedHooksOnly bool `json:"allowManagedHooksOnly,omitempty" jsonschema_description:"Claude Code runs only hooks from managed settings."`
	// AllowManagedMcpServersOnly makes Claude Code use only the MCP servers that
	// allowedMcpServers lists. False means the key is not written.
	AllowManagedMcpServersOnly bool `json:"allowManagedMcpServersOnly,omitempty" jsonschema_description:"Claude Code uses only the MCP servers allowedMcpServers lists."`
	// AllowedMcpServers are the MCP servers Claude Code may use. Nil means the key is not
	// written.
	AllowedMcpServers []McpServer `json:"allowedMcpServers,omitempty" jsonschema_description:"MCP servers Claude Code may use; each entry names exactly one of serverName, serverCommand, serverUrl."`
	// AutoUpdates says whether the managed install may update itself. "" means off: a
	// managed install is updated by the package manager, not by the vendor's updater.
	AutoUpdates string `json:"autoUpdates,omitempty" jsonschema:"enum=off,enum=on" jsonschema_description:"Vendor auto-updates of the managed install: off (the default) or on."`
}

// McpServer is one allowedMcpServers entry: exactly one field is set.
type McpServer struct {
	ServerName    string   `json:"serverName,omitempty" jsonschema_description:"An MCP server by its configured name."`
	ServerCommand []string `json:"serverCommand,omitempty" jsonschema_description:"A stdio MCP server by its exact command and arguments."`
	ServerURL     string   `json:"serverUrl,omitempty" jsonschema_description:"A remote MCP server by URL (* wildcards allowed)."`
}

var mcpNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// validate checks what the types cannot: the programs (profile.Profile.Validate, executables
// claimed twice), model names and the managed entries. An error is an *InvalidError at the
// offending key.
func validate(file string, body ast.Node, c *Config) error {
	at := func(path []string, msg string) error {
		return errorAt(file, nodeAt(body, path), strings.Join(path, "."), msg)
	}
	if err := validateEgressAllow(file, body, c); err != nil {
		return err
	}
	if _, err := console.ParseDetachKeys(c.Console.DetachKeys); err != nil {
		msg := err.Error()
		var de *console.DetachKeysError
		if errors.As(err, &de) {
			msg = de.Detail()
		}
		return at([]string{"console", "detachKeys"}, msg)
	}
	if err := validateBrokers(file, body, c); err != nil {
		return err
	}
	if err := validateContainment(file, body, c); err != nil {
		return err
	}
	if len(c.Programs) > 0 {
		if _, err := profile.NewSet(c.Programs); err != nil {
			var fe *profile.FieldError
			if !errors.As(err, &fe) {
				return &InvalidError{File: file, Field: "programs", Msg: err.Error()}
			}
			path := []string{"programs", fe.Profile}
			if fe.Field != "" {
				path = append(path, fieldPath(fe.Field)...)
			}
			// The position of the deepest key that exists (an absent key has none).
			n := nodeAt(body, path)
			for k := len(path); n == nil && k > 1; k-- {
				n = nodeAt(body, path[:k-1])
			}
			return errorAt(file, n, joinField(path), fe.Msg)
		}
	}
	for _, id := range sortedKeys(c.Models) {
		if !profile.ValidID(id) {
			return at([]string{"models", id}, "invalid program id (lowercase letters, digits, . _ -)")
		}
		if m := c.Models[id]; !profile.ModelRE().MatchString(m) {
			return at([]string{"models", id}, fmt.Sprintf("invalid model name %q (letters, digits and . _ : / @ + -)", m))
		}
	}
	for i, s := range c.Managed.ClaudeCode.AllowedMcpServers {
		path := []string{"managed", "claudeCode", "allowedMcpServers", "[" + strconv.Itoa(i) + "]"}
		set := 0
		for _, b := range []bool{s.ServerName != "", s.ServerCommand != nil, s.ServerURL != ""} {
			if b {
				set++
			}
		}
		if set != 1 {
			return errorAt(file, nodeAt(body, path), joinField(path), "an entry names exactly one of serverName, serverCommand, serverUrl")
		}
		switch {
		case s.ServerName != "" && !mcpNameRE().MatchString(s.ServerName):
			p := append(path, "serverName")
			return errorAt(file, nodeAt(body, p), joinField(p), fmt.Sprintf("invalid server name %q (letters, digits, _ and -)", s.ServerName))
		case s.ServerCommand != nil && (len(s.ServerCommand) == 0 || slices.Contains(s.ServerCommand, "")):
			p := append(path, "serverCommand")
			return errorAt(file, nodeAt(body, p), joinField(p), "a command is a non-empty list of non-empty strings")
		case s.ServerURL != "":
			if err := checkMcpURL(s.ServerURL); err != "" {
				p := append(path, "serverUrl")
				return errorAt(file, nodeAt(body, p), joinField(p), err)
			}
		}
	}
	return nil
}

func checkMcpURL(s string) string {
	u, err := url.Parse(strings.ReplaceAll(s, "*", "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Sprintf("invalid server URL %q (an http, https, ws or wss URL; * wildcards allowed)", s)
	}
	return ""
}

// fieldPath splits a profile field path ("home[2].path") into AST path elements.
func fieldPath(f string) []string {
	var out []string
	for _, part := range strings.Split(f, ".") {
		for part != "" {
			i := strings.IndexByte(part, '[')
			if i < 0 {
				out = append(out, part)
				break
			}
			if i > 0 {
				out = append(out, part[:i])
			}
			j := strings.IndexByte(part, ']')
			if j < i {
				out = append(out, part[i:])
				break
			}
			out = append(out, part[i:j+1])
			part = part[j+1:]
		}
	}
	return out
}

// joinField joins path elements into a field name ("programs.x.home[2].path").
func joinField(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// nodeAt returns the value node at path (mapping keys, and "[i]" for list elements) beneath
// n, or nil.
func nodeAt(n ast.Node, path []string) ast.Node {
	for _, p := range path {
		if n == nil {
			return nil
		}
		if strings.HasPrefix(p, "[") {
			i, err := strconv.Atoi(strings.Trim(p, "[]"))
			sn, ok := n.(*ast.SequenceNode)
			if err != nil || !ok || i < 0 || i >= len(sn.Values) {
				return nil
			}
			n = sn.Values[i]
			continue
		}
		var entries []*ast.MappingValueNode
		switch m := n.(type) {
		case *ast.MappingNode:
			entries = m.Values
		case *ast.MappingValueNode:
			entries = []*ast.MappingValueNode{m}
		default:
			return nil
		}
		var next ast.Node
		for _, e := range entries {
			var kn ast.Node = e.Key
			if mk, ok := kn.(*ast.MappingKeyNode); ok {
				kn = mk.Value
			}
			if k, ok := scalarString(kn); ok && k == p {
				next = e.Value
				if isEmpty(next) {
					next = kn
				}
				break
			}
		}
		n = next
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// policyOnlyPrefix are the keys only the system policy may set: Claude Code honours them only
// from admin-writable sources, so a user file setting them would promise a lock that is not
// there.
const policyOnlyPrefix = "managed."

// containmentPrefix are wrap mode's keys: which programs are managed is the administrator's
// decision, never the user's.
const containmentPrefix = "containment."

// refusePolicyOnly refuses a user file that sets a policy-only key.
func refusePolicyOnly(l *layer) error {
	for _, k := range Keys() {
		line, ok := l.set[k]
		if !ok {
			continue
		}
		if strings.HasPrefix(k, policyOnlyPrefix) {
			return &InvalidError{File: l.file, Line: line, Field: k,
				Msg: "only the system policy (" + DefaultPolicyFile + ") may set managed locks; a user file cannot lock anything"}
		}
		if strings.HasPrefix(k, containmentPrefix) {
			return &InvalidError{File: l.file, Line: line, Field: k,
				Msg: "only the system policy (" + DefaultPolicyFile + ") may set wrap mode (containment); see docs/deploy.md"}
		}
	}
	return nil
}
