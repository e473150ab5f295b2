package openaiapi

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openai/toolcall"
)

// Tool limits: OpenAI allows 128 tools a request; a tool's description and
// parameters schema together are at most MaxToolBytes (they all go into
// the prompt, for every request of the conversation).
const (
	DefaultMaxTools = 128
	MaxToolBytes    = 32 << 10
)

// chatTool is one entry of the request's "tools".
type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"` // accepted; the schema is checked by the caller, not enforced in decoding
	} `json:"function"`
}

// chatToolCall is a call of an assistant message, in the request or the
// answer.
type chatToolCall struct {
	Index    *int   `json:"index,omitempty"` // streamed deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// parseTools checks the request's tools and tool_choice and puts them
// into out. It returns the names the answer may call: the request's tools,
// none under tool_choice "none", the one a named tool_choice picks.
func (s *server) parseTools(req *chatRequest, out *llm.Request) (map[string]bool, *apiError) {
	if len(req.Tools) > s.lim.MaxTools {
		return nil, invalidRequest(fmt.Sprintf("tools has %d items; at most %d are allowed.", len(req.Tools), s.lim.MaxTools), "tools")
	}
	allowed := make(map[string]bool, len(req.Tools))
	for i, t := range req.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, invalidRequest(fmt.Sprintf("%s.type %.32q is not supported (function only).", param, t.Type), param+".type")
		}
		f := t.Function
		if f == nil {
			return nil, invalidRequest(param+".function is missing.", param+".function")
		}
		if !toolcall.ValidName(f.Name) {
			return nil, invalidRequest(fmt.Sprintf("%s.function.name %.80q must match ^[a-zA-Z0-9_-]{1,64}$.", param, f.Name), param+".function.name")
		}
		if allowed[f.Name] {
			return nil, invalidRequest(fmt.Sprintf("%s.function.name %q is listed twice.", param, f.Name), param+".function.name")
		}
		if n := len(f.Description) + len(f.Parameters); n > MaxToolBytes {
			return nil, invalidRequest(fmt.Sprintf("%s is %d bytes of description and parameters; at most %d are allowed.", param, n, MaxToolBytes), param)
		}
		params, err := objectSchema(f.Parameters)
		if err != "" {
			return nil, invalidRequest(fmt.Sprintf("%s.function.parameters %s.", param, err), param+".function.parameters")
		}
		allowed[f.Name] = true
		out.Tools = append(out.Tools, llm.Tool{Name: f.Name, Description: f.Description, Parameters: params})
	}
	choice, named, apiErr := parseToolChoice(req.ToolChoice)
	if apiErr != nil {
		return nil, apiErr
	}
	if choice != llm.ToolChoiceNone && choice != llm.ToolChoiceAuto && len(out.Tools) == 0 {
		return nil, invalidRequest("tool_choice asks for a tool call, but tools is empty.", "tool_choice")
	}
	switch {
	case named != "":
		// The contract has no "this function": the request lists only it,
		// and requires a call.
		if !allowed[named] {
			return nil, invalidRequest(fmt.Sprintf("tool_choice names function %.80q, which is not in tools.", named), "tool_choice")
		}
		for _, t := range out.Tools {
			if t.Name == named {
				out.Tools = []llm.Tool{t}
				break
			}
		}
		allowed = map[string]bool{named: true}
	case choice == llm.ToolChoiceNone:
		allowed = nil
	}
	out.ToolChoice = choice
	return allowed, nil
}

// objectSchema checks a tool's parameters: absent or null (no arguments),
// or a JSON object whose "type", if given, is "object". It returns what
// goes into llm.Tool.Parameters, or what is wrong.
func objectSchema(raw json.RawMessage) (json.RawMessage, string) {
	p := bytes.TrimSpace(raw)
	if len(p) == 0 || string(p) == "null" {
		return nil, ""
	}
	var schema map[string]json.RawMessage
	if p[0] != '{' || json.Unmarshal(p, &schema) != nil {
		return nil, "must be a JSON Schema object"
	}
	if t, ok := schema["type"]; ok {
		var s string
		if json.Unmarshal(t, &s) != nil || s != "object" {
			return nil, fmt.Sprintf(`must be an object schema ("type": "object"), not "type": %.32s`, t)
		}
	}
	if props, ok := schema["properties"]; ok && (len(bytes.TrimSpace(props)) == 0 || bytes.TrimSpace(props)[0] != '{') {
		return nil, "properties must be an object"
	}
	return p, ""
}

// parseToolChoice reads "auto", "none", "required", or
// {"type":"function","function":{"name":…}} (named).
func parseToolChoice(raw json.RawMessage) (choice, named string, e *apiError) {
	p := bytes.TrimSpace(raw)
	if len(p) == 0 || string(p) == "null" {
		return llm.ToolChoiceAuto, "", nil
	}
	var s string
	if json.Unmarshal(p, &s) == nil {
		switch s {
		case "auto":
			return llm.ToolChoiceAuto, "", nil
		case "none":
			return llm.ToolChoiceNone, "", nil
		case "required":
			return llm.ToolChoiceRequired, "", nil
		}
		return "", "", invalidRequest(fmt.Sprintf("tool_choice %.32q is not supported (auto, none, required or a function).", s), "tool_choice")
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(p, &obj) != nil || obj.Type != "function" || obj.Function.Name == "" {
		return "", "", invalidRequest(`tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": …}}.`, "tool_choice")
	}
	return llm.ToolChoiceRequired, obj.Function.Name, nil
}

// parseToolCalls checks an assistant message's tool_calls.
func parseToolCalls(i int, calls []chatToolCall) ([]llm.ToolCall, *apiError) {
	var out []llm.ToolCall
	for j, c := range calls {
		param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.Type != "" && c.Type != "function" {
			return nil, invalidRequest(fmt.Sprintf("%s.type %.32q is not supported (function only).", param, c.Type), param+".type")
		}
		if c.ID == "" {
			return nil, invalidRequest(param+".id is missing.", param+".id")
		}
		if c.Function.Name == "" {
			return nil, invalidRequest(param+".function.name is missing.", param+".function.name")
		}
		out = append(out, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out, nil
}

// answerCalls keeps the calls of a token that the request may get back
// (allowed names; see parseTools) and gives each an id and arguments
// that are JSON text. A dropped call is logged: voxpipe never runs a tool
// for a /v1 caller, and never hands one a call to a tool it did not name.
func (s *server) answerCalls(calls []llm.ToolCall, allowed map[string]bool) []llm.ToolCall {
	var out []llm.ToolCall
	for _, c := range calls {
		if !allowed[c.Name] {
			s.log.Warn().Str("tool", c.Name).Msg("openaiapi: dropped a call to a tool the request did not offer")
			continue
		}
		if c.ID == "" {
			c.ID = toolcall.NewID()
		}
		if c.Arguments == "" {
			c.Arguments = "{}"
		}
		out = append(out, c)
	}
	return out
}

func wireCalls(calls []llm.ToolCall, first int, indexed bool) []chatToolCall {
	out := make([]chatToolCall, len(calls))
	for i, c := range calls {
		w := chatToolCall{ID: c.ID, Type: "function"}
		w.Function.Name, w.Function.Arguments = c.Name, c.Arguments
		if indexed {
			k := first + i
			w.Index = &k
		}
		out[i] = w
	}
	return out
}

// toolCallsChunk is one streamed chunk with whole calls, indexed from
// first on.
func (c *chunkWriter) toolCallsChunk(calls []llm.ToolCall, first int) []byte {
	delta, _ := json.Marshal(map[string]any{"tool_calls": wireCalls(calls, first, true)}) // strings and ints: cannot fail
	return append([]byte(nil), c.chunk(delta, "")...)
}
