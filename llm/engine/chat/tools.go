package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
)

// Tool formats: how a template lists the tools a request offers.
const (
	// ToolsTemplate is the template's own convention: for ChatML the
	// Hermes/Qwen2.5 one (each tool as JSON inside <tools></tools> in the
	// system message), for Llama 3 the JSON function-call one (the tools as
	// indented JSON at the start of the first user message).
	ToolsTemplate = ""
	// ToolsCompact lists the tools on one line of the ChatML system message,
	// "Tools: get_time(), set_timer(duration, label?)": what the demo model
	// was trained on (llm/train/tools.py). Its context is 1024 tokens and its
	// tokenizer was trained on dictionary text, where JSON schemas cost about
	// 90 tokens a tool; the line costs about 8. Calls and results are
	// Hermes's in both formats.
	ToolsCompact = "compact"
)

// Options of RenderWith.
type Options struct {
	// Tools are listed in the prompt in ToolFormat; none: no tool block.
	Tools      []llm.Tool
	ToolFormat string
	// Date is the "Today Date" of Llama31's system header, as "26 Jul
	// 2024"; "" writes that date, the one Meta's template falls back to.
	Date string
}

// The Hermes/Qwen2.5 tool block's fixed text (Qwen2.5-Instruct's
// tokenizer_config.json chat template renders these strings).
const (
	hermesToolsHead = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
	hermesToolsTail = "\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
	// Llama 3.1's custom-tool preamble (tools_in_user_message, its default).
	llama3ToolsHead = "Given the following functions, please respond with a JSON for a function call with its proper " +
		"arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": " +
		"dictionary of argument name and its value}.Do not use variables.\n\n"
)

// Tool-call markers of the Hermes format.
const (
	CallOpen  = "<tool_call>"
	CallClose = "</tool_call>"
)

// toolBlock is the text the system message gets for tools (ChatML).
func toolBlock(tools []llm.Tool, format string) (string, error) {
	switch format {
	case ToolsCompact:
		sigs := make([]string, len(tools))
		for i, t := range tools {
			s, err := Signature(t)
			if err != nil {
				return "", err
			}
			sigs[i] = s
		}
		return "Tools: " + strings.Join(sigs, ", "), nil
	case ToolsTemplate:
		var sb strings.Builder
		sb.WriteString(hermesToolsHead)
		for _, t := range tools {
			j, err := functionJSON(t, "")
			if err != nil {
				return "", err
			}
			sb.WriteString("\n" + j)
		}
		sb.WriteString(hermesToolsTail)
		return sb.String(), nil
	}
	return "", fmt.Errorf("%w: tool format %q (want \"\" or compact)", ErrToolFormat, format)
}

// schema is the part of a tool's JSON Schema the compact line shows.
type schema struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

// Signature is a tool's compact form: its name and its arguments, the
// required ones in the schema's order, then the optional ones sorted and
// marked "?" — "set_timer(duration, label?)". A schema's property order is
// not kept by JSON decoding, so sorting makes the line the same whatever
// order a tool's provider wrote.
func Signature(t llm.Tool) (string, error) {
	var s schema
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		if err := json.Unmarshal(t.Parameters, &s); err != nil {
			return "", fmt.Errorf("%w: tool %q: parameters: %w", ErrToolSchema, t.Name, err)
		}
	}
	var args []string
	seen := map[string]bool{}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok && !seen[r] {
			args = append(args, r)
			seen[r] = true
		}
	}
	var opt []string
	for p := range s.Properties {
		if !seen[p] {
			opt = append(opt, p+"?")
		}
	}
	slices.Sort(opt)
	return t.Name + "(" + strings.Join(append(args, opt...), ", ") + ")", nil
}

// functionJSON is a tool in the OpenAI shape both templates list,
// {"type": "function", "function": {...}}, spaced as Python's json.dumps
// (indent "" on one line, else indented as json.dumps(indent=4)).
func functionJSON(t llm.Tool, indent string) (string, error) {
	params := json.RawMessage(`{"type": "object", "properties": {}}`)
	if len(bytes.TrimSpace(t.Parameters)) > 0 {
		if !json.Valid(t.Parameters) {
			return "", fmt.Errorf("%w: tool %q: parameters are not JSON", ErrToolSchema, t.Name)
		}
		params = t.Parameters
	}
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	v := struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}{"function", function{t.Name, t.Description, params}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("%w: tool %q: %w", ErrToolSchema, t.Name, err)
	}
	if indent != "" {
		return strings.TrimSuffix(b.String(), "\n"), nil
	}
	return PyJSON(b.Bytes()), nil
}

// PyJSON respaces JSON text as Python's json.dumps writes it (", " and
// ": " between items), which is how the templates' tojson renders call
// arguments and tools, and how the demo model writes its calls. Text that is
// not JSON is returned trimmed, unchanged.
func PyJSON(raw []byte) string {
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return string(bytes.TrimSpace(raw))
	}
	var out strings.Builder
	in, esc := false, false
	for _, b := range c.Bytes() {
		out.WriteByte(b)
		switch {
		case esc:
			esc = false
		case in && b == '\\':
			esc = true
		case b == '"':
			in = !in
		case !in && (b == ',' || b == ':'):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

// callArguments is a call's arguments as rendered in history: respaced JSON,
// or {} when the call had none.
func callArguments(c llm.ToolCall) string {
	if strings.TrimSpace(c.Arguments) == "" {
		return "{}"
	}
	return PyJSON([]byte(c.Arguments))
}

// renderChatML writes ChatML with Hermes tool calls: tools in the system
// message (one is made when the conversation has none), an assistant's calls
// after its text as <tool_call> blocks, and consecutive tool results as one
// user turn of <tool_response> blocks, as Qwen2.5's template does.
func renderChatML(sb *strings.Builder, msgs []llm.Message, o Options) error {
	block := ""
	if len(o.Tools) > 0 {
		b, err := toolBlock(o.Tools, o.ToolFormat)
		if err != nil {
			return err
		}
		block = b
		if len(msgs) == 0 || msgs[0].Role != llm.RoleSystem {
			sb.WriteString("<|im_start|>system\n" + block + "<|im_end|>\n")
			block = ""
		}
	}
	for i, m := range msgs {
		switch {
		case i == 0 && m.Role == llm.RoleSystem && block != "":
			content := block
			if m.Content != "" {
				content = m.Content + "\n\n" + block
			}
			sb.WriteString("<|im_start|>system\n" + content + "<|im_end|>\n")
		case m.Role == llm.RoleTool:
			if i == 0 || msgs[i-1].Role != llm.RoleTool {
				sb.WriteString("<|im_start|>user")
			}
			sb.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != llm.RoleTool {
				sb.WriteString("<|im_end|>\n")
			}
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			sb.WriteString("<|im_start|>assistant")
			if m.Content != "" {
				sb.WriteString("\n" + m.Content)
			}
			for _, c := range m.ToolCalls {
				sb.WriteString("\n" + CallOpen + "\n{\"name\": " + quote(c.Name) + ", \"arguments\": " + callArguments(c) + "}\n" + CallClose)
			}
			sb.WriteString("<|im_end|>\n")
		default:
			sb.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
	}
	return nil
}

// renderLlama3 writes Llama 3 with its JSON function calls (Llama 3.1's
// template with tools_in_user_message): the tools before the first user
// message's text, a call as {"name": ..., "parameters": ...} (one per
// assistant message, as that template allows), a result as an ipython turn.
// dated (Llama31) adds the system header Llama 3.1-3.3 always write, which
// takes the system message, and renders results as JSON strings.
func renderLlama3(sb *strings.Builder, msgs []llm.Message, o Options, dated bool) error {
	pre := ""
	if len(o.Tools) > 0 {
		var b strings.Builder
		b.WriteString(llama3ToolsHead)
		for _, t := range o.Tools {
			j, err := functionJSON(t, "    ")
			if err != nil {
				return err
			}
			b.WriteString(j + "\n\n")
		}
		pre = b.String()
	}
	if dated && len(msgs) > 0 {
		system := ""
		if msgs[0].Role == llm.RoleSystem {
			system, msgs = strings.TrimSpace(msgs[0].Content), msgs[1:]
		}
		sb.WriteString("<|start_header_id|>system<|end_header_id|>\n\n")
		if len(o.Tools) > 0 {
			sb.WriteString("Environment: ipython\n")
		}
		date := o.Date
		if date == "" {
			date = defaultDate
		}
		sb.WriteString("Cutting Knowledge Date: December 2023\nToday Date: " + date + "\n\n" + system + "<|eot_id|>")
	}
	for i, m := range msgs {
		role, content := m.Role, strings.TrimSpace(m.Content) // trimmed, as Meta's template does
		switch {
		case m.Role == llm.RoleUser && pre != "":
			content = pre + content
			pre = ""
		case m.Role == llm.RoleTool:
			role = "ipython"
			if dated {
				// Meta's template tests the content "is iterable", which a
				// string is, and so writes it through tojson.
				content = pyString(m.Content)
			}
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0:
			if len(m.ToolCalls) > 1 {
				return fmt.Errorf("%w: message %d has %d tool calls (llama3 renders one per message)", ErrRole, i, len(m.ToolCalls))
			}
			c := m.ToolCalls[0]
			content = "{\"name\": " + quote(c.Name) + ", \"parameters\": " + callArguments(c) + "}"
		}
		sb.WriteString("<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>")
	}
	return nil
}

// pyString is s as a JSON string the way Python's json.dumps writes it with
// ensure_ascii=False (what the templates' tojson does): only quotes,
// backslashes and control characters are escaped.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
