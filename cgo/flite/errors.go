package flite

import (
	"errors"
	"fmt"
)

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

// CallbackPanic is what Synthesize panics with when the chunk callback
// panicked: the callback's panic value and its stack. The synthesis was
// stopped through flite's own abort path first, so the engine is clean and
// its lock free.
type CallbackPanic struct {
	Value any
	Stack []byte
}

func (p *CallbackPanic) Error() string {
	return fmt.Sprintf("flite: panic in the chunk callback: %v", p.Value)
}
