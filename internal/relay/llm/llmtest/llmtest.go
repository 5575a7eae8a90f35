// Package llmtest provides fake LLM API upstreams for tests and benchmarks: an Anthropic
// Messages API, an OpenAI API (chat completions and Responses) and a Gemini API
// (generateContent, streamGenerateContent), each speaking the real wire format (JSON bodies, server-sent events with the real event names, error bodies, status
// codes and headers), with hooks to pace streams event by event and to hold a reply back.
package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Request is one request as the fake upstream received it.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
}

// Reply scripts one answer. The zero Reply is a short successful answer.
type Reply struct {
	// Status, when neither 0 nor 200, answers an error with that status in the provider's
	// error format, with ErrorType and Message.
	Status    int
	ErrorType string
	Message   string
	// Text is the assistant's text. Zero means "Hello from the fake upstream."
	Text string
	// Chunk is the size in bytes of each streamed text delta. Zero means 8.
	Chunk int
	// Repeat streams the deltas of Text this many times (a long answer without a long Text).
	// Zero means once.
	Repeat int
	// StreamError, when set, ends a stream after its first delta with an error event of this
	// type (Anthropic "overloaded_error", say) instead of finishing it.
	StreamError string
	// InputTokens and OutputTokens are the usage reported. Zero means derived from the sizes
	// of the request and the answer.
	InputTokens  int64
	OutputTokens int64
	// ToolUse, when set, ends the answer with a call of that tool, as a model asks the client
	// to run one: for Anthropic a tool_use block after the text (stop_reason "tool_use"), for
	// the Responses API a function_call item after the message (Input its arguments).
	ToolUse *ToolUse
}

// A ToolUse is a model's call of a tool the request offered: its id, the tool's name and the
// arguments (marshalled to JSON).
type ToolUse struct {
	ID    string
	Name  string
	Input any
}

// Options configures a fake upstream. Its zero value accepts every request and answers the
// zero Reply.
type Options struct {
	// Credential, when set, is the only credential accepted (x-api-key for Anthropic,
	// Authorization: Bearer for OpenAI, x-goog-api-key for Gemini, or CredentialHeader); others
	// get the provider's answer to a wrong key (401; Gemini: 403 without a key, 400
	// API_KEY_INVALID for a wrong x-goog-api-key, 401 for a wrong bearer token).
	Credential string
	// CredentialHeader overrides where Credential is expected: a header name, or a name and
	// a value prefix ("Authorization: Bearer").
	CredentialHeader string
	// Respond chooses the reply to a request. Nil answers the zero Reply.
	Respond func(Request) Reply
	// BeforeReply, when set, is called before anything of the answer is written; an error
	// ends the request without an answer. Tests block here to hold a reply back.
	BeforeReply func(ctx context.Context, r Request) error
	// Pace, when set, is called before each streamed event is written, with the event's
	// index in the stream and its name (Anthropic's and the Responses API's event names;
	// "chunk", "usage" and "done" for OpenAI chat completions; "chunk" for Gemini). An error ends the stream abruptly. ctx is the request's context: it is
	// cancelled when the client (the relay) goes away.
	Pace func(ctx context.Context, index int, event string) error
}

// Server is a running fake upstream. Close it when done.
type Server struct {
	*httptest.Server
	provider string
	opts     Options

	mu   sync.Mutex
	reqs []Request
}

// NewAnthropic starts a fake Anthropic Messages API: POST /v1/messages (JSON or, with
// "stream": true, server-sent events), POST /v1/messages/count_tokens, and the API's 404.
func NewAnthropic(opts Options) *Server { return start("anthropic", opts) }

// NewOpenAI starts a fake OpenAI API: POST /v1/chat/completions (JSON or, with
// "stream": true, data-only server-sent events ending in "data: [DONE]"; usage when
// stream_options.include_usage is true), POST /v1/responses (the Responses API: a response
// object or typed events from response.created to response.completed, usage in the last),
// GET /v1/models, and the API's 404.
func NewOpenAI(opts Options) *Server { return start("openai", opts) }

// NewGemini starts a fake Gemini API (the Generative Language API as the Google GenAI SDK and
// Gemini CLI call it with an API key in x-goog-api-key): POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse, :countTokens, GET
// /v1beta/models, and Google's error format {"error":{"code","message","status"}}. See
// serveGemini.
func NewGemini(opts Options) *Server { return start("gemini", opts) }

func start(provider string, opts Options) *Server {
	s := &Server{provider: provider, opts: opts}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()

	if s.opts.BeforeReply != nil {
		if err := s.opts.BeforeReply(r.Context(), req); err != nil {
			return
		}
	}
	if !s.authorized(r.Header) {
		if s.provider == "gemini" {
			writeGeminiError(w, s.geminiAuthError(r.Header))
			return
		}
		s.writeError(w, http.StatusUnauthorized, s.authError())
		return
	}
	reply := Reply{}
	if s.opts.Respond != nil {
		reply = s.opts.Respond(req)
	}
	switch s.provider {
	case "anthropic":
		s.serveAnthropic(w, r, req, reply)
	case "gemini":
		s.serveGemini(w, r, req, reply)
	default:
		s.serveOpenAI(w, r, req, reply)
	}
}

func (s *Server) authorized(h http.Header) bool {
	if s.opts.Credential == "" {
		return true
	}
	name, prefix, _ := strings.Cut(s.credentialSpec(), ":")
	if prefix = strings.TrimSpace(prefix); prefix != "" {
		prefix += " "
	}
	vals := h.Values(strings.TrimSpace(name))
	return len(vals) == 1 && vals[0] == prefix+s.opts.Credential
}

// credentialSpec is where the credential is expected: a header name, or a name and a value
// prefix.
func (s *Server) credentialSpec() string {
	if s.opts.CredentialHeader != "" {
		return s.opts.CredentialHeader
	}
	return map[string]string{"anthropic": "x-api-key", "openai": "Authorization: Bearer", "gemini": "x-goog-api-key"}[s.provider]
}

type apiError struct {
	status   int
	typ, msg string
}

func (s *Server) authError() apiError {
	if s.provider == "anthropic" {
		return apiError{401, "authentication_error", "invalid x-api-key"}
	}
	return apiError{401, "invalid_api_key", "Incorrect API key provided: sk-fake***. You can find your API key at https://platform.openai.com/account/api-keys."}
}

// writeError answers in the provider's error format.
func (s *Server) writeError(w http.ResponseWriter, status int, e apiError) {
	var v any
	if s.provider == "anthropic" {
		w.Header().Set("request-id", "req_fake")
		w.Header().Set("x-should-retry", "false")
		v = map[string]any{"type": "error", "error": map[string]any{"type": e.typ, "message": e.msg}}
	} else {
		w.Header().Set("x-request-id", "req_fake")
		v = map[string]any{"error": map[string]any{"message": e.msg, "type": "invalid_request_error", "param": nil, "code": e.typ}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// deltas splits the reply's text into its streamed pieces.
func (rp Reply) deltas() []string {
	text := rp.Text
	if text == "" {
		text = "Hello from the fake upstream."
	}
	n := rp.Chunk
	if n <= 0 {
		n = 8
	}
	var out []string
	for len(text) > n {
		out = append(out, text[:n])
		text = text[n:]
	}
	return append(out, text)
}

func (rp Reply) repeat() int { return max(rp.Repeat, 1) }

func (rp Reply) usage(reqBody []byte, deltas []string) (in, out int64) {
	in, out = rp.InputTokens, rp.OutputTokens
	if in == 0 {
		in = max(int64(len(reqBody)/4), 1)
	}
	if out == 0 {
		out = int64(len(deltas) * rp.repeat())
	}
	return in, out
}

func (rp Reply) fullText(deltas []string) string {
	return strings.Repeat(strings.Join(deltas, ""), rp.repeat())
}

type streamRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// sse writes events one at a time, each flushed, calling Pace before each.
type sse struct {
	ctx   context.Context
	w     http.ResponseWriter
	rc    *http.ResponseController
	pace  func(context.Context, int, string) error
	index int
	buf   bytes.Buffer
	sep   string // what ends an event; "" means "\n\n"
}

// event writes one event; name "" writes a data-only event (OpenAI).
func (e *sse) event(name string, data []byte, label string) error {
	if e.pace != nil {
		if err := e.pace(e.ctx, e.index, label); err != nil {
			return err
		}
	}
	e.index++
	e.buf.Reset()
	if name != "" {
		e.buf.WriteString("event: ")
		e.buf.WriteString(name)
		e.buf.WriteByte('\n')
	}
	e.buf.WriteString("data: ")
	e.buf.Write(data)
	if e.sep != "" {
		e.buf.WriteString(e.sep)
	} else {
		e.buf.WriteString("\n\n")
	}
	if _, err := e.w.Write(e.buf.Bytes()); err != nil {
		return err
	}
	return e.rc.Flush()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (s *Server) startStream(w http.ResponseWriter, r *http.Request) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	return &sse{ctx: r.Context(), w: w, rc: rc, pace: s.opts.Pace}
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, req Request, rp Reply) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		in, _ := rp.usage(req.Body, nil)
		w.Write(mustJSON(map[string]any{"input_tokens": in}))
		return
	default:
		s.writeError(w, http.StatusNotFound, apiError{404, "not_found_error", "Not found"})
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.writeError(w, http.StatusBadRequest, apiError{400, "invalid_request_error", "anthropic-version: header is required"})
		return
	}
	var sr streamRequest
	if err := json.Unmarshal(req.Body, &sr); err != nil {
		s.writeError(w, http.StatusBadRequest, apiError{400, "invalid_request_error", "The request body is not valid JSON: " + err.Error()})
		return
	}
	if rp.Status != 0 && rp.Status != http.StatusOK {
		s.writeError(w, rp.Status, apiError{rp.Status, rp.ErrorType, rp.Message})
		return
	}
	if sr.Model == "" {
		sr.Model = "claude-fake-1"
	}
	w.Header().Set("request-id", "req_fake")
	deltas := rp.deltas()
	in, out := rp.usage(req.Body, deltas)
	stop := "end_turn"
	if rp.ToolUse != nil {
		stop = "tool_use"
	}
	if !sr.Stream {
		content := []any{map[string]any{"type": "text", "text": rp.fullText(deltas)}}
		if u := rp.ToolUse; u != nil {
			content = append(content, map[string]any{"type": "tool_use", "id": u.ID, "name": u.Name, "input": u.Input})
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustJSON(map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": sr.Model,
			"content":     content,
			"stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": in, "output_tokens": out,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		}))
		return
	}
	e := s.startStream(w, r)
	ev := func(name string, v any) error { return e.event(name, mustJSON(v), name) }
	if ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": sr.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "cache_creation_input_tokens": 0,
			"cache_read_input_tokens": 0, "output_tokens": 1},
	}}) != nil {
		return
	}
	if ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}}) != nil {
		return
	}
	if ev("ping", map[string]any{"type": "ping"}) != nil {
		return
	}
	// The deltas' bytes are encoded once and reused, so that long streams cost the fake little.
	encoded := make([][]byte, len(deltas))
	for i, d := range deltas {
		encoded[i] = mustJSON(map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": d}})
	}
	for range rp.repeat() {
		for _, b := range encoded {
			if e.event("content_block_delta", b, "content_block_delta") != nil {
				return
			}
			if rp.StreamError != "" {
				ev("error", map[string]any{"type": "error", "error": map[string]any{"type": rp.StreamError, "message": "Overloaded"}})
				return
			}
		}
	}
	if ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) != nil {
		return
	}
	if u := rp.ToolUse; u != nil {
		if ev("content_block_start", map[string]any{"type": "content_block_start", "index": 1,
			"content_block": map[string]any{"type": "tool_use", "id": u.ID, "name": u.Name, "input": map[string]any{}}}) != nil {
			return
		}
		if ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(mustJSON(u.Input))}}) != nil {
			return
		}
		if ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1}) != nil {
			return
		}
	}
	if ev("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}}) != nil {
		return
	}
	ev("message_stop", map[string]any{"type": "message_stop"})
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, req Request, rp Reply) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		s.serveResponses(w, r, req, rp)
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustJSON(map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "gpt-fake-1", "object": "model", "created": 1700000000, "owned_by": "fake"}}}))
		return
	default:
		s.writeError(w, http.StatusNotFound, apiError{404, "unknown_url", fmt.Sprintf("Unknown request URL: %s %s. Please check the URL for typos.", r.Method, r.URL.Path)})
		return
	}
	var sr streamRequest
	if err := json.Unmarshal(req.Body, &sr); err != nil {
		s.writeError(w, http.StatusBadRequest, apiError{400, "invalid_json", "We could not parse the JSON body of your request."})
		return
	}
	if rp.Status != 0 && rp.Status != http.StatusOK {
		s.writeError(w, rp.Status, apiError{rp.Status, rp.ErrorType, rp.Message})
		return
	}
	if sr.Model == "" {
		sr.Model = "gpt-fake-1"
	}
	w.Header().Set("x-request-id", "req_fake")
	deltas := rp.deltas()
	in, out := rp.usage(req.Body, deltas)
	usage := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	base := func(choices []any) map[string]any {
		return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk",
			"created": 1700000000, "model": sr.Model, "system_fingerprint": "fp_fake", "choices": choices}
	}
	if !sr.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustJSON(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion",
			"created": 1700000000, "model": sr.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": rp.fullText(deltas)}}},
			"usage": usage}))
		return
	}
	e := s.startStream(w, r)
	if e.event("", mustJSON(base([]any{map[string]any{"index": 0,
		"delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}})), "chunk") != nil {
		return
	}
	encoded := make([][]byte, len(deltas))
	for i, d := range deltas {
		encoded[i] = mustJSON(base([]any{map[string]any{"index": 0,
			"delta": map[string]any{"content": d}, "finish_reason": nil}}))
	}
	for range rp.repeat() {
		for _, b := range encoded {
			if e.event("", b, "chunk") != nil {
				return
			}
			if rp.StreamError != "" {
				e.event("", mustJSON(map[string]any{"error": map[string]any{"message": "The server had an error while processing your request.", "type": rp.StreamError}}), "error")
				return
			}
		}
	}
	if e.event("", mustJSON(base([]any{map[string]any{"index": 0, "delta": map[string]any{},
		"finish_reason": "stop"}})), "chunk") != nil {
		return
	}
	if sr.StreamOptions != nil && sr.StreamOptions.IncludeUsage {
		m := base([]any{})
		m["usage"] = usage
		if e.event("", mustJSON(m), "usage") != nil {
			return
		}
	}
	e.event("", []byte("[DONE]"), "done")
}
