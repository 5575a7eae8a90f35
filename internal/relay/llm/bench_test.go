package llm_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// benchTarget sends requests either straight to the fake upstream (with the host credential)
// or through the relay (with the pairing), so that the two can be compared.
type benchTarget struct {
	r      *rig
	direct bool
	client *http.Client
}

func (bt *benchTarget) request(ctx context.Context, body string) *http.Request {
	req := bt.r.request(ctx, bt.r.defaultPath(), body)
	if bt.direct {
		direct, _ := http.NewRequestWithContext(ctx, http.MethodPost, bt.r.up.URL+"/v1/messages", strings.NewReader(body))
		direct.Header = req.Header
		direct.Header.Set("x-api-key", bt.r.hostCred)
		return direct
	}
	return req
}

func forBoth(b *testing.B, o rigOptions, f func(b *testing.B, bt *benchTarget)) {
	for _, mode := range []string{"direct", "relay"} {
		b.Run(mode, func(b *testing.B) {
			r := newRig(b, o)
			r.logs = &syncBuffer{}
			f(b, &benchTarget{r: r, direct: mode == "direct", client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}})
		})
	}
}

// BenchmarkSmallRequest measures one small non-streaming request; relay minus direct is the
// latency the relay adds.
func BenchmarkSmallRequest(b *testing.B) {
	forBoth(b, rigOptions{}, func(b *testing.B, bt *benchTarget) {
		for b.Loop() {
			resp, err := bt.client.Do(bt.request(context.Background(), messageBody))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkSSEEvent measures the round trip of one event: the upstream writes an event only
// after the client has read the previous one, so each op is one event's full path through
// the relay and back (relay minus direct is the per-event delay the relay adds).
func BenchmarkSSEEvent(b *testing.B) {
	ack := make(chan struct{})
	o := rigOptions{up: llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply {
			return llmtest.Reply{Text: "token", Repeat: 1 << 30}
		},
		Pace: func(ctx context.Context, i int, event string) error {
			if event != "content_block_delta" {
				return nil
			}
			select {
			case <-ack:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}}
	forBoth(b, o, func(b *testing.B, bt *benchTarget) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := bt.client.Do(bt.request(ctx, streamBody))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		er := llmtest.NewEventReader(resp.Body)
		for range 3 { // message_start, content_block_start, ping
			if _, err := er.Next(); err != nil {
				b.Fatal(err)
			}
		}
		for b.Loop() {
			ack <- struct{}{}
			if _, err := er.Next(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStream100MB measures the throughput of one ~100 MB event stream (1 KiB text
// deltas).
func BenchmarkStream100MB(b *testing.B) {
	o := rigOptions{up: llmtest.Options{Respond: func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: strings.Repeat("x", 1024), Chunk: 1024, Repeat: 100 << 10}
	}}}
	forBoth(b, o, func(b *testing.B, bt *benchTarget) {
		var total int64
		n := 0
		for b.Loop() {
			resp, err := bt.client.Do(bt.request(context.Background(), streamBody))
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			total += got
			n++
		}
		b.SetBytes(total / int64(n))
	})
}

// BenchmarkServerToolsCheck measures the relay's reading of a model call's tools
// (checkTools) on a body of Claude Code's size: 40 tools with long descriptions and schemas,
// and a conversation, about 200 KB.
func BenchmarkServerToolsCheck(b *testing.B) {
	var tools []string
	for i := range 40 {
		tools = append(tools, fmt.Sprintf(`{"name":"Tool%d","description":%q,"input_schema":{"type":"object","properties":{"a":{"type":"string","description":%q}}}}`,
			i, strings.Repeat("describes the tool. ", 100), strings.Repeat("an argument. ", 40)))
	}
	body := []byte(`{"model":"m","max_tokens":32000,"system":[{"type":"text","text":` + fmt.Sprintf("%q", strings.Repeat("You are a coding agent. ", 2000)) +
		`}],"messages":[{"role":"user","content":` + fmt.Sprintf("%q", strings.Repeat("some code\n", 8000)) + `}],"tools":[` + strings.Join(tools, ",") + `]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if names, err := llm.ServerTools(llm.Anthropic, body); err != nil || len(names) != 0 {
			b.Fatal(names, err)
		}
	}
}
