package relay

import (
	"encoding/json"
	"net/http"
)

// errorBody is the JSON of every error the relay answers itself. It reads as an error to the
// Anthropic SDKs (type, error.type, error.message) and to the OpenAI ones (error.code,
// error.message) as well as to agentbox's own client (error.code).
type errorBody struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorJSON returns the JSON body of an error answer with the given code and message.
func ErrorJSON(code, message string) []byte {
	b, err := json.Marshal(errorBody{Type: "error", Error: errorDetail{Type: code, Code: code, Message: message}})
	if err != nil {
		panic(err) // strings always marshal
	}
	return b
}

// WriteError answers an error with status and a JSON body {"error":{"code":code,...}}, and
// notes the code in the request's Record.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if rec := RecordFrom(r.Context()); rec != nil {
		rec.Code = code
	}
	b := ErrorJSON(code, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b) // the client may be gone; nothing to do about it
}
