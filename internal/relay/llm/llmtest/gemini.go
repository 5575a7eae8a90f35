package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Gemini API error statuses (google.rpc.Code names) the fake answers with.
const (
	geminiInvalidArgument   = "INVALID_ARGUMENT"
	geminiUnauthenticated   = "UNAUTHENTICATED"
	geminiPermissionDenied  = "PERMISSION_DENIED"
	geminiNotFound          = "NOT_FOUND"
	geminiResourceExhausted = "RESOURCE_EXHAUSTED"
	geminiInternal          = "INTERNAL"
	geminiUnavailable       = "UNAVAILABLE"
)

// geminiStatus is the google.rpc status name of an HTTP status, for errors scripted without an
// ErrorType.
func geminiStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return geminiInvalidArgument
	case http.StatusUnauthorized:
		return geminiUnauthenticated
	case http.StatusForbidden:
		return geminiPermissionDenied
	case http.StatusNotFound:
		return geminiNotFound
	case http.StatusTooManyRequests:
		return geminiResourceExhausted
	case http.StatusServiceUnavailable:
		return geminiUnavailable
	}
	return geminiInternal
}

// geminiErr is a Gemini API error: a google.rpc.Status.
type geminiErr struct {
	code    int    // the HTTP status
	status  string // the google.rpc.Code name
	msg     string
	details []any
}

// geminiAuthError is what the Gemini API answers a request without the expected credential:
// 403 PERMISSION_DENIED when there is none, 400 INVALID_ARGUMENT with reason API_KEY_INVALID
// for a wrong API key (x-goog-api-key), 401 UNAUTHENTICATED for a wrong bearer token.
func (s *Server) geminiAuthError(h http.Header) geminiErr {
	name, prefix, _ := strings.Cut(s.credentialSpec(), ":")
	if len(h.Values(strings.TrimSpace(name))) == 0 {
		return geminiErr{code: http.StatusForbidden, status: geminiPermissionDenied,
			msg: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}
	}
	if strings.TrimSpace(prefix) != "" {
		return geminiErr{code: http.StatusUnauthorized, status: geminiUnauthenticated,
			msg: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."}
	}
	const msg = "API key not valid. Please pass a valid API key."
	return geminiErr{code: http.StatusBadRequest, status: geminiInvalidArgument, msg: msg, details: []any{
		map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
			"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}},
		map[string]any{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": msg},
	}}
}

// body is the JSON of a Gemini API error: {"error":{"code","message","status"[,"details"]}}.
func (e geminiErr) body() []byte {
	b := map[string]any{"code": e.code, "message": e.msg, "status": e.status}
	if e.details != nil {
		b["details"] = e.details
	}
	return mustJSON(map[string]any{"error": b})
}

func writeGeminiError(w http.ResponseWriter, e geminiErr) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(e.code)
	w.Write(e.body())
}

// geminiRequest is what the fake reads of a GenerateContentRequest.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"contents"`
	GenerationConfig *struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

// jsonSchema returns the schema of a request for a JSON answer, or nil.
func (g *geminiRequest) jsonSchema() json.RawMessage {
	c := g.GenerationConfig
	switch {
	case c == nil || c.ResponseMimeType != "application/json":
		return nil
	case len(c.ResponseJSONSchema) > 0:
		return c.ResponseJSONSchema
	case len(c.ResponseSchema) > 0:
		return c.ResponseSchema
	}
	return json.RawMessage(`{}`)
}

// geminiModelPath splits /v1beta/models/{model}:{method} (or /v1/…).
func geminiModelPath(p string) (model, method string, ok bool) {
	for _, v := range []string{"/v1beta/models/", "/v1/models/"} {
		if rest, found := strings.CutPrefix(p, v); found {
			model, method, ok = strings.Cut(rest, ":")
			return model, method, ok && model != "" && !strings.Contains(model, "/")
		}
	}
	return "", "", false
}

// serveGemini answers the Gemini API (the Generative Language API, what the Google GenAI SDK
// and Gemini CLI speak with an API key): POST /v1beta/models/{model}:generateContent (a
// GenerateContentResponse), :streamGenerateContent?alt=sse (data-only server-sent events, one
// GenerateContentResponse chunk each, separated by "\r\n\r\n" as the real API does, the last
// carrying finishReason STOP; usageMetadata in every chunk, cumulative), :countTokens, GET
// /v1beta/models[/{model}]. A request that asks for JSON (generationConfig.responseMimeType
// application/json, with responseJsonSchema or responseSchema) without a scripted Text gets a
// JSON value that fits the schema: the first enum value of each string enum, Reply text for
// other strings (Gemini CLI's next-speaker check gets {"next_speaker":"user",…}).
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request, req Request, rp Reply) {
	w.Header().Set("x-goog-request-id", "req_fake")
	if r.Method == http.MethodGet && (r.URL.Path == "/v1beta/models" || r.URL.Path == "/v1/models") {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(mustJSON(map[string]any{"models": []any{geminiModel("gemini-fake-1")}}))
		return
	}
	model, method, ok := geminiModelPath(r.URL.Path)
	switch {
	case ok && r.Method == http.MethodGet && method == "" && !strings.Contains(r.URL.Path, ":"):
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(mustJSON(geminiModel(model)))
		return
	case ok && r.Method == http.MethodPost && (method == "generateContent" || method == "streamGenerateContent" || method == "countTokens"):
	default:
		writeGeminiError(w, geminiErr{code: http.StatusNotFound, status: geminiNotFound,
			msg: fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path)})
		return
	}
	var gr geminiRequest
	if err := json.Unmarshal(req.Body, &gr); err != nil {
		writeGeminiError(w, geminiErr{code: http.StatusBadRequest, status: geminiInvalidArgument,
			msg: "Invalid JSON payload received. " + err.Error()})
		return
	}
	in, _ := rp.usage(req.Body, nil)
	if method == "countTokens" {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(mustJSON(map[string]any{"totalTokens": in,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": in}}}))
		return
	}
	if len(gr.Contents) == 0 {
		writeGeminiError(w, geminiErr{code: http.StatusBadRequest, status: geminiInvalidArgument,
			msg: "* GenerateContentRequest.contents: contents is not specified\n"})
		return
	}
	if rp.Status != 0 && rp.Status != http.StatusOK {
		typ := rp.ErrorType
		if typ == "" {
			typ = geminiStatus(rp.Status)
		}
		writeGeminiError(w, geminiErr{code: rp.Status, status: typ, msg: rp.Message})
		return
	}
	if schema := gr.jsonSchema(); schema != nil && rp.Text == "" {
		rp.Text = string(mustJSON(fillSchema(schema, "Hello from the fake upstream.", 0)))
		rp.Repeat = 1
	}
	deltas := rp.deltas()
	in, out := rp.usage(req.Body, deltas)
	usage := func(n int64) map[string]any {
		return map[string]any{"promptTokenCount": in, "candidatesTokenCount": n, "totalTokenCount": in + n,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": in}}}
	}
	chunk := func(text string, finish bool, n int64) map[string]any {
		parts := []any{map[string]any{"text": text}}
		if finish && rp.ToolUse != nil { // the call after the text, in the last chunk
			parts = append(parts, map[string]any{"functionCall": map[string]any{"id": rp.ToolUse.ID, "name": rp.ToolUse.Name, "args": rp.ToolUse.Input}})
		}
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish {
			cand["finishReason"] = "STOP"
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage(n), "modelVersion": model, "responseId": "resp_fake"}
	}
	if method == "generateContent" {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(mustJSON(chunk(rp.fullText(deltas), true, out)))
		return
	}
	if r.URL.Query().Get("alt") != "sse" {
		// Without alt=sse the API streams one JSON array; no client here asks for it.
		writeGeminiError(w, geminiErr{code: http.StatusBadRequest, status: geminiInvalidArgument,
			msg: "the fake Gemini API streams server-sent events only: add ?alt=sse"})
		return
	}
	e := s.startStream(w, r)
	e.sep = "\r\n\r\n"
	total := len(deltas) * rp.repeat()
	i := 0
	for range rp.repeat() {
		for _, d := range deltas {
			i++
			// Output tokens so far, proportionally: the last chunk carries the whole count.
			n := out * int64(i) / int64(total)
			if e.event("", mustJSON(chunk(d, i == total, n)), "chunk") != nil {
				return
			}
			if rp.StreamError != "" {
				e.event("", (geminiErr{code: http.StatusInternalServerError, status: rp.StreamError,
					msg: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"}).body(), "error")
				return
			}
		}
	}
}

func geminiModel(name string) map[string]any {
	return map[string]any{"name": "models/" + name, "version": "001", "displayName": name,
		"inputTokenLimit": 1048576, "outputTokenLimit": 65536,
		"supportedGenerationMethods": []any{"generateContent", "countTokens"}}
}

// fillSchema returns a value that fits a JSON schema (the subset of JSON Schema and of the
// OpenAPI schema Gemini accepts): an object with its required properties (all of them if none
// is marked required), the first enum value, text for strings, the minimum (else 1) for
// numbers, an empty array.
func fillSchema(raw json.RawMessage, text string, depth int) any {
	var sc struct {
		Type       any                        `json:"type"`
		Enum       []any                      `json:"enum"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		AnyOf      []json.RawMessage          `json:"anyOf"`
		Minimum    *float64                   `json:"minimum"`
	}
	if depth > 8 || json.Unmarshal(raw, &sc) != nil {
		return nil
	}
	if len(sc.Enum) > 0 {
		return sc.Enum[0]
	}
	if len(sc.AnyOf) > 0 {
		return fillSchema(sc.AnyOf[0], text, depth+1)
	}
	typ, _ := sc.Type.(string)
	if types, ok := sc.Type.([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return text
	case "number", "integer":
		if sc.Minimum != nil {
			return *sc.Minimum
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	obj := map[string]any{}
	names := sc.Required
	if len(names) == 0 {
		for k := range sc.Properties {
			names = append(names, k)
		}
	}
	for _, k := range names {
		if p, ok := sc.Properties[k]; ok {
			obj[k] = fillSchema(p, text, depth+1)
		} else {
			obj[k] = text
		}
	}
	return obj
}
