package openaiapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/voxpipe/voxpipe/llm"
)

// toolRoundModel says a word and calls get_weather and set_timer while the
// last message is the person's, and answers with the tool results once
// they are there.
type toolRoundModel struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *toolRoundModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	var toks []llm.Token
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		var results []string
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				results = append(results, msg.ToolCallID+"="+msg.Content)
			}
		}
		toks = []llm.Token{{Text: "Results: "}, {Text: strings.Join(results, ", ")}}
	} else {
		toks = []llm.Token{
			{Text: "One moment."},
			{ToolCalls: []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
			{ToolCalls: []llm.ToolCall{{ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`}}},
		}
	}
	return (&tokenModel{tokens: toks}).Stream(ctx, req)
}

func officialClient(t *testing.T, m llm.Model) openai.Client {
	t.Helper()
	srv := newServer(t, m)
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"), option.WithHTTPClient(hc), option.WithMaxRetries(0))
}

func officialParams(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "voxpipe-test",
		Messages: msgs,
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather", Description: openai.String("The weather in a city."),
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
			}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:       "set_timer",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"seconds": map[string]any{"type": "integer"}}},
			}),
		},
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
	}
}

// TestOfficialClientStreamsToolCalls: the official Go client, streaming,
// accumulates voxpipe's delta.tool_calls into whole calls (and reports
// each as it finishes), then sends the calls and their results back in its
// own request shape, which voxpipe takes and hands the model.
func TestOfficialClientStreamsToolCalls(t *testing.T) {
	m := &toolRoundModel{}
	c := officialClient(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := officialParams(openai.UserMessage("Weather in Paris, and a 30 second timer?"))
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var finished []string
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatal("the accumulator refused a chunk")
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc.Name)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if len(acc.Choices) != 1 {
		t.Fatalf("choices %+v", acc.Choices)
	}
	ch := acc.Choices[0]
	calls := ch.Message.ToolCalls
	if ch.FinishReason != "tool_calls" || ch.Message.Content != "One moment." || len(calls) != 2 {
		t.Fatalf("accumulated %+v", ch)
	}
	if calls[0].ID != "call_w" || calls[0].Type != "function" || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` ||
		calls[1].ID != "call_t" || calls[1].Function.Name != "set_timer" || calls[1].Function.Arguments != `{"seconds":30}` {
		t.Fatalf("tool calls %+v", calls)
	}
	// The accumulator reports a call finished when the next chunk is not
	// one of its deltas: both are, the second at the finish chunk.
	if strings.Join(finished, ",") != "get_weather,set_timer" {
		t.Fatalf("JustFinishedToolCall reported %v", finished)
	}

	// The results go back as the client builds them.
	params.Messages = append(params.Messages, ch.Message.ToParam(),
		openai.ToolMessage(`{"sky":"clear"}`, calls[0].ID), openai.ToolMessage(`{"ok":true}`, calls[1].ID))
	stream = c.Chat.Completions.NewStreaming(ctx, params)
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if got := acc.Choices[0].Message.Content; got != `Results: call_w={"sky":"clear"}, call_t={"ok":true}` || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer after the results %q (%s)", got, acc.Choices[0].FinishReason)
	}
	m.mu.Lock()
	req := m.reqs[1]
	m.mu.Unlock()
	asst := req.Messages[1]
	if asst.Role != llm.RoleAssistant || asst.Content != "One moment." || len(asst.ToolCalls) != 2 || asst.ToolCalls[1] != (llm.ToolCall{ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`}) {
		t.Fatalf("the client's assistant message reached the model as %+v", asst)
	}
	if len(req.Tools) != 2 || string(req.Tools[1].Parameters) == "" {
		t.Fatalf("tools %+v", req.Tools)
	}
}

// TestOfficialClientWholeToolCalls: the same without streaming:
// message.tool_calls parse into the client's types.
func TestOfficialClientWholeToolCalls(t *testing.T) {
	c := officialClient(t, &toolRoundModel{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := officialParams(openai.UserMessage("Weather in Paris, and a 30 second timer?"))
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
		Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}}}
	resp, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	// A named choice: only that function's call comes back.
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("choice %+v", ch)
	}
	tc := ch.Message.ToolCalls[0].AsFunction()
	if tc.ID != "call_w" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("call %+v", tc)
	}
	// A malformed request gets the client's typed API error.
	params.Messages = append(params.Messages, openai.ToolMessage("orphan", "call_nobody"))
	_, err = c.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "unknown call id") {
		t.Fatalf("orphan tool result: %v", err)
	}
}
