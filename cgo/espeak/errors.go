package espeak

import "errors"

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
