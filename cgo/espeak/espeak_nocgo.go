//go:build !cgo

package espeak

import "context"

// Speaker is unavailable without cgo.
type Speaker struct{}

// New returns ErrNoCgo.
func New(voice string) (*Speaker, error) { return nil, ErrNoCgo }

// Voice returns "".
func (s *Speaker) Voice() string { return "" }

// Close does nothing.
func (s *Speaker) Close() error { return nil }

// Synthesize returns ErrNoCgo.
func (s *Speaker) Synthesize(ctx context.Context, text string, opts Options, emit EmitFunc) error {
	return ErrNoCgo
}
