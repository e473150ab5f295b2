package openai

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

var weatherTool = llm.Tool{Name: "get_weather", Description: "The weather in a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

var timerTool = llm.Tool{Name: "set_timer", Parameters: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"integer"}}}`)}

// toolTurn is what one streamed answer delivered.
type toolTurn struct {
	text   string
	calls  []llm.ToolCall
	onDone int // how many calls came on the Done token
	err    error
}

// askTools streams req and gathers its text and calls.
func askTools(t *testing.T, m llm.Model, req llm.Request) *toolTurn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := m.Stream(ctx, req)
	if err != nil {
		return &toolTurn{err: err}
	}
	tt := &toolTurn{}
	var sb strings.Builder
	for tok := range toks {
		sb.WriteString(tok.Text)
		tt.calls = append(tt.calls, tok.ToolCalls...)
		if tok.Done {
			tt.onDone = len(tok.ToolCalls)
		}
		if tok.Err != nil {
			tt.err = tok.Err
		}
	}
	tt.text = sb.String()
	return tt
}

func toolRequest() llm.Request {
	return llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "You are voxpipe."},
			{Role: llm.RoleUser, Content: "Set a timer."},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "set_timer", Arguments: `{"seconds":60}`}}},
			{Role: llm.RoleTool, ToolCallID: "call_0", Content: `{"ok":true}`},
			{Role: llm.RoleAssistant, Content: "Done."},
			{Role: llm.RoleUser, Content: "Weather in Paris, and a 30 s timer?"},
		},
		Tools:      []llm.Tool{weatherTool, timerTool},
		ToolChoice: llm.ToolChoiceRequired,
	}
}

// TestToolCallsStreamed: text before the calls is passed on at once (the
// server holds the calls until the client has it), three calls are
// interleaved with their arguments split over many deltas (one to a tool
// the request did not list, passed on for the caller to refuse), and each
// call arrives whole, in index order, the first before the answer ends.
func TestToolCallsStreamed(t *testing.T) {
	hold := make(chan struct{})
	f := newFakeServer(t, step{
		words: []string{"Let me ", "check."},
		hold:  hold,
		deltas: []string{
			`{"tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"get_weather","arguments":""}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`,
			`{"tool_calls":[{"index":1,"id":"call_t","type":"function","function":{"name":"set_timer","arguments":"{\"sec"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}`,
			`{"tool_calls":[{"index":2,"id":"call_x","type":"function","function":{"name":"launch_rockets","arguments":"{}"}}]}`,
			`{"tool_calls":[{"index":1,"function":{"arguments":"onds\":"}}]}`,
			`{"tool_calls":[{"index":1,"function":{"arguments":"30}"}}]}`,
		},
		finish: "tool_calls",
	})
	c := client(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := c.Stream(ctx, toolRequest())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var calls []llm.ToolCall
	var before []llm.ToolCall // calls that came before the Done token
	for tok := range toks {
		if tok.Err != nil {
			t.Fatal(tok.Err)
		}
		text.WriteString(tok.Text)
		if tok.Text != "" && hold != nil {
			close(hold) // the calls go out only after the text came through
			hold = nil
		}
		calls = append(calls, tok.ToolCalls...)
		if !tok.Done {
			before = append(before, tok.ToolCalls...)
		}
	}
	if text.String() != "Let me check." {
		t.Fatalf("text %q", text.String())
	}
	want := []llm.ToolCall{
		{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`},
		{ID: "call_t", Name: "set_timer", Arguments: `{"seconds":30}`},
		{ID: "call_x", Name: "launch_rockets", Arguments: `{}`},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v", calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("call %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
	if len(before) == 0 || before[0] != want[0] {
		t.Fatalf("calls before Done %+v: the first call was complete mid-stream", before)
	}

	// The request: tools in OpenAI's shape, tool_choice, the history's
	// call (content null) and its result.
	b := f.body(0)
	tools, _ := b["tools"].([]any)
	if len(tools) != 2 || b["tool_choice"] != "required" {
		t.Fatalf("tools %v, tool_choice %v", b["tools"], b["tool_choice"])
	}
	tool0, _ := tools[0].(map[string]any)
	fn, _ := tool0["function"].(map[string]any)
	params, _ := fn["parameters"].(map[string]any)
	if tool0["type"] != "function" || fn["name"] != "get_weather" || fn["description"] != "The weather in a city." || params["type"] != "object" {
		t.Fatalf("tool %v", tool0)
	}
	msgs, _ := b["messages"].([]any)
	asst, _ := msgs[2].(map[string]any)
	res, _ := msgs[3].(map[string]any)
	tc, _ := asst["tool_calls"].([]any)
	call0, _ := tc[0].(map[string]any)
	cfn, _ := call0["function"].(map[string]any)
	if c, ok := asst["content"]; !ok || c != nil || len(tc) != 1 || call0["id"] != "call_0" || call0["type"] != "function" ||
		cfn["name"] != "set_timer" || cfn["arguments"] != `{"seconds":60}` {
		t.Fatalf("assistant message %v", asst)
	}
	if res["role"] != "tool" || res["tool_call_id"] != "call_0" || res["content"] != `{"ok":true}` {
		t.Fatalf("tool message %v", res)
	}
	if last, _ := msgs[4].(map[string]any); last["content"] != "Done." || last["tool_calls"] != nil {
		t.Fatalf("plain assistant message %v", last)
	}
}

// TestToolCallsWhole: a whole answer's message.tool_calls (NoStream, or a
// server that does not stream) come whole, with the text.
func TestToolCallsWhole(t *testing.T) {
	msg := `"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"set_timer","arguments":"{\"seconds\":5}"}}]`
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		st   step
	}{
		{"configured", func(c *Config) { c.NoStream = true }, step{words: []string{"Sure."}, message: msg, finish: "tool_calls"}},
		{"server does not stream", nil, step{whole: true, message: msg, finish: "tool_calls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.st)
			r := askTools(t, client(t, f, tc.mod), toolRequest())
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.calls) != 2 || r.calls[0] != (llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}) || r.calls[1].ID != "c2" {
				t.Fatalf("calls %+v", r.calls)
			}
			if want := strings.Join(tc.st.words, ""); r.text != want {
				t.Fatalf("text %q, want %q", r.text, want)
			}
		})
	}
}

// TestToolCallsWithoutFinishReason: a server that never says
// finish_reason has its calls delivered on the Done token, the unfinished
// arguments as they came.
func TestToolCallsWithoutFinishReason(t *testing.T) {
	f := newFakeServer(t, step{
		deltas: []string{
			`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"set_timer","arguments":"{\"seconds\":"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"12"}}]}`,
		},
		finish: "-",
	})
	r := askTools(t, client(t, f, nil), toolRequest())
	if r.err != nil || r.onDone != 1 || len(r.calls) != 1 || r.calls[0] != (llm.ToolCall{ID: "c1", Name: "set_timer", Arguments: `{"seconds":12`}) {
		t.Fatalf("got %+v", r)
	}
}

// TestMalformedToolDeltas end the answer with an error that says what was
// wrong, and are not retried (the server would send the same).
func TestMalformedToolDeltas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deltas []string
		want   string
	}{
		{"id changes", []string{
			`{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}`,
			`{"tool_calls":[{"index":0,"id":"b","function":{"arguments":"}"}}]}`,
		}, `tool call 0: id changed from "a" to "b"`},
		{"no name", []string{`{"tool_calls":[{"index":3,"id":"a","function":{"arguments":"{}"}}]}`}, "tool call 3: no function name"},
		{"bad index", []string{`{"tool_calls":[{"index":-2,"id":"a","function":{"name":"f"}}]}`}, "index out of range"},
		{"arguments not a string", []string{`{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":{"x":1}}}]}`}, "bad event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, step{deltas: tc.deltas, finish: "tool_calls"})
			r := askTools(t, client(t, f, nil), toolRequest())
			var e *Error
			if !errors.As(r.err, &e) || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", r.err, tc.want)
			}
			if len(r.calls) != 0 || f.requests() != 1 {
				t.Fatalf("calls %+v after %d requests", r.calls, f.requests())
			}
		})
	}
}

// TestToolDeltasFeedTheIdleWatch: argument deltas are tokens for the
// timeouts, though none is passed on until the call is whole: a call whose
// deltas take longer than the first-token limit is not cut, and a server
// that goes quiet mid-call is cut by the idle limit.
func TestToolDeltasFeedTheIdleWatch(t *testing.T) {
	var slow []string
	slow = append(slow, `{"tool_calls":[{"index":0,"id":"a","function":{"name":"set_timer","arguments":"{"}}]}`)
	for range 6 {
		slow = append(slow, `{"tool_calls":[{"index":0,"function":{"arguments":" "}}]}`)
	}
	slow = append(slow, `{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`)
	limits := func(c *Config) {
		c.TimeoutFirstToken, c.TimeoutIdle, c.Retries = 250*time.Millisecond, 200*time.Millisecond, 0
	}
	f := newFakeServer(t, step{deltas: slow, deltaGap: 60 * time.Millisecond, finish: "tool_calls"})
	if r := askTools(t, client(t, f, limits), toolRequest()); r.err != nil || len(r.calls) != 1 {
		t.Fatalf("slow call: %+v", r)
	}
	f = newFakeServer(t, step{deltas: slow, stallDeltas: 2, finish: "tool_calls"})
	start := time.Now()
	r := askTools(t, client(t, f, limits), toolRequest())
	if r.err == nil || !strings.Contains(r.err.Error(), "timed out waiting for the next token") || len(r.calls) != 0 {
		t.Fatalf("quiet server mid-call: %+v", r)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cut after %v", d)
	}
}

func TestInvalidToolsRefusedBeforeSending(t *testing.T) {
	f := newFakeServer(t, step{words: words})
	c := client(t, f, nil)
	for _, req := range []llm.Request{
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`"string"`)}}},
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}, {Role: llm.RoleTool, ToolCallID: "nope", Content: "x"}}},
		{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, ToolChoice: llm.ToolChoiceRequired},
	} {
		if _, err := c.Stream(context.Background(), req); !errors.Is(err, llm.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", req, err)
		}
	}
	if f.requests() != 0 {
		t.Fatalf("%d requests sent", f.requests())
	}
	// No tools: neither tools nor tool_choice is sent.
	if r := ask(t, c); r.err != nil {
		t.Fatal(r.err)
	}
	if b := f.body(0); b["tools"] != nil || b["tool_choice"] != nil {
		t.Fatalf("request without tools sent %v / %v", b["tools"], b["tool_choice"])
	}
}
