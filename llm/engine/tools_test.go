package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

var testTools = []llm.Tool{
	{Name: "get_time"},
	{Name: "set_timer", Parameters: json.RawMessage(`{"type":"object","properties":{"duration":{"type":"string"},"label":{"type":"string"}},"required":["duration"]}`)},
	{Name: "cancel_timer"},
}

func TestToolRequestChecks(t *testing.T) {
	e := openTiny(t, bigTiny(), func(c *Config) { c.ChatTemplate = chat.ChatML })
	user := []llm.Message{{Role: llm.RoleUser, Content: "hello"}}
	for name, req := range map[string]llm.Request{
		"unknown tool_choice":  {Messages: user, Tools: testTools, ToolChoice: "auto-ish"},
		"required, no tools":   {Messages: user, ToolChoice: llm.ToolChoiceRequired},
		"a tool with no name":  {Messages: user, Tools: []llm.Tool{{Name: ""}}},
		"two tools, same name": {Messages: user, Tools: []llm.Tool{{Name: "a"}, {Name: "a"}}},
		"bad schema":           {Messages: user, Tools: []llm.Tool{{Name: "a", Parameters: json.RawMessage(`[`)}}},
		"result for no call": {Messages: append(user, llm.Message{Role: llm.RoleTool, ToolCallID: "call_9", Content: "x"}),
			Tools: testTools},
	} {
		if _, err := e.Stream(context.Background(), req); !errors.Is(err, llm.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// Prefill checks them too.
	if _, err := e.Prefill(context.Background(), llm.Request{Messages: user, Conversation: "c", Tools: testTools, ToolChoice: "x"}); !errors.Is(err, llm.ErrInvalid) {
		t.Errorf("prefill: %v", err)
	}
}

// The prompt lists the tools in the model's format; "none" lists none.
func TestToolPromptRendering(t *testing.T) {
	for _, c := range []struct {
		format, choice, want, not string
	}{
		{chat.ToolsCompact, "", "Tools: get_time(), set_timer(duration, label?), cancel_timer()", "<tools>"},
		{chat.ToolsTemplate, "", "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\"", "Tools: "},
		{chat.ToolsCompact, llm.ToolChoiceNone, "hello", "get_time"},
	} {
		e := openTiny(t, bigTiny(), func(cfg *Config) { cfg.ChatTemplate = chat.ChatML; cfg.ToolFormat = c.format })
		req := llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "Be brief."}, {Role: llm.RoleUser, Content: "hello"}}, Tools: testTools, ToolChoice: c.choice}
		tp, err := e.toolPrompt(&req)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := e.renderPrompt(req.Messages, tp, 16)
		if err != nil {
			t.Fatal(err)
		}
		text := e.tok.Decode(ids)
		if !strings.Contains(text, c.want) || strings.Contains(text, c.not) {
			t.Errorf("format %q choice %q: prompt %q", c.format, c.choice, text)
		}
	}
	if _, err := Open(Config{ModelPath: writeTiny(t, defaultTiny("llama", gguf.TypeF32)), ToolFormat: "yaml"}); !errors.Is(err, chat.ErrToolFormat) {
		t.Errorf("unknown tool format: %v", err)
	}
}

// ToolChoice required opens the call in the prompt: whatever the (random)
// model writes is read as a call, never spoken, and the stream ends with a
// call or an unreadable-call error.
func TestToolChoiceRequired(t *testing.T) {
	e := openTiny(t, bigTiny(), func(c *Config) { c.ChatTemplate = chat.ChatML })
	ch, err := e.Stream(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}},
		Tools: testTools, ToolChoice: llm.ToolChoiceRequired, MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	var calls []llm.ToolCall
	var terr error
	done := false
	for tk := range ch {
		text += tk.Text
		calls = append(calls, tk.ToolCalls...)
		if tk.Err != nil {
			terr = tk.Err
		}
		done = done || tk.Done
	}
	switch {
	case text != "":
		t.Errorf("the call's text was spoken: %q", text)
	case terr != nil && !errors.Is(terr, chat.ErrBadCall):
		t.Errorf("error %v", terr)
	case terr == nil && (!done || len(calls) != 1 || !strings.HasPrefix(calls[0].ID, "call_")):
		t.Errorf("done %v, calls %+v", done, calls)
	}
}

// The demo model calls its tools, also with prompt lookup (speculation keeps greedy output).
func TestDemoToolCalls(t *testing.T) {
	target, _ := demoModels(t)
	if f, err := gguf.Open(target); err == nil {
		format, _ := f.String("voxpipe.tool_format")
		f.Close()
		if format != chat.ToolsCompact {
			t.Skip("requires a demo model trained for tools (no voxpipe.tool_format compact key in " + target + ")")
		}
	}
	if testing.Short() || os.Getenv("VOXPIPE_SKIP_DEMO") != "" {
		t.Skip("-short or VOXPIPE_SKIP_DEMO: the demo model test is skipped")
	}
	for _, lookup := range []bool{false, true} {
		e, err := Open(Config{ModelPath: target, Threads: 2, RepeatPenalty: 1.1, PromptLookup: lookup})
		if err != nil {
			t.Fatal(err)
		}
		sys := llm.Message{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."}
		ask := func(msgs ...llm.Message) (string, []llm.ToolCall) {
			ch, err := e.Stream(context.Background(), llm.Request{Messages: append([]llm.Message{sys}, msgs...), Tools: testTools, MaxTokens: 48})
			if err != nil {
				t.Fatal(err)
			}
			var text string
			var calls []llm.ToolCall
			for tk := range ch {
				if tk.Err != nil {
					t.Fatal(tk.Err)
				}
				text += tk.Text
				calls = append(calls, tk.ToolCalls...)
			}
			return text, calls
		}
		req := llm.Message{Role: llm.RoleUser, Content: "set a timer for five minutes"}
		text, calls := ask(req)
		if len(calls) != 1 || calls[0].Name != "set_timer" || calls[0].Arguments != `{"duration": "five minutes"}` || strings.Contains(text, "tool_call") {
			t.Fatalf("lookup %v: %q %+v", lookup, text, calls)
		}
		answer, more := ask(req, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls},
			llm.Message{Role: llm.RoleTool, ToolCallID: calls[0].ID, Content: "Timer set for 5 minutes."})
		if len(more) != 0 || !strings.Contains(answer, "5 minutes") {
			t.Errorf("lookup %v: after the result %q %+v", lookup, answer, more)
		}
		if text, calls := ask(llm.Message{Role: llm.RoleUser, Content: "what is a volcano"}); len(calls) != 0 {
			t.Errorf("lookup %v: an ordinary question called %+v (%q)", lookup, calls, text)
		}
		e.Close()
	}
}

// bigTiny is the tiny model with room for a tool block in its prompt (its tokens are mostly bytes).
func bigTiny() tinySpec {
	s := defaultTiny("llama", gguf.TypeF32)
	s.ctx = 4096
	return s
}
