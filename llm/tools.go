package llm

import (
	"encoding/json"
	"fmt"
)

// RoleTool marks a Message that carries a tool's result back to the model
// (ToolCallID names the call it answers).
const RoleTool = "tool"

// Tool is a function a model may call, in the shape every function-calling
// API shares (OpenAI's "tools", Ark's, the MCP tools/list entry).
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments object; nil means the
	// tool takes no arguments ({"type":"object","properties":{}}).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is one call a model asked for. Arguments is the JSON object text
// exactly as the model wrote it: the caller validates it against the tool's
// schema before it runs anything.
type ToolCall struct {
	// ID pairs the call with its result message (Message.ToolCallID). A
	// backend whose model gives none makes one that is unique in the answer.
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolChoice values of Request.ToolChoice.
const (
	ToolChoiceAuto     = ""         // the model decides (the default)
	ToolChoiceNone     = "none"     // tools are listed but must not be called
	ToolChoiceRequired = "required" // the model must call at least one
)

// Tools of a Request: which the model may call and how. Backends that cannot
// call tools return an error wrapping ErrInvalid when Tools is set, rather
// than ignore it.
//
// A streamed answer that calls tools delivers each call whole, once its
// arguments are complete, in Token.ToolCalls; text before it streams as
// usual, so it can be spoken while the call's arguments still arrive. The
// caller runs the calls, appends the assistant message (its Content and
// ToolCalls) and one RoleTool message per call, and sends a new Request.

// ValidateToolMessages checks the tool-calling shape of msgs: every RoleTool
// message answers a call of an earlier assistant message, by ID.
func ValidateToolMessages(msgs []Message) error {
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return fmt.Errorf("%w: message %d: a tool call needs an id and a name", ErrInvalid, i)
				}
				open[c.ID] = true
			}
		case RoleTool:
			if !open[m.ToolCallID] {
				return fmt.Errorf("%w: message %d: tool result for unknown call id %q", ErrInvalid, i, m.ToolCallID)
			}
		}
	}
	return nil
}
