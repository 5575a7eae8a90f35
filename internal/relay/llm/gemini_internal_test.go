package llm

import (
	"testing"

	"github.com/agentbox/agentbox/internal/relay"
)

// TestGeminiUsageShapes: usageMetadata is read from a GenerateContentResponse, from each chunk
// of a stream (the last counts win), from the JSON array a stream without alt=sse is; thinking
// tokens count as output, cached tokens as cache reads.
func TestGeminiUsageShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []string
		want relay.Usage
	}{
		{"response", []string{`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":3,"totalTokenCount":14},"modelVersion":"gemini-2.5-flash"}`},
			relay.Usage{InputTokens: 11, OutputTokens: 3}},
		{"thoughts and cache", []string{`{"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":3,"thoughtsTokenCount":40,"cachedContentTokenCount":64,"totalTokenCount":143}}`},
			relay.Usage{InputTokens: 100, OutputTokens: 43, CacheReadInputTokens: 64}},
		{"stream chunks, last wins", []string{
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"a"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"b"}]},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":10}}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"c"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14}}`,
		}, relay.Usage{InputTokens: 9, OutputTokens: 5}},
		{"array", []string{` [{"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":1}},{"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":4}}]`},
			relay.Usage{InputTokens: 7, OutputTokens: 4}},
		{"usage in text only", []string{`{"candidates":[{"content":{"parts":[{"text":"\"usageMetadata\":{\"promptTokenCount\":5}"}]}}]}`}, relay.Usage{}},
		{"countTokens", []string{`{"totalTokens":31,"promptTokensDetails":[{"modality":"TEXT","tokenCount":31}]}`}, relay.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u relay.Usage
			for _, d := range tc.data {
				mergeUsage(&u, []byte(d))
			}
			if u != tc.want {
				t.Fatalf("usage %+v, want %+v", u, tc.want)
			}
		})
	}
}

// TestGeminiSSEUsage: a Gemini stream as the API sends it, data-only events ended by
// "\r\n\r\n", cut anywhere.
func TestGeminiSSEUsage(t *testing.T) {
	stream := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":1}}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":6}}\r\n\r\n"
	for cut := range len(stream) + 1 {
		var u relay.Usage
		s := &sseScanner{usage: &u}
		s.write([]byte(stream[:cut]))
		s.write([]byte(stream[cut:]))
		if u != (relay.Usage{InputTokens: 8, OutputTokens: 8}) || s.separator() != "" {
			t.Fatalf("cut at %d: usage %+v, separator %q", cut, u, s.separator())
		}
	}
}
