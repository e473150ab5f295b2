package flite

import "errors"

var (
	// ErrNoCgo is returned by every constructor when built without cgo.
	ErrNoCgo = errors.New("flite: built without cgo (CGO_ENABLED=0)")
	// ErrClosed is returned by Synthesize after Close.
	ErrClosed = errors.New("flite: voice closed")
	// ErrVoice is returned by OpenVoice for a voice flite does not have.
	ErrVoice = errors.New("flite: unknown voice")
	// ErrSynth is returned when flite itself fails.
	ErrSynth = errors.New("flite: synthesis failed")
)
