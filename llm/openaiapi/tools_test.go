package openaiapi

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

// tokenModel streams a fixed list of tokens (the last one gets Done if
// none has it) and records the requests.
type tokenModel struct {
	tokens []llm.Token
	mu     sync.Mutex
	reqs   []llm.Request
}

func (m *tokenModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		for i, tok := range m.tokens {
			if i == len(m.tokens)-1 && tok.Err == nil {
				tok.Done = true
				if tok.Usage == nil {
					tok.Usage = &llm.Usage{PromptTokens: 9, CompletionTokens: 4}
				}
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

func (m *tokenModel) request(t *testing.T, i int) llm.Request {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.reqs) {
		t.Fatalf("the model got %d requests", len(m.reqs))
	}
	return m.reqs[i]
}

// callingModel answers "Checking." then a weather call, a call to a tool
// no request offers, and (on the Done token) a timer call without id or
// arguments.
func callingModel() *tokenModel {
	return &tokenModel{tokens: []llm.Token{
		{Text: "Checking."},
		{ToolCalls: []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{ToolCalls: []llm.ToolCall{{ID: "call_x", Name: "launch_rockets", Arguments: `{}`}}},
		{ToolCalls: []llm.ToolCall{{Name: "set_timer"}}},
	}}
}

const toolsJSON = `"tools":[` +
	`{"type":"function","function":{"name":"get_weather","description":"Weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},` +
	`{"type":"function","function":{"name":"set_timer","strict":true}}]`

const askWeather = `{"messages":[{"role":"user","content":"Weather in Paris? And a timer."}],` + toolsJSON

type toolChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string        `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func TestToolCallsStreamed(t *testing.T) {
	m := callingModel()
	srv := newServer(t, m)
	resp := post(t, srv, askWeather+`,"tool_choice":"auto","stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, decodeError(t, resp))
	}
	events := readEvents(t, resp.Body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("last event %q", events[len(events)-1])
	}
	var text string
	var calls []chatToolCall
	var finish string
	for _, ev := range events[:len(events)-1] {
		var c toolChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("event %s: %v", ev, err)
		}
		ch := c.Choices[0]
		if ch.Delta.Content != nil {
			text += *ch.Delta.Content
		}
		if len(ch.Delta.ToolCalls) > 0 && len(calls) == 0 && text != "Checking." {
			t.Fatal("a call came before the text before it")
		}
		calls = append(calls, ch.Delta.ToolCalls...)
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if text != "Checking." || finish != "tool_calls" {
		t.Fatalf("text %q finish %q", text, finish)
	}
	// launch_rockets was not offered: dropped. The timer call got an id
	// and "{}"; indexes count the calls sent.
	if len(calls) != 2 {
		t.Fatalf("calls %+v", calls)
	}
	w, tm := calls[0], calls[1]
	if w.Index == nil || *w.Index != 0 || w.ID != "call_w" || w.Type != "function" || w.Function.Name != "get_weather" || w.Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("call 0 %+v", w)
	}
	if tm.Index == nil || *tm.Index != 1 || !strings.HasPrefix(tm.ID, "call_") || tm.Function.Name != "set_timer" || tm.Function.Arguments != "{}" {
		t.Fatalf("call 1 %+v", tm)
	}
	req := m.request(t, 0)
	if len(req.Tools) != 2 || req.ToolChoice != llm.ToolChoiceAuto || req.Tools[0].Name != "get_weather" || req.Tools[0].Description != "Weather in a city." ||
		!json.Valid(req.Tools[0].Parameters) || req.Tools[1].Parameters != nil {
		t.Fatalf("tools reached the model as %+v / %q", req.Tools, req.ToolChoice)
	}
}

type toolCompletion struct {
	Choices []struct {
		Message struct {
			Content   *string           `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

func TestToolCallsWhole(t *testing.T) {
	srv := newServer(t, callingModel())
	resp := post(t, srv, askWeather+`}`)
	var body toolCompletion
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Choices) != 1 {
		t.Fatalf("%v %+v", err, body)
	}
	ch := body.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Content == nil || *ch.Message.Content != "Checking." || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice %+v", ch)
	}
	var c map[string]any
	_ = json.Unmarshal(ch.Message.ToolCalls[0], &c)
	fn, _ := c["function"].(map[string]any)
	if _, has := c["index"]; has || c["id"] != "call_w" || c["type"] != "function" || fn["name"] != "get_weather" || fn["arguments"] != `{"city":"Paris"}` {
		t.Fatalf("tool call %s", ch.Message.ToolCalls[0])
	}

	// Only calls, no text: content is null, as OpenAI answers.
	srv = newServer(t, &tokenModel{tokens: []llm.Token{{ToolCalls: []llm.ToolCall{{ID: "a", Name: "set_timer", Arguments: `{"seconds":3}`}}}}})
	resp = post(t, srv, askWeather+`}`)
	body = toolCompletion{}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Choices[0].Message.Content != nil || len(body.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("%v %+v", err, body)
	}
}

// TestToolChoiceNarrowsWhatComesBack: a named function reaches the model as
// that tool alone, required, and a call to another offered tool is dropped;
// under "none" every call is dropped and the answer ends with "stop".
func TestToolChoiceNarrowsWhatComesBack(t *testing.T) {
	m := callingModel()
	srv := newServer(t, m)
	resp := post(t, srv, askWeather+`,"tool_choice":{"type":"function","function":{"name":"set_timer"}}}`)
	var body toolCompletion
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if n := len(body.Choices[0].Message.ToolCalls); n != 1 || !strings.Contains(string(body.Choices[0].Message.ToolCalls[0]), `"set_timer"`) {
		t.Fatalf("named choice returned %s", body.Choices[0].Message.ToolCalls)
	}
	if req := m.request(t, 0); len(req.Tools) != 1 || req.Tools[0].Name != "set_timer" || req.ToolChoice != llm.ToolChoiceRequired {
		t.Fatalf("named choice reached the model as %+v / %q", req.Tools, req.ToolChoice)
	}

	resp = post(t, srv, askWeather+`,"tool_choice":"none"}`)
	body = toolCompletion{}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if ch := body.Choices[0]; len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" || *ch.Message.Content != "Checking." {
		t.Fatalf("tool_choice none: %+v", ch)
	}
	if req := m.request(t, 1); req.ToolChoice != llm.ToolChoiceNone || len(req.Tools) != 2 {
		t.Fatalf("none reached the model as %+v / %q", req.Tools, req.ToolChoice)
	}

	// No tools at all: whatever the model calls is dropped.
	resp = post(t, srv, `{"messages":[{"role":"user","content":"hi"}]}`)
	body = toolCompletion{}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Choices[0].Message.ToolCalls) != 0 || body.Choices[0].FinishReason != "stop" {
		t.Fatalf("no tools: %v %+v", err, body)
	}
}

func TestToolHistoryMapped(t *testing.T) {
	m := &tokenModel{tokens: []llm.Token{{Text: "It is sunny."}}}
	srv := newServer(t, m)
	resp := post(t, srv, `{"messages":[{"role":"user","content":"Weather?"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"c2","type":"function","function":{"name":"set_timer","arguments":"{}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"set"}]}],`+toolsJSON+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, decodeError(t, resp))
	}
	msgs := m.request(t, 0).Messages
	if len(msgs) != 4 || msgs[1].Role != llm.RoleAssistant || msgs[1].Content != "" || len(msgs[1].ToolCalls) != 2 ||
		msgs[1].ToolCalls[0] != (llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: `{"city":"Paris"}`}) ||
		msgs[2].Role != llm.RoleTool || msgs[2].ToolCallID != "c1" || msgs[2].Content != "sunny" || msgs[3].Content != "set" || msgs[3].ToolCallID != "c2" {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestToolRequestErrors(t *testing.T) {
	m := &tokenModel{tokens: []llm.Token{{Text: "x"}}}
	srv := newServer(t, m)
	user := `{"messages":[{"role":"user","content":"x"}],`
	fn := func(f string) string { return user + `"tools":[{"type":"function","function":` + f + `}]}` }
	many := make([]string, DefaultMaxTools+1)
	for i := range many {
		many[i] = `{"type":"function","function":{"name":"f` + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + `"}}`
	}
	for _, c := range []struct{ body, param, want string }{
		{fn(`{"name":"set volume"}`), "tools[0].function.name", "must match"},
		{fn(`{"name":"` + strings.Repeat("a", 65) + `"}`), "tools[0].function.name", "must match"},
		{fn(`{"name":""}`), "tools[0].function.name", "must match"},
		{fn(`{"name":"f","parameters":[1]}`), "tools[0].function.parameters", "JSON Schema object"},
		{fn(`{"name":"f","parameters":"x"}`), "tools[0].function.parameters", "JSON Schema object"},
		{fn(`{"name":"f","parameters":{"type":"string"}}`), "tools[0].function.parameters", `"type": "object"`},
		{fn(`{"name":"f","parameters":{"type":"object","properties":[]}}`), "tools[0].function.parameters", "properties must be an object"},
		{fn(`{"name":"f","description":"` + strings.Repeat("d", MaxToolBytes+1) + `"}`), "tools[0]", "at most"},
		{user + `"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}`, "tools[1].function.name", "listed twice"},
		{user + `"tools":[{"type":"code_interpreter"}]}`, "tools[0].type", "function only"},
		{user + `"tools":[{"type":"function"}]}`, "tools[0].function", "missing"},
		{user + `"tools":[` + strings.Join(many, ",") + `]}`, "tools", "at most 128"},
		{user + `"tool_choice":"required"}`, "tool_choice", "tools is empty"},
		{user + `"tool_choice":"sometimes"}`, "tool_choice", "not supported"},
		{user + `"tool_choice":{"type":"function","function":{"name":"g"}},` + toolsJSON + `}`, "tool_choice", "not in tools"},
		{user + `"tool_choice":{"type":"function"},` + toolsJSON + `}`, "tool_choice", "must be"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}`, "messages", "unknown call id"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"r"}]}`, "messages[1].tool_call_id", "missing"},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[{"id":"a","function":{"name":"f"}}]}]}`, "messages[0].tool_calls", "only assistant"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].id", "missing"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name", "missing"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"custom","function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].type", "function only"},
	} {
		resp := post(t, srv, c.body)
		if resp.StatusCode != 400 {
			t.Errorf("%.100s: status %d, want 400", c.body, resp.StatusCode)
			continue
		}
		e := decodeError(t, resp)
		if e.Error.Param == nil || *e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.want) || e.Error.Type != "invalid_request_error" {
			t.Errorf("%.100s: param %v message %q, want %q / %q", c.body, e.Error.Param, e.Error.Message, c.param, c.want)
		}
	}
	if len(m.reqs) != 0 {
		t.Fatalf("%d refused requests reached the model", len(m.reqs))
	}
	// Parameters {} and no parameters are both a tool without arguments.
	if resp := post(t, srv, fn(`{"name":"f","parameters":{}}`)); resp.StatusCode != 200 {
		t.Fatalf("parameters {}: %d", resp.StatusCode)
	}
}
