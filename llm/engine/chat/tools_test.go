package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
)

var demoTools = []llm.Tool{
	{Name: "get_time", Description: "The current time."},
	{Name: "set_timer", Description: "Start a timer.", Parameters: json.RawMessage(
		`{"type":"object","properties":{"label":{"type":"string"},"duration":{"type":"string"}},"required":["duration"]}`)},
}

// A whole tool round as the demo model was trained on it (llm/train/tools.py's docstring).
func TestRenderCompactRound(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "You are voxpipe."},
		{Role: llm.RoleUser, Content: "set a timer for twenty five minutes"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "set_timer", Arguments: `{"duration":"twenty five minutes"}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", Content: "Timer set for 25 minutes."},
	}
	got, err := RenderWith(ChatML, msgs, Options{Tools: demoTools, ToolFormat: ToolsCompact}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are voxpipe.\n\nTools: get_time(), set_timer(duration, label?)<|im_end|>\n" +
		"<|im_start|>user\nset a timer for twenty five minutes<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"set_timer\", \"arguments\": {\"duration\": \"twenty five minutes\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\nTimer set for 25 minutes.\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// No system message: the tool line is one.
	got, _ = RenderWith(ChatML, msgs[1:2], Options{Tools: demoTools[:1], ToolFormat: ToolsCompact}, false)
	if want := "<|im_start|>system\nTools: get_time()<|im_end|>\n<|im_start|>user\nset a timer for twenty five minutes<|im_end|>\n"; got != want {
		t.Errorf("no system: %q", got)
	}
}

// Hermes/Qwen2.5: the tools as JSON lines in <tools></tools>, text before calls, results merged into one user turn.
func TestRenderHermes(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "Be brief."},
		{Role: llm.RoleUser, Content: "time and a timer"},
		{Role: llm.RoleAssistant, Content: "Sure.", ToolCalls: []llm.ToolCall{{ID: "a", Name: "get_time"}, {ID: "b", Name: "set_timer", Arguments: `{"duration": "5 minutes"}`}}},
		{Role: llm.RoleTool, ToolCallID: "a", Content: "It is 9:14 PM."},
		{Role: llm.RoleTool, ToolCallID: "b", Content: "Timer set for 5 minutes."},
	}
	got, err := RenderWith(ChatML, msgs, Options{Tools: demoTools}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_time", "description": "The current time.", "parameters": {"type": "object", "properties": {}}}}` + "\n" +
		`{"type": "function", "function": {"name": "set_timer", "description": "Start a timer.", "parameters": {"type": "object", "properties": {"label": {"type": "string"}, "duration": {"type": "string"}}, "required": ["duration"]}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\ntime and a timer<|im_end|>\n" +
		"<|im_start|>assistant\nSure.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"set_timer\", \"arguments\": {\"duration\": \"5 minutes\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\nIt is 9:14 PM.\n</tool_response>\n<tool_response>\nTimer set for 5 minutes.\n</tool_response><|im_end|>\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	// Prefix-stable with tools: the history renders as a prefix of history plus the next turn.
	short, _ := RenderWith(ChatML, msgs[:2], Options{Tools: demoTools}, true)
	if !strings.HasPrefix(got, short) {
		t.Error("history with the generation prompt is not a prefix of the next request's prompt")
	}
}

func TestRenderLlama3Tools(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: "Be brief."},
		{Role: llm.RoleUser, Content: "what time is it"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "get_time", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "a", Content: "It is 9:14 PM."},
	}
	got, err := RenderWith(Llama3, msgs, Options{Tools: demoTools[:1]}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
		"Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n" +
		"{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_time\",\n        \"description\": \"The current time.\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}\n\n" +
		"what time is it<|eot_id|>" +
		"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_time\", \"parameters\": {}}<|eot_id|>" +
		"<|start_header_id|>ipython<|end_header_id|>\n\nIt is 9:14 PM.<|eot_id|>" +
		"<|start_header_id|>assistant<|end_header_id|>\n\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestRenderToolErrors(t *testing.T) {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "hi"}}
	if _, err := RenderWith(Llama2, msgs, Options{Tools: demoTools}, true); !errors.Is(err, ErrNoTools) {
		t.Errorf("llama2 with tools: %v", err)
	}
	if _, err := RenderWith(ChatML, msgs, Options{Tools: demoTools, ToolFormat: "xml"}, true); !errors.Is(err, ErrToolFormat) {
		t.Errorf("unknown format: %v", err)
	}
	bad := []llm.Tool{{Name: "x", Parameters: json.RawMessage(`{"properties": [`)}}
	for _, f := range []string{ToolsTemplate, ToolsCompact} {
		if _, err := RenderWith(ChatML, msgs, Options{Tools: bad, ToolFormat: f}, true); !errors.Is(err, ErrToolSchema) {
			t.Errorf("format %q, bad schema: %v", f, err)
		}
	}
}

func TestSignature(t *testing.T) {
	for _, c := range []struct{ params, want string }{
		{"", "f()"},
		{`{"type":"object","properties":{}}`, "f()"},
		{`{"properties":{"b":{},"a":{},"c":{}},"required":["c","a","zz"]}`, "f(c, a, b?)"},
	} {
		got, err := Signature(llm.Tool{Name: "f", Parameters: json.RawMessage(c.params)})
		if err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.params, got, err, c.want)
		}
	}
}

func TestPyJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":[1,2],"c":"x, y: z"}`: `{"a": 1, "b": [1, 2], "c": "x, y: z"}`,
		` {"q": "say \"a,b\""} `:          `{"q": "say \"a,b\""}`,
		`not json`:                        `not json`,
	} {
		if got := PyJSON([]byte(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// feed pushes the pieces one by one, then flushes, and gathers the text and calls.
func feed(t *testing.T, p *CallParser, pieces ...string) (text string, calls []llm.ToolCall, err error) {
	t.Helper()
	var sb strings.Builder
	for _, s := range pieces {
		e, c, err := p.Push(s)
		sb.WriteString(e)
		calls = append(calls, c...)
		if err != nil {
			return sb.String(), calls, err
		}
	}
	e, c, err := p.Flush()
	sb.WriteString(e)
	return sb.String(), append(calls, c...), err
}

// split cuts s into pieces of n bytes, as tokens arrive.
func split(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func TestCallParserChatML(t *testing.T) {
	answer := "Okay, one moment.\n<tool_call>\n{\"name\": \"set_timer\", \"arguments\": {\"duration\": \"five minutes\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
	for _, n := range []int{1, 2, 3, 7, 1000} {
		text, calls, err := feed(t, NewCallParser(ChatML, nil), split(answer, n)...)
		if err != nil {
			t.Fatal(err)
		}
		if text != "Okay, one moment." {
			t.Errorf("pieces of %d: text %q", n, text)
		}
		want := []llm.ToolCall{{ID: "call_1", Name: "set_timer", Arguments: `{"duration": "five minutes"}`}, {ID: "call_2", Name: "get_time", Arguments: "{}"}}
		if len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
			t.Errorf("pieces of %d: calls %+v", n, calls)
		}
	}
}

// Text before a call streams at once; the call's text is never emitted.
func TestCallParserStreamsTextFirst(t *testing.T) {
	p := NewCallParser(ChatML, nil)
	e, _, _ := p.Push("Sure thing")
	if e != "Sure thing" {
		t.Errorf("first text held: %q", e)
	}
	e, _, _ = p.Push(". <tool")
	if e != "." {
		t.Errorf("a possible call start was emitted: %q", e)
	}
	e, c, _ := p.Push("_call>\n{\"name\": \"get_")
	if e != "" || c != nil {
		t.Errorf("inside a call: %q %v", e, c)
	}
	e, c, _ = p.Push("time\"}\n</tool_call>")
	if e != "" || len(c) != 1 || c[0].Name != "get_time" || c[0].Arguments != "{}" {
		t.Errorf("end of call: %q %+v", e, c)
	}
	// Text that only looks like a call start is emitted once it is not one.
	text, calls, err := feed(t, NewCallParser(ChatML, nil), "a <tool", "box> b  ", "\n")
	if text != "a <toolbox> b" || calls != nil || err != nil {
		t.Errorf("%q %v %v", text, calls, err)
	}
}

func TestCallParserMalformed(t *testing.T) {
	// Bad arguments JSON with a readable name: a call with the raw arguments (the executor reports bad_arguments).
	_, calls, err := feed(t, NewCallParser(ChatML, nil), "<tool_call>\n{\"name\": \"set_timer\", \"arguments\": {\"duration\": five}}\n</tool_call>")
	if err != nil || len(calls) != 1 || calls[0].Name != "set_timer" || calls[0].Arguments != `{"duration": five}` {
		t.Errorf("bad arguments: %+v %v", calls, err)
	}
	// Missing outer brace: the arguments are still whole.
	_, calls, err = feed(t, NewCallParser(ChatML, nil), "<tool_call>\n{\"name\": \"set_timer\", \"arguments\": {\"duration\": \"ten seconds\"}\n</tool_call>")
	if err != nil || len(calls) != 1 || calls[0].Arguments != `{"duration": "ten seconds"}` {
		t.Errorf("missing brace: %+v %v", calls, err)
	}
	// Answer cut inside a call (max tokens): what there is.
	_, calls, err = feed(t, NewCallParser(ChatML, nil), "<tool_call>\n{\"name\": \"cancel_timer\", \"arguments\": {}}")
	if err != nil || len(calls) != 1 || calls[0].Name != "cancel_timer" {
		t.Errorf("cut call: %+v %v", calls, err)
	}
	// Arguments as a JSON string holding the object.
	_, calls, _ = feed(t, NewCallParser(ChatML, nil), `<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>`)
	if len(calls) != 1 || calls[0].Arguments != `{"a": 1}` {
		t.Errorf("string arguments: %+v", calls)
	}
	// No name: an error.
	text, _, err := feed(t, NewCallParser(ChatML, nil), "Hm. <tool_call>\nset a timer\n</tool_call>")
	if !errors.Is(err, ErrBadCall) || text != "Hm." {
		t.Errorf("no name: %q %v", text, err)
	}
}

func TestCallParserLlama3(t *testing.T) {
	_, calls, err := feed(t, NewCallParser(Llama3, nil), split(` {"name": "get_time", "parameters": {}}`, 3)...)
	if err != nil || len(calls) != 1 || calls[0].Name != "get_time" || calls[0].Arguments != "{}" {
		t.Errorf("call: %+v %v", calls, err)
	}
	_, calls, _ = feed(t, NewCallParser(Llama3, nil), "<|python_tag|>", `{"name": "f", "parameters": {"x": 1}}`)
	if len(calls) != 1 || calls[0].Arguments != `{"x": 1}` {
		t.Errorf("python tag: %+v", calls)
	}
	text, calls, _ := feed(t, NewCallParser(Llama3, nil), "It is ", "late.")
	if text != "It is late." || calls != nil {
		t.Errorf("text: %q %+v", text, calls)
	}
	text, calls, err = feed(t, NewCallParser(Llama3, nil), "{curly} text")
	if text != "{curly} text" || calls != nil || err != nil {
		t.Errorf("text in braces: %q %+v %v", text, calls, err)
	}
	if NewCallParser(Raw, nil) != nil || NewCallParser(Llama2, nil) != nil {
		t.Error("raw and llama2 have no call convention")
	}
}
