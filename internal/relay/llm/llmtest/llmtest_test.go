package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestResponsesStream: a streamed Responses API answer is the real event sequence, each event's
// type its event name and its sequence_number its place, the deltas make up the text that
// response.output_text.done and response.completed carry, and usage comes last.
func TestResponsesStream(t *testing.T) {
	s := NewOpenAI(Options{Credential: "k", Respond: func(Request) Reply { return Reply{Text: "Hello, Responses.", Chunk: 5} }})
	defer s.Close()
	events := post(t, s.URL+"/v1/responses", "k", `{"model":"gpt-x","input":"hi","stream":true}`, http.StatusOK, "text/event-stream")
	var names, deltas []string
	var done, completed struct {
		Text     string `json:"text"`
		Response struct {
			Status string `json:"status"`
			Output []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
	for i, ev := range events {
		var head struct {
			Type  string `json:"type"`
			Seq   int    `json:"sequence_number"`
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &head); err != nil {
			t.Fatalf("event %d %q: %v", i, ev.Data, err)
		}
		if head.Type != ev.Name || head.Seq != i {
			t.Errorf("event %d: name %q, type %q, sequence_number %d", i, ev.Name, head.Type, head.Seq)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "response.output_text.delta":
			deltas = append(deltas, head.Delta)
		case "response.output_text.done":
			json.Unmarshal([]byte(ev.Data), &done)
		case "response.completed":
			json.Unmarshal([]byte(ev.Data), &completed)
		}
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(names, want) {
		t.Errorf("events %q, want %q", names, want)
	}
	r := completed.Response
	if got := strings.Join(deltas, ""); got != "Hello, Responses." || done.Text != got ||
		r.Status != "completed" || len(r.Output) != 1 || len(r.Output[0].Content) != 1 || r.Output[0].Content[0].Text != got {
		t.Errorf("deltas %q, done %q, completed %+v", deltas, done.Text, r)
	}
	if r.Usage.InputTokens == 0 || r.Usage.OutputTokens != 4 {
		t.Errorf("usage %+v, want input tokens and 4 output tokens", r.Usage)
	}
}

// TestResponsesErrors: the Responses API's error answers: a wrong key, a missing model, and a
// stream that fails after its first delta with an error event.
func TestResponsesErrors(t *testing.T) {
	s := NewOpenAI(Options{Credential: "k", Respond: func(r Request) Reply {
		if strings.Contains(string(r.Body), "fail") {
			return Reply{StreamError: "server_error"}
		}
		return Reply{}
	}})
	defer s.Close()
	post(t, s.URL+"/v1/responses", "wrong", `{"model":"gpt-x","stream":true}`, http.StatusUnauthorized, "application/json")
	post(t, s.URL+"/v1/responses", "k", `{"input":"hi"}`, http.StatusBadRequest, "application/json")
	events := post(t, s.URL+"/v1/responses", "k", `{"model":"gpt-x","input":"fail","stream":true}`, http.StatusOK, "text/event-stream")
	if n := len(events); n < 2 || events[n-1].Name != "error" || events[n-2].Name != "response.output_text.delta" ||
		!strings.Contains(events[n-1].Data, `"code":"server_error"`) {
		t.Errorf("failing stream: %+v", events)
	}
	var body struct {
		Object string `json:"object"`
		Status string `json:"status"`
	}
	resp := do(t, s.URL+"/v1/responses", "k", `{"model":"gpt-x","input":"hi"}`)
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Object != "response" || body.Status != "completed" {
		t.Errorf("non-streamed answer: %+v, %v", body, err)
	}
}

func do(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// post sends body and checks the status and content type; it returns the events of a stream.
func post(t *testing.T, url, key, body string, status int, ctype string) []Event {
	t.Helper()
	resp := do(t, url, key, body)
	defer resp.Body.Close()
	if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s %s, want %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b, status, ctype)
	}
	if ctype != "text/event-stream" {
		return nil
	}
	var out []Event
	er := NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		out = append(out, ev)
	}
}

// callUnlessNoTool answers every request with a call of the tool, but for those whose body says
// "no tool", which get the zero Reply.
func callUnlessNoTool(call *ToolUse) func(Request) Reply {
	return func(r Request) Reply {
		if strings.Contains(string(r.Body), "no tool") {
			return Reply{}
		}
		return Reply{ToolUse: call}
	}
}

// TestAnthropicToolUse: a reply with a tool call ends, streamed or not, with a tool_use block
// after the text (streamed: its input as one input_json_delta) and stop_reason "tool_use", as
// a model asks its client to run a tool; without one the stop reason stays "end_turn".
func TestAnthropicToolUse(t *testing.T) {
	call := &ToolUse{ID: "toolu_1", Name: "bash", Input: map[string]any{"command": "true"}}
	s := NewAnthropic(Options{Respond: callUnlessNoTool(call)})
	defer s.Close()
	send := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ body, stop, tool string }{
		{`{"model":"m","stream":false}`, "tool_use", "bash"},
		{`{"model":"m","stream":false,"x":"no tool"}`, "end_turn", ""},
	} {
		resp := send(c.body)
		var m struct {
			Content []struct {
				Type, Name string
				Input      map[string]any
			}
			StopReason string `json:"stop_reason"`
		}
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		tool := ""
		if n := len(m.Content); n > 0 && m.Content[n-1].Type == "tool_use" && m.Content[n-1].Input["command"] == "true" {
			tool = m.Content[n-1].Name
		}
		if m.StopReason != c.stop || tool != c.tool {
			t.Errorf("%s: stop_reason %q, tool %q; want %q, %q", c.body, m.StopReason, tool, c.stop, c.tool)
		}
	}
	resp := send(`{"model":"m","stream":true}`)
	defer resp.Body.Close()
	var started, input, stop string
	er := NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		var d struct {
			Index        int `json:"index"`
			ContentBlock struct {
				Type, Name string
			} `json:"content_block"`
			Delta struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(ev.Data), &d)
		switch {
		case ev.Name == "content_block_start" && d.Index == 1 && d.ContentBlock.Type == "tool_use":
			started = d.ContentBlock.Name
		case ev.Name == "content_block_delta" && d.Delta.Type == "input_json_delta":
			input += d.Delta.PartialJSON
		case ev.Name == "message_delta":
			stop = d.Delta.StopReason
		}
	}
	if started != "bash" || input != `{"command":"true"}` || stop != "tool_use" {
		t.Errorf("stream: tool_use block %q, input %q, stop_reason %q", started, input, stop)
	}
}

// TestResponsesToolUse: a Responses API reply with a tool call ends, streamed or not, with a
// function_call item after the message (its arguments the input as JSON), as Codex CLI reads a
// model's call of exec_command; without one the output is the message alone.
func TestResponsesToolUse(t *testing.T) {
	call := &ToolUse{ID: "call_1", Name: "exec_command", Input: map[string]any{"cmd": "true"}}
	s := NewOpenAI(Options{Respond: callUnlessNoTool(call)})
	defer s.Close()
	send := func(body string) *http.Response {
		resp, err := http.Post(s.URL+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	type item struct {
		Type, Name, Arguments string
		CallID                string `json:"call_id"`
	}
	// last describes the output's last item: its type, and for a call its name, id and arguments.
	last := func(out []item) string {
		if len(out) == 0 {
			return ""
		}
		i := out[len(out)-1]
		return strings.TrimSpace(fmt.Sprintf("%s %s %s %s", i.Type, i.Name, i.CallID, i.Arguments))
	}
	const wantCall = `function_call exec_command call_1 {"cmd":"true"}`
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","stream":false}`, wantCall},
		{`{"model":"m","stream":false,"x":"no tool"}`, "message"},
	} {
		resp := send(c.body)
		var m struct{ Output []item }
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if got := last(m.Output); got != c.want {
			t.Errorf("%s: last output item %q, want %q", c.body, got, c.want)
		}
	}
	resp := send(`{"model":"m","stream":true}`)
	defer resp.Body.Close()
	var done, args string
	var completed []item
	er := NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		var d struct {
			OutputIndex int    `json:"output_index"`
			Delta       string `json:"delta"`
			Item        item
			Response    struct{ Output []item }
		}
		json.Unmarshal([]byte(ev.Data), &d)
		switch {
		case ev.Name == "response.function_call_arguments.delta":
			args += d.Delta
		case ev.Name == "response.output_item.done" && d.OutputIndex == 1:
			done = last([]item{d.Item})
		case ev.Name == "response.completed":
			completed = d.Response.Output
		}
	}
	if done != wantCall || args != `{"cmd":"true"}` || last(completed) != wantCall {
		t.Errorf("stream: call item %q, arguments streamed %q, completed output's last %q; want %q", done, args, last(completed), wantCall)
	}
}
