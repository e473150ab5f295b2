package speexdsp

import "errors"

var (
	// ErrNoCgo is returned by NewProcessor when built without cgo.
	ErrNoCgo = errors.New("speexdsp: built without cgo (CGO_ENABLED=0)")
	// ErrClosed is returned by Process after Close.
	ErrClosed = errors.New("speexdsp: processor closed")
	// ErrConfig is wrapped by NewProcessor's errors for settings it refuses.
	ErrConfig = errors.New("speexdsp: bad settings")
	// ErrFrame is wrapped by Process's errors for a frame of the wrong length.
	ErrFrame = errors.New("speexdsp: frame length")
)
