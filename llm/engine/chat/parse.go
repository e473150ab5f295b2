package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/voxpipe/voxpipe/llm"
)

// ErrBadCall is returned by CallParser.Flush for a tool call whose tool
// name cannot be read: there is nothing to send its error result to.
var ErrBadCall = errors.New("chat: unreadable tool call")

// CallParser splits a model's streamed answer into text and tool calls, in
// the template's tool convention:
//   - ChatML (Hermes): text streams as it comes, up to a <tool_call>; the
//     call's text is held until </tool_call> (or the end of the answer) and
//     then parsed; text after calls streams again. Whitespace right before
//     and after a call is dropped.
//   - Llama 3: an answer whose first non-space character is "{" (or that
//     starts with <|python_tag|>) is held to the end and read as one call
//     {"name": ..., "parameters": ...}; if it is not one, it is text after all.
//
// A call whose JSON is malformed but whose name can be read is delivered
// with the raw arguments text, so the caller's schema check reports bad
// arguments to the model; one without a readable name ends the answer with
// ErrBadCall. Not safe for concurrent use.
type CallParser struct {
	template string
	id       func() string
	pending  string // text held back (a possible call start, trailing spaces, or a call in progress)
	inCall   bool
	after    bool // a call just ended: drop the whitespace that follows it
	started  bool // llama3: a non-space character was seen
	json     bool // llama3: the answer is held as a call
}

// NewCallParser returns a parser for template's calls, or nil when the
// template has no tool convention. id names each call (unique at least in
// the answer; nil: call_1, call_2, ...).
func NewCallParser(template string, id func() string) *CallParser {
	template = Family(template)
	if template != ChatML && template != Llama3 {
		return nil
	}
	if id == nil {
		n := 0
		id = func() string { n++; return fmt.Sprintf("call_%d", n) }
	}
	return &CallParser{template: template, id: id}
}

// StartInCall makes the parser read the answer as the body of a call that
// the prompt already opened (ToolChoice "required": the engine ends the
// prompt with CallOpen and a newline).
func (p *CallParser) StartInCall() { p.inCall = true }

// Push adds streamed text and returns the text that may be spoken now and
// the calls completed by it. Calls that cannot be read are reported by Flush
// only when no name can be found; Push itself never fails.
func (p *CallParser) Push(text string) (emit string, calls []llm.ToolCall, err error) {
	if p.template == Llama3 {
		return p.pushLlama3(text), nil, nil
	}
	buf := p.pending + text
	p.pending = ""
	var out strings.Builder
	for {
		if p.inCall {
			i := strings.Index(buf, CallClose)
			if i < 0 {
				p.pending = buf
				return out.String(), calls, nil
			}
			c, err := p.parse(buf[:i])
			if err != nil {
				return out.String(), calls, err
			}
			calls = append(calls, c)
			buf = buf[i+len(CallClose):]
			p.inCall, p.after = false, true
			continue
		}
		if p.after {
			buf = strings.TrimLeftFunc(buf, unicode.IsSpace)
			if buf == "" {
				return out.String(), calls, nil
			}
			p.after = false
		}
		if i := strings.Index(buf, CallOpen); i >= 0 {
			out.WriteString(strings.TrimRightFunc(buf[:i], unicode.IsSpace))
			buf = buf[i+len(CallOpen):]
			p.inCall = true
			continue
		}
		// Hold a suffix that may begin a call, and the spaces before it.
		hold := 0
		for k := min(len(CallOpen)-1, len(buf)); k > 0; k-- {
			if strings.HasSuffix(buf, CallOpen[:k]) {
				hold = k
				break
			}
		}
		keep := strings.TrimRightFunc(buf[:len(buf)-hold], unicode.IsSpace)
		p.pending = buf[len(keep):]
		out.WriteString(keep)
		return out.String(), calls, nil
	}
}

func (p *CallParser) pushLlama3(text string) string {
	if p.json {
		p.pending += text
		return ""
	}
	if p.started {
		return text
	}
	buf := p.pending + text
	t := strings.TrimLeftFunc(buf, unicode.IsSpace)
	switch {
	case t == "" || strings.HasPrefix(pythonTag, t):
		p.pending = buf // not decided yet
		return ""
	case t[0] == '{' || strings.HasPrefix(t, pythonTag):
		p.started, p.json, p.pending = true, true, buf
		return ""
	}
	p.started, p.pending = true, ""
	return buf
}

const pythonTag = "<|python_tag|>"

// Flush ends the answer: held text, a call still open (the answer ended
// before </tool_call>) or Llama 3's held call.
func (p *CallParser) Flush() (emit string, calls []llm.ToolCall, err error) {
	buf := p.pending
	p.pending = ""
	switch {
	case p.template == Llama3 && p.json:
		body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(buf), pythonTag))
		c, err := p.parse(body)
		if err != nil {
			return buf, nil, nil // not a call: it was text
		}
		return "", []llm.ToolCall{c}, nil
	case p.inCall:
		p.inCall = false
		c, err := p.parse(buf)
		if err != nil {
			return "", nil, err
		}
		return "", []llm.ToolCall{c}, nil
	}
	// Spaces held at the end of the answer are not worth speaking.
	return strings.TrimRightFunc(buf, unicode.IsSpace), nil, nil
}

var (
	nameRE = regexp.MustCompile(`"name"\s*:\s*"((?:[^"\\]|\\.)*)"`)
	argsRE = regexp.MustCompile(`"(?:arguments|parameters)"\s*:\s*`)
)

// parse reads one call's JSON, {"name": ..., "arguments": {...}} (Llama 3:
// "parameters"); arguments given as a JSON string are unwrapped.
func (p *CallParser) parse(body string) (llm.ToolCall, error) {
	body = strings.TrimSpace(body)
	var v struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(body), &v); err == nil && v.Name != "" {
		args := v.Arguments
		if len(args) == 0 {
			args = v.Parameters
		}
		return llm.ToolCall{ID: p.id(), Name: v.Name, Arguments: argumentsText(args)}, nil
	}
	if p.template == Llama3 {
		return llm.ToolCall{}, fmt.Errorf("%w: %q", ErrBadCall, short(body))
	}
	m := nameRE.FindStringSubmatch(body)
	if m == nil || m[1] == "" {
		return llm.ToolCall{}, fmt.Errorf("%w: no tool name in %q", ErrBadCall, short(body))
	}
	var name string
	if err := json.Unmarshal([]byte(`"`+m[1]+`"`), &name); err != nil || name == "" {
		name = m[1]
	}
	args := body
	if loc := argsRE.FindStringIndex(body); loc != nil {
		args = strings.TrimSpace(body[loc[1]:])
		// The call object's own closing brace usually ends the text: drop it
		// when the arguments then balance (or become valid).
		if !json.Valid([]byte(args)) && strings.HasSuffix(args, "}") &&
			(json.Valid([]byte(args[:len(args)-1])) || strings.Count(args, "}") > strings.Count(args, "{")) {
			args = strings.TrimSpace(args[:len(args)-1])
		}
	}
	return llm.ToolCall{ID: p.id(), Name: name, Arguments: args}, nil
}

// argumentsText is the arguments object's text as the model wrote it; a
// JSON string holding an object (some models quote their arguments) is
// unwrapped, and no arguments are {}.
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return strings.TrimSpace(s)
		}
	}
	return string(raw)
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
