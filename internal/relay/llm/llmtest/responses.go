package llmtest

import (
	"encoding/json"
	"maps"
	"net/http"
)

// serveResponses answers POST /v1/responses, OpenAI's Responses API (what OpenCode's openai
// provider and Codex CLI speak): a response object, or, with "stream": true, typed
// server-sent events (event: response.created … response.completed; no [DONE]), each carrying
// its sequence_number.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, req Request, rp Reply) {
	var sr streamRequest
	if err := json.Unmarshal(req.Body, &sr); err != nil {
		s.writeError(w, http.StatusBadRequest, apiError{400, "invalid_json", "We could not parse the JSON body of your request."})
		return
	}
	if sr.Model == "" {
		s.writeError(w, http.StatusBadRequest, apiError{400, "missing_required_parameter", "Missing required parameter: 'model'."})
		return
	}
	if rp.Status != 0 && rp.Status != http.StatusOK {
		s.writeError(w, rp.Status, apiError{rp.Status, rp.ErrorType, rp.Message})
		return
	}
	w.Header().Set("x-request-id", "req_fake")
	deltas := rp.deltas()
	in, out := rp.usage(req.Body, deltas)
	const respID, itemID = "resp_fake", "msg_fake"
	text := rp.fullText(deltas)
	part := func(text string) map[string]any {
		return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
	}
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": itemID, "type": "message", "status": status, "role": "assistant", "content": content}
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{
			"id": respID, "object": "response", "created_at": 1700000000, "status": status,
			"background": false, "error": nil, "incomplete_details": nil, "instructions": nil,
			"max_output_tokens": nil, "model": sr.Model, "output": output,
			"parallel_tool_calls": true, "previous_response_id": nil,
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": false,
			"temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}},
			"tool_choice": "auto", "tools": []any{}, "top_p": 1.0, "truncation": "disabled",
			"usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": in + out,
	}
	done := item("completed", []any{part(text)})
	output := []any{done}
	var call map[string]any // the tool call after the message, when the reply has one
	if u := rp.ToolUse; u != nil {
		call = map[string]any{"id": "fc_fake", "type": "function_call", "status": "completed",
			"call_id": u.ID, "name": u.Name, "arguments": string(mustJSON(u.Input))}
		output = append(output, call)
	}
	if !sr.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustJSON(response("completed", output, usage)))
		return
	}
	e := s.startStream(w, r)
	seq := 0
	ev := func(name string, v map[string]any) error {
		v["type"], v["sequence_number"] = name, seq
		seq++
		return e.event(name, mustJSON(v), name)
	}
	if ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)}) != nil ||
		ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)}) != nil ||
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": item("in_progress", []any{})}) != nil ||
		ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part("")}) != nil {
		return
	}
	for range rp.repeat() {
		for _, d := range deltas {
			if ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": d, "logprobs": []any{}}) != nil {
				return
			}
			if rp.StreamError != "" {
				ev("error", map[string]any{"code": rp.StreamError, "message": "The server had an error while processing your request.", "param": nil})
				return
			}
		}
	}
	if ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": text, "logprobs": []any{}}) != nil ||
		ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part(text)}) != nil ||
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": done}) != nil {
		return
	}
	if call != nil {
		added := maps.Clone(call)
		added["status"], added["arguments"] = "in_progress", ""
		if ev("response.output_item.added", map[string]any{"output_index": 1, "item": added}) != nil ||
			ev("response.function_call_arguments.delta", map[string]any{"item_id": call["id"], "output_index": 1, "delta": call["arguments"]}) != nil ||
			ev("response.function_call_arguments.done", map[string]any{"item_id": call["id"], "output_index": 1, "arguments": call["arguments"]}) != nil ||
			ev("response.output_item.done", map[string]any{"output_index": 1, "item": call}) != nil {
			return
		}
	}
	ev("response.completed", map[string]any{"response": response("completed", output, usage)})
}
