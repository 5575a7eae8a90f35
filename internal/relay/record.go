package relay

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/internal/recordlimit"
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
	// Count is 0 for the record of one request. A summary of the records a rate limit held
	// back (internal/recordlimit) has the number of them, with their bytes and usage summed,
	// the last one's status, and Time the first one's.
	Count int64 `json:"count,omitempty"`
	// Paths counts a summary's requests by path (in recordlimit.TallyNames counters), so
	// that it still says what they asked for; empty in the record of one request. Its JSON is
	// the sketch's whole state, for the journal of held records; the audit row shows its top.
	Paths recordlimit.Tally `json:"paths,omitzero"`
}

// ReasonRateLimited marks a summary Record (Count set) in the access line and the audit row.
const ReasonRateLimited = "rate_limited"

// Merge adds rec to sum, the summary of the records of one broker, outcome and code held back
// by a rate limit (internal/recordlimit).
func Merge(sum, rec *Record) {
	if sum.Count == 0 {
		*sum = Record{Time: rec.Time, LaunchID: rec.LaunchID, ClientID: rec.ClientID, Broker: rec.Broker,
			Provider: rec.Provider, Method: "-", Outcome: rec.Outcome, Code: rec.Code}
	}
	sum.Count++
	sum.Paths.Add(rec.Path)
	sum.Status = rec.Status
	sum.BytesIn += rec.BytesIn
	sum.BytesOut += rec.BytesOut
	sum.Duration = rec.Time.Add(rec.Duration).Sub(sum.Time)
	sum.Usage.InputTokens += rec.Usage.InputTokens
	sum.Usage.OutputTokens += rec.Usage.OutputTokens
	sum.Usage.CacheCreationInputTokens += rec.Usage.CacheCreationInputTokens
	sum.Usage.CacheReadInputTokens += rec.Usage.CacheReadInputTokens
}

// LimitKey is the key of rec's summary in a rate limit: its broker, provider, outcome and code.
func LimitKey(rec *Record) string {
	return rec.Broker + " " + rec.Provider + " " + string(rec.Outcome) + " " + rec.Code
}

type recordKey struct{}

// RecordFrom returns the Record of the request being served, for a broker to fill in
// (Provider, Usage, Code, Outcome), or nil outside a Handler. A broker writes it only from the
// goroutine serving the request.
func RecordFrom(ctx context.Context) *Record {
	rec, _ := ctx.Value(recordKey{}).(*Record)
	return rec
}
