// Package tools runs the functions a model may call during a turn: built-in
// Go tools (tools/clock, tools/timer), a xiaozhi device's own MCP tools
// (web/xiaozhi) and the tools of MCP servers (tools/mcp).
//
// A Tool describes itself (Spec) and runs (Call). A Set gathers tools from
// Providers for one turn, gives each a name every backend accepts, checks
// the model's arguments against the tool's JSON Schema before anything
// runs, bounds each call's time and output, and turns every failure into a
// result the model can read: a model that invents a tool or passes bad
// arguments gets an error result, never a crash.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// Tool is one function a model may call. Call must honour ctx (the Set
// gives it a deadline) and is safe for concurrent use.
type Tool interface {
	// Spec is the tool as the model sees it. Parameters is a JSON Schema
	// of an object; nil means no arguments.
	Spec() llm.Tool
	// Call runs the tool with arguments already validated against Spec's
	// schema and returns the text given back to the model.
	Call(ctx context.Context, call Call) (string, error)
}

// Call is one invocation.
type Call struct {
	// Arguments is the JSON object the model wrote, validated ("{}" when it
	// wrote none).
	Arguments json.RawMessage
	// Conversation is the voice conversation the call runs in, nil for a
	// call with none (a /v1 request). Tools that act later (timers) use it
	// to reach the person.
	Conversation *Conversation
}

// Provider is a set of tools that can change while the server runs (an MCP
// server that restarted, a device that listed its tools). Tools is called at
// the start of each turn and must not block.
type Provider interface {
	Tools() []Tool
}

// Static is a Provider of a fixed list.
type Static []Tool

// Tools returns the list.
func (s Static) Tools() []Tool { return s }

// Outcomes of a call, in Result.Outcome, the trace and the events.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"        // the tool ran and failed
	OutcomeUnknown     = "unknown_tool" // the model named no tool of the turn
	OutcomeBadArgs     = "bad_arguments"
	OutcomeTimeout     = "timeout"
	OutcomeCancelled   = "cancelled" // the turn was cut
	OutcomeRoundsLimit = "rounds_limit"
)

// Errors a Tool may wrap so the outcome says more than "error".
var (
	// ErrUnavailable: the tool's server or device is gone for now.
	ErrUnavailable = errors.New("tool unavailable")
)

// Result is one finished call.
type Result struct {
	Call     llm.ToolCall // as the model made it (Name is the model's name)
	Tool     string       // the tool's own name; "" when no tool matched
	Content  string       // what goes back to the model (an error text on failure)
	Outcome  string       // one of the Outcome constants
	Err      error        // the failure, nil on OutcomeOK
	Duration time.Duration
}

// Message is the RoleTool message that carries r back to the model.
func (r Result) Message() llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: r.Call.ID, Content: r.Content}
}
