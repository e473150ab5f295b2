package espeak

import (
	"errors"
	"fmt"
)

var (
	// ErrNoCgo is returned by every constructor when built without cgo.
	ErrNoCgo = errors.New("espeak: built without cgo (CGO_ENABLED=0)")
	// ErrInit is returned when espeak-ng cannot start.
	ErrInit = errors.New("espeak: initialisation failed (install espeak-ng-data)")
	// ErrClosed is returned by Synthesize after Close.
	ErrClosed = errors.New("espeak: speaker closed")
	// ErrOptions is returned for a rate or pitch out of range.
	ErrOptions = errors.New("espeak: option out of range")
	// ErrVoice is returned by New for an empty or unknown voice.
	ErrVoice = errors.New("espeak: unknown voice")
	// ErrSynth is returned when espeak-ng itself fails.
	ErrSynth = errors.New("espeak: synthesis failed")
)

// CallbackPanic is what Synthesize panics with when the chunk callback
// panicked: the callback's panic value and its stack. The synthesis was
// stopped through espeak's own abort path first, so the engine is clean and
// its lock free.
type CallbackPanic struct {
	Value any
	Stack []byte
}

func (p *CallbackPanic) Error() string {
	return fmt.Sprintf("espeak: panic in the chunk callback: %v", p.Value)
}
