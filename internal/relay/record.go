package relay

import (
	"context"
	"time"
)

// Outcome classifies how a request ended.
type Outcome string

const (
	OutcomeOK       Outcome = "ok"
	OutcomeError    Outcome = "error"    // refused, failed upstream, or answered >= 400
	OutcomeCanceled Outcome = "canceled" // the client went away or the session was revoked
)

// Usage is the token usage a response reported. Zero fields were not reported.
type Usage struct {
	InputTokens              int64 `json:"inputTokens,omitempty"`
	OutputTokens             int64 `json:"outputTokens,omitempty"`
	CacheCreationInputTokens int64 `json:"cacheCreationInputTokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cacheReadInputTokens,omitempty"`
}

// Record is the access record of one relay request: one log line and one audit record each.
type Record struct {
	Time      time.Time     `json:"time"`               // when the request arrived
	LaunchID  string        `json:"launchId,omitempty"` // of the session; empty for manual sessions
	SessionID string        `json:"sessionId,omitempty"`
	ClientID  string        `json:"clientId,omitempty"`
	Broker    string        `json:"broker,omitempty"`   // "sandbox" or "git"
	Provider  string        `json:"provider,omitempty"` // sandbox: "anthropic" or "openai"
	Method    string        `json:"method"`
	Path      string        `json:"path"`   // without the query
	Status    int           `json:"status"` // 0 when nothing was answered (client gone)
	BytesIn   int64         `json:"bytesIn"`
	BytesOut  int64         `json:"bytesOut"`
	Duration  time.Duration `json:"duration"`
	Outcome   Outcome       `json:"outcome"`
	Code      string        `json:"code,omitempty"` // the error code the relay answered with
	Usage     Usage         `json:"usage"`
}

type recordKey struct{}

// RecordFrom returns the Record of the request being served, for a broker to fill in
// (Provider, Usage, Code, Outcome), or nil outside a Handler. A broker writes it only from the
// goroutine serving the request.
func RecordFrom(ctx context.Context) *Record {
	rec, _ := ctx.Value(recordKey{}).(*Record)
	return rec
}
