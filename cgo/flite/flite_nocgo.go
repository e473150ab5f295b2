//go:build !cgo

package flite

import "context"

// Voice is unavailable without cgo.
type Voice struct{}

// OpenVoice returns ErrNoCgo.
func OpenVoice(name string) (*Voice, error) { return nil, ErrNoCgo }

// Name returns "".
func (v *Voice) Name() string { return "" }

// Close does nothing.
func (v *Voice) Close() error { return nil }

// Synthesize returns ErrNoCgo.
func (v *Voice) Synthesize(ctx context.Context, text string, opts Options, emit EmitFunc) error {
	return ErrNoCgo
}
