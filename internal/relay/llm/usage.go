package llm

import (
	"bytes"
	"encoding/json"

	"github.com/agentbox/agentbox/internal/relay"
)

// Limits of what the usage parser looks at. Bigger lines and bodies are passed on untouched
// and simply not parsed.
const (
	maxSSELine  = 1 << 20
	maxJSONBody = 8 << 20
)

// usageJSON holds the usage fields of both APIs: Anthropic (input_tokens, output_tokens,
// cache_*_input_tokens) and OpenAI (prompt_tokens, completion_tokens; the Responses API uses
// the Anthropic names).
type usageJSON struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
}

// usageCarrier is the shape of every message that may carry usage: an Anthropic message or
// message_delta event ("usage"), a message_start event ("message.usage"), an OpenAI chat
// completion or chunk ("usage"), a Responses API event ("response.usage"), a Gemini
// GenerateContentResponse or stream chunk ("usageMetadata").
type usageCarrier struct {
	Usage         *usageJSON       `json:"usage"`
	Message       *usageHolder     `json:"message"`
	Response      *usageHolder     `json:"response"`
	UsageMetadata *geminiUsageJSON `json:"usageMetadata"`
}

// geminiUsageJSON is the Gemini API's usageMetadata. promptTokenCount includes the cached
// tokens; thinking tokens (thoughtsTokenCount) are output tokens too, as OpenAI's reasoning
// tokens are in its output_tokens.
type geminiUsageJSON struct {
	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
}

func (g *geminiUsageJSON) merge(u *relay.Usage) {
	set(&u.InputTokens, g.PromptTokenCount)
	if g.CandidatesTokenCount != nil || g.ThoughtsTokenCount != nil {
		var out int64
		for _, v := range []*int64{g.CandidatesTokenCount, g.ThoughtsTokenCount} {
			if v != nil {
				out += *v
			}
		}
		set(&u.OutputTokens, &out)
	}
	set(&u.CacheReadInputTokens, g.CachedContentTokenCount)
}

type usageHolder struct {
	Usage *usageJSON `json:"usage"`
}

func (h *usageHolder) usage() *usageJSON {
	if h == nil {
		return nil
	}
	return h.Usage
}

// merge folds the usage in one JSON message into u. Later values replace earlier ones: an
// Anthropic message_delta carries the cumulative output count.
func mergeUsage(u *relay.Usage, data []byte) {
	if !hasUsageKey(data) {
		return
	}
	if d := bytes.TrimLeft(data, " \t\r\n"); len(d) > 0 && d[0] == '[' {
		// A Gemini stream asked for without alt=sse: one JSON array of responses.
		var cs []usageCarrier
		if json.Unmarshal(d, &cs) == nil {
			for i := range cs {
				cs[i].merge(u)
			}
		}
		return
	}
	var c usageCarrier
	if json.Unmarshal(data, &c) != nil {
		return
	}
	c.merge(u)
}

// merge folds the usage c carries into u.
func (c *usageCarrier) merge(u *relay.Usage) {
	if c.UsageMetadata != nil {
		c.UsageMetadata.merge(u)
	}
	for _, j := range []*usageJSON{c.Usage, c.Message.usage(), c.Response.usage()} {
		if j == nil {
			continue
		}
		set(&u.InputTokens, j.InputTokens)
		set(&u.InputTokens, j.PromptTokens)
		set(&u.OutputTokens, j.OutputTokens)
		set(&u.OutputTokens, j.CompletionTokens)
		set(&u.CacheCreationInputTokens, j.CacheCreationInputTokens)
		set(&u.CacheReadInputTokens, j.CacheReadInputTokens)
	}
}

// hasUsageKey reports whether data holds `"usage"` or Gemini's `"usageMetadata"`. It steps
// from quote to quote: a long text delta has few quotes (JSON escapes them), and
// bytes.IndexByte skips the rest far faster than a search for the whole string, which is done
// on every data line of a stream.
func hasUsageKey(data []byte) bool {
	const key, gemini = `"usage"`, `"usageMetadata"`
	for {
		i := bytes.IndexByte(data, '"')
		if i < 0 || len(data)-i < len(key) {
			return false
		}
		if string(data[i:i+len(key)]) == key || (len(data)-i >= len(gemini) && string(data[i:i+len(gemini)]) == gemini) {
			return true
		}
		data = data[i+1:]
	}
}

func set(dst *int64, v *int64) {
	if v != nil && *v != 0 {
		*dst = *v
	}
}

// sseScanner follows an event stream as it passes, without holding it back: it parses the
// data lines that mention usage, and knows whether the stream stands between events (where
// an error event can be inserted cleanly).
type sseScanner struct {
	usage   *relay.Usage
	line    []byte
	skip    bool // the current line is too long to parse
	inEvent bool // a field line was seen since the last blank line
}

func (s *sseScanner) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			return
		}
		if len(s.line) == 0 && !s.skip {
			// The whole line is in p (the usual case): parsed where it lies, not copied.
			s.endLine(p[:i], len(p[:i]) > maxSSELine)
		} else {
			s.add(p[:i])
			s.endLine(s.line, s.skip)
		}
		s.line, s.skip = s.line[:0], false
		p = p[i+1:]
	}
}

// add appends a piece of the current line, or marks it too long to parse.
func (s *sseScanner) add(piece []byte) {
	if s.skip {
		return
	}
	if len(s.line)+len(piece) > maxSSELine {
		s.skip, s.line = true, s.line[:0]
		return
	}
	s.line = append(s.line, piece...)
}

// endLine handles one complete line (without its "\n"); skip says it was too long to parse.
func (s *sseScanner) endLine(line []byte, skip bool) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	switch {
	case skip:
		s.inEvent = true
	case len(line) == 0:
		s.inEvent = false
	default:
		s.inEvent = true
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			mergeUsage(s.usage, bytes.TrimPrefix(data, []byte(" ")))
		}
	}
}

// separator returns what must precede an inserted event so that it starts on its own: the
// end of a partial line and of a partial event.
func (s *sseScanner) separator() string {
	switch {
	case len(s.line) > 0 || s.skip:
		return "\n\n"
	case s.inEvent:
		return "\n"
	}
	return ""
}
