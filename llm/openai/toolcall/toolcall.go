// Package toolcall assembles the tool calls of an OpenAI-style streamed
// answer (OpenAI's chat completions, Ark's, vLLM's, llama-server's) from
// their deltas, for the backends that read such streams (llm/openai,
// llm/ark).
//
// Each call is keyed by its index. Its first delta carries the id and the
// function name; its arguments arrive split over any number of later
// deltas; several calls may be interleaved. A call is complete once its
// arguments form one whole JSON object (nothing valid can follow the
// closing brace) or when the answer finishes. Calls are handed out whole
// and in index order, so the assistant message the caller builds from them
// lists them as the model made them.
package toolcall

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
)

// Bounds of one answer; past them the stream is refused rather than
// buffered without end.
const (
	MaxCalls         = 64      // calls in one answer
	MaxArgumentBytes = 1 << 20 // one call's arguments
	MaxIndex         = 1023    // a delta's index
)

// Delta is one tool_calls entry of a streamed delta (or of a whole
// message). Index is nil when the server sent none.
type Delta struct {
	Index     *int
	ID        string
	Type      string // "" or "function"
	Name      string
	Arguments string
}

type call struct {
	index    int
	id       string
	name     strings.Builder
	args     strings.Builder
	complete bool // the arguments are one whole JSON object
}

// Assembler collects one answer's tool calls. The zero value is ready; it
// is not safe for concurrent use.
type Assembler struct {
	calls   []*call // in index order
	byIndex map[int]*call
	last    *call // the call the previous delta went to
	handed  int   // calls[:handed] were returned by Ready or Finish
}

// Error is a malformed tool-call delta.
type Error struct {
	Index int
	What  string
}

func (e *Error) Error() string { return fmt.Sprintf("tool call %d: %s", e.Index, e.What) }

// Add takes one delta. It fails on a delta that cannot belong to a well
// formed call: a negative or huge index, an id that changes, arguments
// that go on after a complete object, a type other than "function", or
// past the bounds.
func (a *Assembler) Add(d Delta) error {
	c, err := a.target(d)
	if err != nil {
		return err
	}
	if d.Type != "" && d.Type != "function" {
		return &Error{c.index, fmt.Sprintf("type %.32q is not supported (function only)", d.Type)}
	}
	if d.ID != "" {
		if c.id != "" && c.id != d.ID {
			return &Error{c.index, fmt.Sprintf("id changed from %.64q to %.64q", c.id, d.ID)}
		}
		c.id = d.ID
	}
	// Some servers repeat the whole name in every delta of a call; others
	// (in principle) split it before the arguments begin.
	if d.Name != "" && d.Name != c.name.String() {
		if c.args.Len() > 0 {
			return &Error{c.index, fmt.Sprintf("function name %.64q after the arguments began", d.Name)}
		}
		if c.name.Len()+len(d.Name) > 256 {
			return &Error{c.index, "function name over 256 bytes"}
		}
		c.name.WriteString(d.Name)
	}
	if d.Arguments == "" {
		return nil
	}
	if c.complete {
		if strings.TrimSpace(d.Arguments) == "" {
			return nil
		}
		return &Error{c.index, fmt.Sprintf("arguments go on after a complete JSON object: %.40q", d.Arguments)}
	}
	if c.args.Len()+len(d.Arguments) > MaxArgumentBytes {
		return &Error{c.index, fmt.Sprintf("arguments over %d bytes", MaxArgumentBytes)}
	}
	c.args.WriteString(d.Arguments)
	// Only a fragment that ends in a brace can close the object: checking
	// then keeps the work linear in the common case.
	if strings.HasSuffix(strings.TrimRight(d.Arguments, " \t\r\n"), "}") {
		s := c.args.String()
		c.complete = strings.HasPrefix(strings.TrimSpace(s), "{") && json.Valid([]byte(s))
	}
	return nil
}

// target finds or opens the call d belongs to. A delta without an index
// (some servers send whole calls without one) continues the previous call
// unless it brings a new id.
func (a *Assembler) target(d Delta) (*call, error) {
	if a.byIndex == nil {
		a.byIndex = map[int]*call{}
	}
	idx := 0
	switch {
	case d.Index != nil:
		idx = *d.Index
	case a.last != nil && (d.ID == "" || d.ID == a.last.id):
		return a.last, nil
	case len(a.calls) > 0:
		idx = a.calls[len(a.calls)-1].index + 1
	}
	if idx < 0 || idx > MaxIndex {
		return nil, &Error{idx, fmt.Sprintf("index out of range 0..%d", MaxIndex)}
	}
	c := a.byIndex[idx]
	if c == nil {
		if len(a.calls) >= MaxCalls {
			return nil, &Error{idx, fmt.Sprintf("more than %d calls in one answer", MaxCalls)}
		}
		if a.handed > 0 && idx < a.calls[a.handed-1].index {
			return nil, &Error{idx, "a new call ordered before calls already handed out"}
		}
		c = &call{index: idx}
		a.byIndex[idx] = c
		a.calls = append(a.calls, c)
		// Keep index order, so Ready hands calls out as the model made them.
		for i := len(a.calls) - 1; i > 0 && a.calls[i-1].index > idx; i-- {
			a.calls[i-1], a.calls[i] = a.calls[i], a.calls[i-1]
		}
	}
	a.last = c
	return c, nil
}

// Ready returns the calls that became complete since the last call, in
// index order: a call waits for the calls before it.
func (a *Assembler) Ready() []llm.ToolCall {
	var out []llm.ToolCall
	for a.handed < len(a.calls) {
		c := a.calls[a.handed]
		if !c.complete || c.name.Len() == 0 {
			break
		}
		out = append(out, a.whole(c))
		a.handed++
	}
	return out
}

// Finish returns every call not yet handed out, as the answer ends. A call
// that never got a name is an error; arguments that are not a complete
// object are passed on as they came (the caller validates them and tells
// the model), and empty arguments become "{}".
func (a *Assembler) Finish() ([]llm.ToolCall, error) {
	var out []llm.ToolCall
	for ; a.handed < len(a.calls); a.handed++ {
		c := a.calls[a.handed]
		if c.name.Len() == 0 {
			return out, &Error{c.index, "no function name"}
		}
		out = append(out, a.whole(c))
	}
	return out, nil
}

// Pending says whether a call has begun but was not handed out yet.
func (a *Assembler) Pending() bool { return a.handed < len(a.calls) }

func (a *Assembler) whole(c *call) llm.ToolCall {
	if c.id == "" {
		c.id = NewID()
	}
	args := c.args.String()
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	return llm.ToolCall{ID: c.id, Name: c.name.String(), Arguments: args}
}

// NewID makes a call id for a model that gave none ("call_" and 24 hex
// digits, as OpenAI's ids look).
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail on supported platforms
	return "call_" + hex.EncodeToString(b[:])
}

// namePattern is the function name rule OpenAI's API enforces.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName says whether name is a function name OpenAI's API accepts.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// noParameters stands for a tool without arguments (llm.Tool.Parameters
// nil), which most servers want spelled out.
var noParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// Parameters returns t's parameters schema for the wire, checking that it
// is one JSON object.
func Parameters(t llm.Tool) (json.RawMessage, error) {
	p := bytes.TrimSpace(t.Parameters)
	if len(p) == 0 || string(p) == "null" {
		return noParameters, nil
	}
	if p[0] != '{' || !json.Valid(p) {
		return nil, fmt.Errorf("%w: tool %.64q: parameters are not a JSON object", llm.ErrInvalid, t.Name)
	}
	return p, nil
}

// CheckRequest checks the tool-calling parts of req before a backend
// sends it: each tool has a name and object parameters, names are unique,
// ToolChoice is known, and the messages pair results with calls.
func CheckRequest(req llm.Request) error {
	switch req.ToolChoice {
	case llm.ToolChoiceAuto, llm.ToolChoiceNone:
	case llm.ToolChoiceRequired:
		if len(req.Tools) == 0 {
			return fmt.Errorf("%w: tool choice %q without tools", llm.ErrInvalid, req.ToolChoice)
		}
	default:
		return fmt.Errorf("%w: unknown tool choice %.32q", llm.ErrInvalid, req.ToolChoice)
	}
	seen := make(map[string]bool, len(req.Tools))
	for _, t := range req.Tools {
		if t.Name == "" {
			return fmt.Errorf("%w: a tool without a name", llm.ErrInvalid)
		}
		if seen[t.Name] {
			return fmt.Errorf("%w: tool %.64q listed twice", llm.ErrInvalid, t.Name)
		}
		seen[t.Name] = true
		if _, err := Parameters(t); err != nil {
			return err
		}
	}
	return llm.ValidateToolMessages(req.Messages)
}
