package ark

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// arkCallDelta is one streamed tool-call delta as Ark sends it: role and
// an empty content in every delta, type repeated, the id and name in the
// first delta of a call only.
func arkCallDelta(index int, id, name, args string) string {
	fn := map[string]string{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	tc := map[string]any{"index": index, "type": "function", "function": fn}
	if id != "" {
		tc["id"] = id
	}
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{tc}})
	return string(b)
}

func newToolFake(t *testing.T, deltas []string, finish string) (*fakeArk, *Client) {
	t.Helper()
	f := &fakeArk{key: "sk-test-secret", words: []string{"Let me ", "check."}, deltas: deltas, finish: finish}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{Model: "ep-1", BaseURL: srv.URL + "/api/v3", APIKey: f.key, TimeoutFirstToken: 2 * time.Second, TimeoutIdle: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func toolRequest() llm.Request {
	return llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Set a timer."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "set_timer", Arguments: `{"seconds":60}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Content: "ok"},
			{Role: llm.RoleUser, Content: "Weather in Paris, and a 30 s timer?"},
		},
		Tools: []llm.Tool{
			{Name: "get_weather", Description: "Weather in a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
			{Name: "set_timer"},
		},
		ToolChoice: llm.ToolChoiceRequired,
	}
}

type arkTurn struct {
	text        string
	calls       []llm.ToolCall
	beforeDone  int
	textAtFirst string // the text passed on before the first call
	err         error
}

func streamTools(t *testing.T, c *Client, req llm.Request) arkTurn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := c.Stream(ctx, req)
	if err != nil {
		return arkTurn{err: err}
	}
	var r arkTurn
	for tok := range toks {
		if len(tok.ToolCalls) > 0 && len(r.calls) == 0 {
			r.textAtFirst = r.text
		}
		r.text += tok.Text
		r.calls = append(r.calls, tok.ToolCalls...)
		if !tok.Done {
			r.beforeDone += len(tok.ToolCalls)
		}
		if tok.Err != nil {
			r.err = tok.Err
		}
	}
	return r
}

// TestToolCalls: Ark's streamed function calls, two interleaved with split
// arguments, come whole and in order after the text before them; the
// request carries the tools, the choice and the tool history in Ark's
// shape.
func TestToolCalls(t *testing.T) {
	f, c := newToolFake(t, []string{
		arkCallDelta(0, "call_w", "get_weather", ""),
		arkCallDelta(0, "", "", `{"city":`),
		arkCallDelta(1, "call_t", "set_timer", `{"sec`),
		arkCallDelta(0, "", "", `"Paris"}`),
		arkCallDelta(1, "", "", `onds":30}`),
	}, "tool_calls")
	r := streamTools(t, c, toolRequest())
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`}}
	if len(r.calls) != 2 || r.calls[0] != want[0] || r.calls[1] != want[1] {
		t.Fatalf("calls %+v", r.calls)
	}
	if r.text != "Let me check." || r.textAtFirst != "Let me check." || r.beforeDone != 2 {
		t.Fatalf("text %q (%q before the first call), %d calls before Done", r.text, r.textAtFirst, r.beforeDone)
	}

	body := f.lastBody.Load().(map[string]any)
	tools, _ := body["tools"].([]any)
	t0, _ := tools[0].(map[string]any)
	fn, _ := t0["function"].(map[string]any)
	params, _ := fn["parameters"].(map[string]any)
	t1, _ := tools[1].(map[string]any)
	fn1, _ := t1["function"].(map[string]any)
	params1, _ := fn1["parameters"].(map[string]any)
	if len(tools) != 2 || t0["type"] != "function" || fn["name"] != "get_weather" || fn["description"] != "Weather in a city." || params["type"] != "object" ||
		params1["type"] != "object" || body["tool_choice"] != "required" {
		t.Fatalf("tools %v, tool_choice %v", body["tools"], body["tool_choice"])
	}
	msgs, _ := body["messages"].([]any)
	asst, _ := msgs[1].(map[string]any)
	calls, _ := asst["tool_calls"].([]any)
	call, _ := calls[0].(map[string]any)
	cfn, _ := call["function"].(map[string]any)
	if content, ok := asst["content"]; !ok || content != nil || call["id"] != "call_0" || call["type"] != "function" || cfn["name"] != "set_timer" || cfn["arguments"] != `{"seconds":60}` {
		t.Fatalf("assistant message %v", asst)
	}
	if res, _ := msgs[2].(map[string]any); res["role"] != "tool" || res["tool_call_id"] != "call_0" || res["content"] != "ok" {
		t.Fatalf("tool message %v", res)
	}
}

// TestToolCallWholeInOneDelta: a model that sends a call in one delta
// (id, name and all its arguments) and no finish_reason for it still has
// it passed on, at the latest with Done.
func TestToolCallWholeInOneDelta(t *testing.T) {
	_, c := newToolFake(t, []string{arkCallDelta(0, "call_1", "set_timer", `{"seconds":5}`)}, "stop")
	r := streamTools(t, c, toolRequest())
	if r.err != nil || len(r.calls) != 1 || r.calls[0] != (llm.ToolCall{ID: "call_1", Name: "set_timer", Arguments: `{"seconds":5}`}) {
		t.Fatalf("got %+v", r)
	}
}

func TestMalformedToolCall(t *testing.T) {
	_, c := newToolFake(t, []string{arkCallDelta(0, "a", "", `{}`)}, "tool_calls")
	r := streamTools(t, c, toolRequest())
	if r.err == nil || !strings.HasPrefix(r.err.Error(), "ark: malformed tool call") || !strings.Contains(r.err.Error(), "tool call 0: no function name") || len(r.calls) != 0 {
		t.Fatalf("got %+v", r)
	}
	_, c = newToolFake(t, nil, "")
	bad := toolRequest()
	bad.Tools[1].Parameters = json.RawMessage(`[]`)
	if _, err := c.Stream(context.Background(), bad); !errors.Is(err, llm.ErrInvalid) || !strings.HasPrefix(err.Error(), "ark: ") {
		t.Fatalf("bad parameters: %v", err)
	}
}
