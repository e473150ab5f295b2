//go:build !cgo

package speexdsp

// Processor is unavailable without cgo.
type Processor struct{ cfg Config }

// NewProcessor checks cfg and returns ErrNoCgo.
func NewProcessor(cfg Config) (*Processor, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return nil, ErrNoCgo
}

// Config returns the settings p was made with.
func (p *Processor) Config() Config { return p.cfg }

// Process returns ErrNoCgo.
func (p *Processor) Process(mic, ref, out []int16) error { return ErrNoCgo }

// Delay reports nothing.
func (p *Processor) Delay() (int, bool) { return 0, false }

// Reset does nothing.
func (p *Processor) Reset() {}

// Close does nothing.
func (p *Processor) Close() error { return nil }
