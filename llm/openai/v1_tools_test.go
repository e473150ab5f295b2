package openai

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openaiapi"
)

// callingModel is the model behind a second voxpipe: asked by a person it
// says a word and calls tools (one the request never offered, which /v1
// must not return); given the results it answers with them.
type callingModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *callingModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	var toks []llm.Token
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		var parts []string
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				parts = append(parts, msg.ToolCallID+": "+msg.Content)
			}
		}
		toks = []llm.Token{{Text: "Here you are. "}, {Text: strings.Join(parts, "; ")}}
	} else {
		toks = []llm.Token{
			{Text: "Checking."},
			{ToolCalls: []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{ToolCalls: []llm.ToolCall{{ID: "call_r", Name: "launch_rockets", Arguments: `{}`}, {ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`}}},
		}
	}
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		for i, tok := range toks {
			if i == len(toks)-1 {
				tok.Done, tok.Usage = true, &llm.Usage{PromptTokens: 20, CompletionTokens: 6}
			}
			select {
			case out <- tok:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestToolRoundTripThroughVoxpipeV1: this client against another
// voxpipe's /v1 over a model that calls tools: the calls come back whole
// (the one to a tool not offered dropped by /v1), and the assistant
// message and results sent back reach the far model as they left, in
// streamed and whole mode.
func TestToolRoundTripThroughVoxpipeV1(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		m := &callingModel{}
		srv := httptest.NewServer(openaiapi.New(m, "voxpipe-remote", zerolog.Nop()))
		c, err := NewClient(Config{BaseURL: srv.URL + "/v1", Model: "voxpipe-remote", NoStream: noStream})
		if err != nil {
			t.Fatal(err)
		}
		req := llm.Request{
			Messages:     []llm.Message{{Role: llm.RoleSystem, Content: "You are voxpipe."}, {Role: llm.RoleUser, Content: "Weather in Paris, and a 30 second timer?"}},
			Tools:        []llm.Tool{weatherTool, timerTool, {Name: "get_time"}},
			Conversation: "s1",
		}
		r := askTools(t, c, req)
		if r.err != nil {
			t.Fatal(r.err)
		}
		want := []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`}}
		if r.text != "Checking." || !reflect.DeepEqual(r.calls, want) {
			t.Fatalf("stream=%v: text %q calls %+v", !noStream, r.text, r.calls)
		}
		far := m.reqs[0]
		if len(far.Tools) != 3 || far.Tools[2].Name != "get_time" || far.Tools[2].Parameters == nil || far.Conversation != "v1:s1" {
			t.Fatalf("the far model got tools %+v, conversation %q", far.Tools, far.Conversation)
		}
		if !jsonEqual(t, far.Tools[0].Parameters, weatherTool.Parameters) || far.Tools[0].Description != weatherTool.Description {
			t.Fatalf("weather tool arrived as %+v", far.Tools[0])
		}

		// The caller runs the calls and sends the results back.
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: r.text, ToolCalls: r.calls},
			llm.Message{Role: llm.RoleTool, ToolCallID: "call_w", Content: `{"sky":"clear","c":21}`},
			llm.Message{Role: llm.RoleTool, ToolCallID: "call_t", Content: `{"ok":true}`})
		r = askTools(t, c, req)
		if r.err != nil || len(r.calls) != 0 || r.text != `Here you are. call_w: {"sky":"clear","c":21}; call_t: {"ok":true}` {
			t.Fatalf("stream=%v: answer after the results %+v", !noStream, r)
		}
		got := m.reqs[1].Messages
		if len(got) != len(req.Messages) {
			t.Fatalf("the far model got %d messages, %d sent", len(got), len(req.Messages))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], req.Messages[i]) {
				t.Fatalf("message %d arrived as %+v, sent %+v", i, got[i], req.Messages[i])
			}
		}
		c.Close()
		srv.Close()
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// BenchmarkV1ToolTurn: one streamed answer through this client and a
// second voxpipe's /v1 on loopback, over a model that answers at once:
// a text answer against the same answer plus one tool call, and the whole
// tool round (the call, then the answer to its result). The difference of
// the first two is what carrying a call costs on this path.
//
//	go test -run '^$' -bench V1ToolTurn -benchtime 2000x ./llm/openai
func BenchmarkV1ToolTurn(b *testing.B) {
	m := &callingModel{}
	srv := httptest.NewServer(openaiapi.New(m, "voxpipe-remote", zerolog.Nop()))
	defer srv.Close()
	c, err := NewClient(Config{BaseURL: srv.URL + "/v1", Model: "voxpipe-remote"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	user := []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}}
	run := func(b *testing.B, req llm.Request) (text string, calls []llm.ToolCall) {
		toks, err := c.Stream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for tok := range toks {
			if tok.Err != nil {
				b.Fatal(tok.Err)
			}
			text += tok.Text
			calls = append(calls, tok.ToolCalls...)
		}
		return text, calls
	}
	b.Run("text", func(b *testing.B) {
		// No tools offered: /v1 drops the model's calls, the text is the same.
		for b.Loop() {
			run(b, llm.Request{Messages: user})
		}
	})
	withTools := llm.Request{Messages: user, Tools: []llm.Tool{weatherTool, timerTool}}
	b.Run("text+call", func(b *testing.B) {
		for b.Loop() {
			if _, calls := run(b, withTools); len(calls) != 2 {
				b.Fatalf("calls %+v", calls)
			}
		}
	})
	b.Run("round", func(b *testing.B) {
		for b.Loop() {
			text, calls := run(b, withTools)
			req := withTools
			req.Messages = append(append([]llm.Message(nil), user...), llm.Message{Role: llm.RoleAssistant, Content: text, ToolCalls: calls})
			for _, call := range calls {
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: `{"ok":true}`})
			}
			run(b, req)
		}
	})
}
