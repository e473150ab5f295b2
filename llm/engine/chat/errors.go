package chat

import "errors"

// Sentinel errors.
var (
	// ErrUnknownTemplate means Render was given a name not in Names.
	ErrUnknownTemplate = errors.New("chat: unknown template")
	// ErrRole means a message's role cannot be rendered by the template.
	ErrRole = errors.New("chat: unsupported role")
	// ErrToolFormat means RenderWith was given an unknown Options.ToolFormat.
	ErrToolFormat = errors.New("chat: unknown tool format")
	// ErrToolSchema means a tool's Parameters are not a JSON object schema.
	ErrToolSchema = errors.New("chat: bad tool schema")
	// ErrNoTools means the template has no tool-calling convention (llama2, raw, gemma, phi3).
	ErrNoTools = errors.New("chat: the template cannot list tools")
)
