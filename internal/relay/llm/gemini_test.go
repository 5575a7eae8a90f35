package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/relay/session"
)

const gemStreamPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

// TestGeminiCredentialsStripped: the box's pairing, in x-goog-api-key (where the Google GenAI
// SDK sends its API key) and in every other credential header and in the key= and
// access_token= query parameters, never leaves; the upstream gets the host credential in
// x-goog-api-key, once, and every other header and query parameter as sent.
func TestGeminiCredentialsStripped(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.Gemini})
	p := r.pairing.Reveal()
	q := "alt=sse&key=" + url.QueryEscape(p) + "&%6Bey=" + url.QueryEscape(p) + "&KEY=x&access_token=" + url.QueryEscape(p) + "&$fields=candidates"
	req := r.request(context.Background(), r.path("/v1beta/models/gemini-2.5-flash:streamGenerateContent?"+q), gemMessage)
	req.Header.Add("X-Goog-Api-Key", "second-"+p)
	req.Header.Set("Authorization", "Bearer "+p)
	req.Header.Set("x-api-key", p)
	req.Header.Set("Cookie", "SID="+p)
	req.Header.Set("X-Goog-Api-Client", "google-genai-sdk/1.30.0 gl-node/v20.20.2")
	req.Header.Set("User-Agent", "GeminiCLI/0.61.0/gemini-2.5-flash (linux; x64; terminal)")
	resp := r.do(req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	reqs := r.up.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests", len(reqs))
	}
	got := reqs[0]
	if strings.Contains(fmt.Sprint(got.Header)+got.RawQuery+string(got.Body), p) {
		t.Errorf("upstream received the box's pairing: %v ?%s", got.Header, got.RawQuery)
	}
	if v := got.Header.Values("X-Goog-Api-Key"); len(v) != 1 || v[0] != r.hostCred {
		t.Errorf("upstream x-goog-api-key = %q, want the host credential once", v)
	}
	for _, k := range []string{"Authorization", "X-Api-Key", "Cookie", session.HeaderName} {
		if v := got.Header.Values(k); len(v) != 0 {
			t.Errorf("upstream received %s: %q", k, v)
		}
	}
	if got.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || got.RawQuery != "alt=sse&$fields=candidates" {
		t.Errorf("upstream got %s ?%s, want the path and the other parameters as sent", got.Path, got.RawQuery)
	}
	if got.Header.Get("X-Goog-Api-Client") != "google-genai-sdk/1.30.0 gl-node/v20.20.2" || !strings.HasPrefix(got.Header.Get("User-Agent"), "GeminiCLI/") {
		t.Errorf("upstream headers %v", got.Header)
	}
	rec := r.record()
	if rec.Outcome != relay.OutcomeOK || rec.Provider != llm.Gemini || rec.SessionID != r.sess.ID() || strings.Contains(rec.Path, p) {
		t.Errorf("record %+v", rec)
	}
}

// TestGeminiPairingInGoogAPIKey: a pairing in x-goog-api-key alone is accepted, and a wrong
// one there is refused like anywhere else.
func TestGeminiPairingInGoogAPIKey(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.Gemini})
	resp := r.do(r.request(context.Background(), r.defaultPath(), gemMessage))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r.record()
	req := r.request(context.Background(), r.defaultPath(), gemMessage)
	req.Header.Set("x-goog-api-key", session.PairingPrefix+strings.Repeat("x", 43))
	expectError(t, r.do(req), http.StatusForbidden, api.CodePairingInvalid)
	r.record()
	if n := len(r.up.Requests()); n != 1 {
		t.Fatalf("upstream got %d requests, want 1", n)
	}
}

// TestGeminiUsage: the Gemini API's usageMetadata is read into the access record, from a JSON
// answer and from the chunks of a stream (data-only events separated by "\r\n\r\n", the last
// one's counts win).
func TestGeminiUsage(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"json", "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"stream", gemStreamPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{Respond: func(llmtest.Request) llmtest.Reply {
				return llmtest.Reply{Text: "a fine answer, in several chunks", Chunk: 5, InputTokens: 1234, OutputTokens: 56}
			}}})
			resp := r.do(r.request(context.Background(), r.path(tc.path), gemMessage))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"usageMetadata"`) {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			rec := r.record()
			if rec.Usage.InputTokens != 1234 || rec.Usage.OutputTokens != 56 {
				t.Fatalf("usage %+v", rec.Usage)
			}
			if !strings.Contains(r.logs.String(), "tokens.in=1234 tokens.out=56") {
				t.Fatalf("log line lacks usage:\n%s", r.logs.String())
			}
		})
	}
}

// TestGeminiStreamsIncrementally guards against buffering a Gemini stream: the upstream sends
// chunk n+1 only after the client has read chunk n through the relay.
func TestGeminiStreamsIncrementally(t *testing.T) {
	read := make(chan int)
	paceErr := make(chan error, 1)
	r := newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "one two three four", Chunk: 4} },
		Pace: func(ctx context.Context, i int, event string) error {
			if i == 0 {
				return nil
			}
			select {
			case got := <-read:
				if got != i-1 {
					paceErr <- fmt.Errorf("client read chunk %d before the upstream sent chunk %d", got, i)
					return errors.New("out of order")
				}
				return nil
			case <-ctx.Done():
				paceErr <- fmt.Errorf("upstream request cancelled before chunk %d: %w", i, context.Cause(ctx))
				return ctx.Err()
			}
		},
	}})
	resp := r.do(r.request(context.Background(), r.path(gemStreamPath), gemMessage))
	defer resp.Body.Close()
	er := llmtest.NewEventReader(resp.Body)
	var text strings.Builder
	for i := range 5 {
		ev, err := er.Next()
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		var c struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
		}
		if ev.Name != "" || json.Unmarshal([]byte(ev.Data), &c) != nil || len(c.Candidates) != 1 || len(c.Candidates[0].Content.Parts) != 1 {
			t.Fatalf("chunk %d: %q %s", i, ev.Name, ev.Data)
		}
		text.WriteString(c.Candidates[0].Content.Parts[0].Text)
		if (c.Candidates[0].FinishReason == "STOP") != (i == 4) {
			t.Fatalf("chunk %d: finishReason %q", i, c.Candidates[0].FinishReason)
		}
		if i < 4 {
			select {
			case read <- i:
			case err := <-paceErr:
				t.Fatal(err)
			}
		}
	}
	if _, err := er.Next(); err != io.EOF {
		t.Fatalf("after the last chunk: %v", err)
	}
	if text.String() != "one two three four" {
		t.Fatalf("text %q", text.String())
	}
	if rec := r.record(); rec.Outcome != relay.OutcomeOK || rec.Usage.OutputTokens != 5 {
		t.Fatalf("record %+v", rec)
	}
}

// TestGeminiRevokeMidStream: a Gemini stream whose session is revoked ends with a data-only
// event carrying Google's error format, with pairing_invalid as its reason.
func TestGeminiRevokeMidStream(t *testing.T) {
	stalled := make(chan struct{})
	r := newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "one two three four", Chunk: 4} },
		Pace: func(ctx context.Context, i int, event string) error {
			if i < 2 {
				return nil
			}
			close(stalled)
			<-ctx.Done()
			return ctx.Err()
		},
	}})
	resp := r.do(r.request(context.Background(), r.path(gemStreamPath), gemMessage))
	defer resp.Body.Close()
	er := llmtest.NewEventReader(resp.Body)
	for i := range 2 {
		if _, err := er.Next(); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	<-stalled
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	ev, err := er.Next()
	if err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if ev.Name != "" || json.Unmarshal([]byte(ev.Data), &e) != nil || e.Error.Code != 403 || e.Error.Status != "PERMISSION_DENIED" ||
		len(e.Error.Details) != 1 || e.Error.Details[0].Reason != api.CodePairingInvalid {
		t.Fatalf("after revocation got event %q %s, want a data-only Google error with pairing_invalid", ev.Name, ev.Data)
	}
	if _, err := er.Next(); err != io.EOF {
		t.Fatalf("stream not closed after the error event: %v", err)
	}
	if rec := r.record(); rec.Outcome != relay.OutcomeCanceled || rec.Code != api.CodePairingInvalid {
		t.Fatalf("record %+v", rec)
	}
}

// TestGeminiKeyRejected: Google answers an API key it does not accept with 400
// INVALID_ARGUMENT, reason API_KEY_INVALID; the relay answers it as any upstream 401 (the box
// learns what to do on the host, nothing of the key). Any other 400 passes through whole.
func TestGeminiKeyRejected(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{Credential: "the-key-the-gateway-wants"}})
	msg := expectError(t, r.do(r.request(context.Background(), r.defaultPath(), gemMessage)), http.StatusUnauthorized, api.CodeGatewayCredentialRejected)
	for _, bad := range []string{r.hostCred, "the-key-the-gateway-wants", "API key not valid"} {
		if strings.Contains(msg, bad) {
			t.Errorf("message %q holds %q", msg, bad)
		}
	}
	if !strings.Contains(msg, "gateway.gemini.credential.file") {
		t.Errorf("message %q does not name the credential", msg)
	}
	if rec := r.record(); rec.Status != 401 || rec.Code != api.CodeGatewayCredentialRejected {
		t.Errorf("record %+v", rec)
	}

	r = newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{Respond: func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: 400, Message: "* GenerateContentRequest.generation_config.temperature: must be at most 2\n"}
	}}})
	resp := r.do(r.request(context.Background(), r.defaultPath(), gemMessage))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"status":"INVALID_ARGUMENT"`) || !strings.Contains(string(b), "must be at most 2") {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if rec := r.record(); rec.Status != 400 || rec.Code != "" {
		t.Errorf("record %+v", rec)
	}
}

// TestGeminiDefaults: the gemini gateway's defaults are Google's API and x-goog-api-key, and
// its credential can go in Authorization: Bearer instead.
func TestGeminiDefaults(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.Gemini, up: llmtest.Options{CredentialHeader: "Authorization: Bearer"},
		gateway: func(g *llm.Gateway) { g.Credential.Header = "Authorization: Bearer" }})
	resp := r.do(r.request(context.Background(), r.defaultPath(), gemMessage))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := r.up.Requests()[0].Header
	if got.Get("Authorization") != "Bearer "+r.hostCred || len(got.Values("X-Goog-Api-Key")) != 0 {
		t.Fatalf("upstream headers %v", got)
	}
	r.record()
	if llm.DefaultGeminiURL != "https://generativelanguage.googleapis.com" {
		t.Fatalf("DefaultGeminiURL %s", llm.DefaultGeminiURL)
	}
	if _, err := llm.New(llm.Config{Gemini: llm.Gateway{URL: "https://generativelanguage.googleapis.com/?key=x"}}); err == nil || !strings.Contains(err.Error(), "gateway.gemini.url") {
		t.Fatalf("New with a key in the URL: %v", err)
	}
}

// TestStripQueryCredentials pins which query parameters are credentials.
func TestStripQueryCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"alt=sse":                      "alt=sse",
		"alt=sse&key=abp_x":            "alt=sse",
		"key=abp_x&alt=sse":            "alt=sse",
		"Key=a&KEY=b&%6b%65%79=c&x=1":  "x=1",
		"alt=sse;key=abp_x&x=1":        "x=1",
		"access_token=t&keys=1&akey=2": "keys=1&akey=2",
		"+key=abp_x&a=%zz&key%3D=1":    "a=%zz&key%3D=1",
		"key":                          "",
		"$fields=a&prettyPrint=false":  "$fields=a&prettyPrint=false",
		"a=1&&b=2":                     "a=1&&b=2",
	} {
		if got := llm.StripQueryCredentials(in); got != want {
			t.Errorf("StripQueryCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}
