package engine

import "errors"

var (
	// ErrModelNotFound is returned by Open when the model file does not exist.
	ErrModelNotFound = errors.New("engine: model file not found")
	// ErrUnsupportedArch is returned for a GGUF whose general.architecture is not llama, qwen2, qwen3
	// or gemma3, or whose architecture settings the engine does not implement.
	ErrUnsupportedArch = errors.New("engine: unsupported architecture")
	// ErrMissingKey is returned when a required metadata key is absent.
	ErrMissingKey = errors.New("engine: missing metadata key")
	// ErrMissingTensor is returned when a required tensor is absent.
	ErrMissingTensor = errors.New("engine: missing tensor")
	// ErrBadShape is returned when a tensor's dims do not match the hyper-parameters.
	ErrBadShape = errors.New("engine: tensor shape mismatch")
	// ErrUnsupportedType is returned for a tensor type the engine cannot compute with.
	ErrUnsupportedType = errors.New("engine: unsupported tensor type")
	// ErrContextFull is returned when a prompt does not fit the context window even after dropping history.
	ErrContextFull = errors.New("engine: prompt does not fit the context window")
	// ErrClosed is returned by Stream after Close.
	ErrClosed = errors.New("engine: closed")
	// ErrDraftVocab is returned by Open when the draft model's vocabulary is not the target's.
	ErrDraftVocab = errors.New("engine: draft model vocabulary differs from the target's")
	// ErrTooManyMessages is returned for a request of more than MaxMessages messages.
	ErrTooManyMessages = errors.New("engine: too many messages")
	// ErrBadStop is returned for more than MaxStops stop strings or one longer than MaxStopBytes.
	ErrBadStop = errors.New("engine: bad stop strings")
	// ErrEmptyPrompt is returned when a request renders to no tokens.
	ErrEmptyPrompt = errors.New("engine: empty prompt")
)

// ErrNoConversation is returned by Prefill for a request without a Conversation: there would be no
// state to keep.
var ErrNoConversation = errors.New("engine: prefill needs a conversation id")
