package gguf

import "errors"

// Sentinel errors. Every parse error wraps one of these with the detail
// (offset, key or tensor name) that makes it actionable.
var (
	// ErrBadMagic means the data does not start with "GGUF".
	ErrBadMagic = errors.New("gguf: bad magic (not a gguf file)")
	// ErrVersion means the GGUF version is not 2 or 3 (or the file is big-endian).
	ErrVersion = errors.New("gguf: unsupported version")
	// ErrTruncated means the data ends before a header field, metadata
	// value, tensor info or tensor payload.
	ErrTruncated = errors.New("gguf: truncated file")
	// ErrUnknownType means a tensor uses a ggml type this package does not know.
	ErrUnknownType = errors.New("gguf: unknown tensor type")
	// ErrValueType means a metadata value has an unknown type tag.
	ErrValueType = errors.New("gguf: unknown metadata value type")
	// ErrLimit means a count or length is absurd for the data it claims to describe.
	ErrLimit = errors.New("gguf: count or length out of bounds")
	// ErrDuplicate means a metadata key or tensor name appears twice.
	ErrDuplicate = errors.New("gguf: duplicate name")
	// ErrMisaligned means a tensor offset or the general.alignment value is invalid.
	ErrMisaligned = errors.New("gguf: misaligned tensor data")
	// ErrShape means tensor dimensions are invalid for the tensor type.
	ErrShape = errors.New("gguf: invalid tensor shape")
	// ErrWriter means a value given to the Writer cannot be written.
	ErrWriter = errors.New("gguf: writer")
	// ErrClosed means the file was used after Close.
	ErrClosed = errors.New("gguf: file closed")
)
