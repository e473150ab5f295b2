package tokenizer

import "errors"

// Sentinel errors returned by FromGGUF.
var (
	// ErrNoVocab means the GGUF lacks tokenizer.ggml.tokens.
	ErrNoVocab = errors.New("tokenizer: no vocabulary (tokenizer.ggml.tokens missing)")
	// ErrModel means tokenizer.ggml.model names a tokenizer this package does not implement.
	ErrModel = errors.New("tokenizer: unsupported tokenizer model")
	// ErrPre means tokenizer.ggml.pre names an unsupported pre-tokenizer.
	ErrPre = errors.New("tokenizer: unsupported pre-tokenizer")
	// ErrMetadata means a tokenizer array or id is inconsistent with the vocabulary.
	ErrMetadata = errors.New("tokenizer: inconsistent metadata")
)
