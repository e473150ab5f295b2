package synth

import "errors"

var (
	// ErrUnknownShape means Write was given a shape name not in Shapes().
	ErrUnknownShape = errors.New("synth: unknown model shape")
	// ErrType means Write was asked for a weight type it cannot produce.
	ErrType = errors.New("synth: unsupported weight type (want F32, F16, Q8_0 or Q4_0)")
)
