package chat

import "errors"

// Sentinel errors.
var (
	// ErrUnknownTemplate means Render was given a name other than ChatML, Llama3, Llama2 or Raw.
	ErrUnknownTemplate = errors.New("chat: unknown template")
	// ErrRole means a message's role cannot be rendered by the template.
	ErrRole = errors.New("chat: unsupported role")
)
