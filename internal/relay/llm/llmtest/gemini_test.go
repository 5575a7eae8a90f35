package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func gemini(t *testing.T, s *Server, method, path, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type geminiChunk struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
		TotalTokenCount      int64 `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	Error        *struct {
		Code   int    `json:"code"`
		Status string `json:"status"`
	} `json:"error"`
}

// TestGeminiStream: streamGenerateContent?alt=sse is data-only events ended by "\r\n\r\n", each
// a GenerateContentResponse whose text parts make up the answer, usage in each (cumulative),
// finishReason STOP in the last.
func TestGeminiStream(t *testing.T) {
	s := NewGemini(Options{Credential: "k", Respond: func(Request) Reply {
		return Reply{Text: "Hello, Gemini.", Chunk: 5, OutputTokens: 9}
	}})
	defer s.Close()
	const body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	resp, b := gemini(t, s, http.MethodPost, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "k", body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if !strings.HasSuffix(string(b), "}\r\n\r\n") || strings.Contains(string(b), "event:") {
		t.Fatalf("not data-only events ended by CRLF CRLF: %q", b)
	}
	er := NewEventReader(strings.NewReader(string(b)))
	var text strings.Builder
	var last geminiChunk
	n := 0
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var c geminiChunk
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" {
			t.Fatalf("chunk %q: %v", ev.Data, err)
		}
		text.WriteString(c.Candidates[0].Content.Parts[0].Text)
		if c.ModelVersion != "gemini-2.5-flash" || c.UsageMetadata.PromptTokenCount == 0 ||
			c.UsageMetadata.TotalTokenCount != c.UsageMetadata.PromptTokenCount+c.UsageMetadata.CandidatesTokenCount {
			t.Fatalf("chunk %s", ev.Data)
		}
		last = c
		n++
	}
	if n != 3 || text.String() != "Hello, Gemini." || last.Candidates[0].FinishReason != "STOP" || last.UsageMetadata.CandidatesTokenCount != 9 {
		t.Fatalf("%d chunks, text %q, last %+v", n, text.String(), last)
	}
	if r := s.Requests(); len(r) != 1 || r[0].RawQuery != "alt=sse" || r[0].Header.Get("X-Goog-Api-Key") != "k" || string(r[0].Body) != body {
		t.Fatalf("recorded %+v", r)
	}
}

// TestGeminiJSON: generateContent answers one response; a request for JSON with a schema gets
// a value that fits it (Gemini CLI's next-speaker check); countTokens counts.
func TestGeminiJSON(t *testing.T) {
	s := NewGemini(Options{})
	defer s.Close()
	resp, b := gemini(t, s, http.MethodPost, "/v1beta/models/m:generateContent", "", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	var c geminiChunk
	if resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil || len(c.Candidates) != 1 || c.Candidates[0].Content.Parts[0].Text != "Hello from the fake upstream." ||
		c.Candidates[0].FinishReason != "STOP" || c.UsageMetadata.CandidatesTokenCount == 0 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	schema := `{"contents":[{"role":"user","parts":[{"text":"who speaks next?"}]}],"generationConfig":{"responseMimeType":"application/json",` +
		`"responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"next_speaker":{"type":"string","enum":["user","model"]},` +
		`"score":{"type":"INTEGER","minimum":1}},"required":["reasoning","next_speaker","score"]}}}`
	_, b = gemini(t, s, http.MethodPost, "/v1beta/models/m:generateContent", "", schema)
	var answer struct {
		Reasoning   string `json:"reasoning"`
		NextSpeaker string `json:"next_speaker"`
		Score       int    `json:"score"`
	}
	if json.Unmarshal(b, &c) != nil || json.Unmarshal([]byte(c.Candidates[0].Content.Parts[0].Text), &answer) != nil ||
		answer.NextSpeaker != "user" || answer.Reasoning == "" || answer.Score != 1 {
		t.Fatalf("JSON answer %s", b)
	}
	_, b = gemini(t, s, http.MethodPost, "/v1beta/models/m:countTokens", "", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if !strings.Contains(string(b), `"totalTokens":`) {
		t.Fatalf("countTokens %s", b)
	}
}

// TestGeminiErrors: Google's error format and statuses: no key, a wrong key, a wrong bearer
// token, an unknown method, a request without contents, a scripted error, an error mid-stream.
func TestGeminiErrors(t *testing.T) {
	s := NewGemini(Options{Credential: "k", Respond: func(r Request) Reply {
		switch {
		case strings.Contains(string(r.Body), "busy"):
			return Reply{Status: 429, Message: "Resource has been exhausted (e.g. check quota)."}
		case strings.Contains(string(r.Body), "fail"):
			return Reply{StreamError: "INTERNAL"}
		}
		return Reply{}
	}})
	defer s.Close()
	const body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	for _, tc := range []struct {
		name, path, key, body string
		code                  int
		status, reason        string
	}{
		{"no key", "/v1beta/models/m:generateContent", "", body, 403, "PERMISSION_DENIED", ""},
		{"wrong key", "/v1beta/models/m:generateContent", "wrong", body, 400, "INVALID_ARGUMENT", "API_KEY_INVALID"},
		{"unknown method", "/v1beta/models/m:embedSomething", "k", body, 404, "NOT_FOUND", ""},
		{"no contents", "/v1beta/models/m:generateContent", "k", `{}`, 400, "INVALID_ARGUMENT", ""},
		{"scripted", "/v1beta/models/m:generateContent", "k", `{"contents":[{"parts":[{"text":"busy"}]}]}`, 429, "RESOURCE_EXHAUSTED", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := gemini(t, s, http.MethodPost, tc.path, tc.key, tc.body)
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Status  string `json:"status"`
					Details []struct {
						Reason string `json:"reason"`
					} `json:"details"`
				} `json:"error"`
			}
			if resp.StatusCode != tc.code || json.Unmarshal(b, &e) != nil || e.Error.Code != tc.code || e.Error.Status != tc.status || e.Error.Message == "" {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if tc.reason != "" && (len(e.Error.Details) == 0 || e.Error.Details[0].Reason != tc.reason) {
				t.Fatalf("details %s", b)
			}
		})
	}
	b := NewGemini(Options{Credential: "k", CredentialHeader: "Authorization: Bearer"})
	defer b.Close()
	if resp, body := gemini(t, b, http.MethodPost, "/v1beta/models/m:generateContent", "", ""); resp.StatusCode != 403 {
		t.Fatalf("bearer gateway without a token: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, b.URL+"/v1beta/models/m:generateContent", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("bearer gateway with a wrong token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	_, raw := gemini(t, s, http.MethodPost, "/v1beta/models/m:streamGenerateContent?alt=sse", "k", `{"contents":[{"parts":[{"text":"fail"}]}]}`)
	events := strings.Split(strings.TrimSuffix(string(raw), "\r\n\r\n"), "\r\n\r\n")
	var last geminiChunk
	if len(events) != 2 || json.Unmarshal([]byte(strings.TrimPrefix(events[1], "data: ")), &last) != nil || last.Error == nil || last.Error.Code != 500 || last.Error.Status != "INTERNAL" {
		t.Fatalf("failing stream %q", raw)
	}
}

// TestGeminiToolUse: a reply with a tool call ends, streamed or not, with a functionCall part
// after the text (in the last chunk when streamed), as Gemini CLI reads a model's call of
// run_shell_command; without one the parts are text only.
func TestGeminiToolUse(t *testing.T) {
	call := &ToolUse{ID: "call_1", Name: "run_shell_command", Input: map[string]any{"command": "true"}}
	s := NewGemini(Options{Respond: callUnlessNoTool(call)})
	defer s.Close()
	// calls lists the functionCall parts of the chunks in b (one JSON value, or events).
	calls := func(b []byte) []string {
		var out []string
		er := NewEventReader(strings.NewReader(string(b)))
		for {
			ev, err := er.Next()
			data := ev.Data
			if err != nil {
				if len(out) > 0 || !strings.HasPrefix(string(b), "{") {
					return out
				}
				data = string(b) // not streamed: the response itself
			}
			var c struct {
				Candidates []struct {
					Content struct {
						Parts []struct {
							FunctionCall *struct {
								ID, Name string
								Args     map[string]any
							} `json:"functionCall"`
						}
					}
				}
			}
			json.Unmarshal([]byte(data), &c)
			for _, cand := range c.Candidates {
				for _, p := range cand.Content.Parts {
					if f := p.FunctionCall; f != nil {
						out = append(out, f.ID+" "+f.Name+" "+fmt.Sprint(f.Args["command"]))
					}
				}
			}
			if err != nil {
				return out
			}
		}
	}
	const want = "[call_1 run_shell_command true]"
	for _, c := range []struct{ path, body, want string }{
		{"generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, want},
		{"streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, want},
		{"generateContent", `{"contents":[{"role":"user","parts":[{"text":"no tool"}]}]}`, "[]"},
	} {
		_, b := gemini(t, s, http.MethodPost, "/v1beta/models/gemini-2.5-flash:"+c.path, "", c.body)
		if got := fmt.Sprint(calls(b)); got != c.want {
			t.Errorf("%s %s: function calls %s, want %s", c.path, c.body, got, c.want)
		}
	}
}
