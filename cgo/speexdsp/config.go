package speexdsp

import "fmt"

// Config sets up a Processor.
type Config struct {
	// SampleRate of every frame, in Hz (8000 to 48000).
	SampleRate int
	// FrameSamples is the length of every frame Process takes: 10 to 20 ms
	// of audio is what speexdsp is tuned for.
	FrameSamples int
	// EchoTailSamples is the length of the echo canceller's adaptive
	// filter: the longest path from the reference to the microphone it can
	// cancel, playout delay and room reverberation together. 0 turns echo
	// cancellation off (Process then ignores its reference).
	EchoTailSamples int
	// Denoise turns spectral noise suppression on; NoiseSuppressDB is its
	// largest attenuation (negative; 0 = speexdsp's default, -15 dB).
	Denoise         bool
	NoiseSuppressDB int
	// ResidualEcho suppresses the echo the filter leaves (speexdsp's
	// preprocessor, told the canceller's state); EchoSuppressDB and
	// EchoSuppressActiveDB are its largest attenuation without and with
	// near-end speech (negative; 0 = speexdsp's defaults, -40 and -15 dB).
	// It needs EchoTailSamples > 0.
	ResidualEcho                         bool
	EchoSuppressDB, EchoSuppressActiveDB int
}

func (c Config) check() error {
	switch {
	case c.SampleRate < 8000 || c.SampleRate > 48000:
		return fmt.Errorf("%w: sample rate %d Hz (want 8000 to 48000)", ErrConfig, c.SampleRate)
	case c.FrameSamples < c.SampleRate/200 || c.FrameSamples > c.SampleRate/25:
		return fmt.Errorf("%w: frame of %d samples at %d Hz (want 5 to 40 ms)", ErrConfig, c.FrameSamples, c.SampleRate)
	case c.EchoTailSamples < 0 || c.EchoTailSamples > 2*c.SampleRate:
		return fmt.Errorf("%w: echo tail of %d samples (want 0 to 2 s)", ErrConfig, c.EchoTailSamples)
	case c.NoiseSuppressDB > 0 || c.EchoSuppressDB > 0 || c.EchoSuppressActiveDB > 0:
		return fmt.Errorf("%w: suppression is an attenuation: want dB <= 0", ErrConfig)
	case c.ResidualEcho && c.EchoTailSamples == 0:
		return fmt.Errorf("%w: residual echo suppression needs the echo canceller (EchoTailSamples > 0)", ErrConfig)
	case c.EchoTailSamples == 0 && !c.Denoise:
		return fmt.Errorf("%w: neither echo cancellation nor noise suppression is on", ErrConfig)
	}
	return nil
}
