package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Server-side tools are those a provider runs itself when a model call declares them in its
// body: Anthropic's web_fetch, web_search and code_execution tools and its MCP connector
// (mcp_servers), OpenAI's web_search, mcp (server_url), code_interpreter and file_search,
// Gemini's urlContext and googleSearch. With them the provider fetches any URL or calls any
// MCP server for the box, reaching hosts egressAllow does not list and carrying what the box
// put in the prompt there (review 15, F12). The relay reads each request body and refuses one
// that declares a server-side tool the user has not allowed (gateway.<provider>.serverTools)
// with 403 gateway_tool_refused.
//
// The check fails closed: a tool is client-side (the program runs it, inside the box) only when
// its shape says so — Anthropic's custom tools and its client tools (bash, text_editor,
// computer, memory), OpenAI's function, custom, shell, apply_patch and computer tools, Gemini's
// functionDeclarations and computerUse — and every other tool is a server-side one, named for
// serverTools by its type without the version date.

// DefaultServerTools are the server-side tools the relay forwards for each provider without
// gateway.<provider>.serverTools: those that reach nothing beyond the provider, which the
// profiles' programs may declare in ordinary requests. Anthropic's tool search looks through
// the request's own tools and its advisor asks another of its models (Claude Code 2.1.334
// knows both); OpenAI's tool_search is the same, image_generation draws, and web_search with
// "external_web_access": false answers from the provider's index without fetching anything
// live (Codex 0.171.0's web_search_mode "cached"; live, it is web_search).
var DefaultServerTools = map[string][]string{
	Anthropic: {"tool_search_tool_regex", "tool_search_tool_bm25", "advisor"},
	OpenAI:    {"tool_search", "image_generation", "web_search_cached"},
	Gemini:    nil,
}

// toolName matches what ParseServerTool accepts: a name as the providers spell their tool
// types, without the version date.
var toolName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// ParseServerTool checks an entry of gateway.<provider>.serverTools: a tool's name as the
// provider spells its type, without the version date ("web_search", "web_fetch", "mcp",
// "code_execution"; Gemini's "googleSearch", "urlContext").
func ParseServerTool(s string) error {
	if !toolName.MatchString(s) {
		return fmt.Errorf("%q is not a tool name: want the tool's type without its version date, e.g. \"web_search\" (letters, digits and _)", s)
	}
	return nil
}

// versionDate is the date a provider versions a tool type with: web_search_20250305,
// web_search_preview_2025_03_11.
var versionDate = regexp.MustCompile(`_(\d{8}|\d{4}_\d{2}_\d{2})$`)

// errBody is a body the check cannot read as a JSON object.
var errBody = errors.New("the request body is not a JSON object")

// serverTools returns the server-side tools a model call's body declares, each named as
// gateway.<provider>.serverTools names it, in the order they appear. A body that is not a JSON
// object, or that holds a key twice in an object the check reads (a gateway could take the
// other one), is an error.
func serverTools(provider string, body []byte) ([]string, error) {
	top, err := fields(body)
	if err != nil {
		return nil, err
	}
	out, err := serverToolsIn(provider, top["tools"])
	if err != nil {
		return nil, err
	}
	switch provider {
	case Anthropic:
		if v := top["mcp_servers"]; present(v) && string(bytes.TrimSpace(v)) != "[]" {
			out = append(out, "mcp")
		}
	case OpenAI:
		// Chat Completions' search models search the web when the request asks for it.
		if present(top["web_search_options"]) {
			out = append(out, "web_search")
		}
	}
	return out, nil
}

// serverToolsIn returns the server-side tools a tools array declares; absent or null is none.
func serverToolsIn(provider string, raw json.RawMessage) ([]string, error) {
	if !present(raw) {
		return nil, nil
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, errors.New("tools: not an array")
	}
	var out []string
	for i, t := range tools {
		names, err := serverToolsOf(provider, t)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// serverToolsOf returns the server-side tools one tool object declares.
func serverToolsOf(provider string, raw json.RawMessage) ([]string, error) {
	t, err := fields(raw)
	if err != nil {
		return nil, err
	}
	switch provider {
	case Gemini:
		// A Tool holds one or more kinds, each a key; the API reads both spellings.
		var out []string
		for k, v := range t {
			name := camel(k)
			if name == "functionDeclarations" || name == "computerUse" || !present(v) {
				continue
			}
			out = append(out, name)
		}
		slices.Sort(out)
		return out, nil
	case Anthropic:
		typ, err := stringField(t, "type")
		if err != nil {
			return nil, err
		}
		name := versionDate.ReplaceAllString(typ, "")
		switch name {
		case "", "custom", "bash", "text_editor", "computer", "memory":
			return nil, nil
		case "mcp_toolset":
			return []string{"mcp"}, nil
		}
		return []string{name}, nil
	case OpenAI:
		typ, err := stringField(t, "type")
		if err != nil {
			return nil, err
		}
		name := versionDate.ReplaceAllString(typ, "")
		switch name {
		case "function", "custom", "local_shell", "shell", "apply_patch", "computer", "computer_use_preview":
			return nil, nil
		case "namespace":
			// A group of the program's own tools (Codex): what it groups is checked the same way.
			return serverToolsIn(provider, t["tools"])
		case "web_search":
			if v, ok := t["external_web_access"]; ok && bytes.Equal(bytes.TrimSpace(v), []byte("false")) {
				return []string{"web_search_cached"}, nil
			}
		}
		return []string{name}, nil
	}
	return nil, nil
}

// fields reads a JSON object's members, refusing a key given twice.
func fields(raw []byte) (map[string]json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, errBody
	}
	out := map[string]json.RawMessage{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, errBody
		}
		k := tok.(string) // an object's keys are strings
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, errBody
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("the key %q is given twice", k)
		}
		out[k] = v
	}
	if _, err := d.Token(); err != nil {
		return nil, errBody
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errBody // something after the object
	}
	return out, nil
}

// stringField reads t[key], a string; absent or null is "".
func stringField(t map[string]json.RawMessage, key string) (string, error) {
	v := t[key]
	if !present(v) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", key)
	}
	return s, nil
}

// present reports whether a member is there and not null ({} is there: Gemini's
// "googleSearch": {} and OpenAI's "web_search_options": {} turn search on).
func present(v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	return s != "" && s != "null"
}

// camel spells a snake_case key as camelCase (url_context: urlContext).
func camel(k string) string {
	parts := strings.Split(k, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
