// Package flite is the default offline tts.Synthesizer: flite 2.2 with the
// CMU English voices, 16 kHz, streamed chunk by chunk with word timings.
//
// Syntheses from all sessions are serialised process-wide (flite is not
// thread-safe; see cgo/flite). At ~0.02 of real time a sentence holds the
// engine for tens of milliseconds; the audio is queued per call and sent
// outside the lock (tts/stream), so a slow consumer holds up only itself.
// The lead-in silence flite puts before each text is trimmed and its pauses
// are cut to stream.MaxPause.
package flite

import (
	"context"
	"errors"
	"fmt"
	"math"

	engine "github.com/voxpipe/voxpipe/cgo/flite"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/stream"
)

// Config selects the voice and its delivery.
type Config struct {
	Voice string  // slt | rms | awb | kal16
	Rate  float64 // speaking speed: 1.0 normal, >1 faster; 0 means 1
	Pitch float64 // mean F0 in Hz; 0 keeps the voice's default
}

// DefaultConfig is slt at normal speed and pitch.
func DefaultConfig() Config { return Config{Voice: "slt", Rate: 1} }

// Synthesizer speaks with one flite voice. It is safe for concurrent use.
type Synthesizer struct {
	cfg   Config
	voice *engine.Voice
}

var _ tts.Synthesizer = (*Synthesizer)(nil)

// New opens cfg.Voice. An unknown voice gives an error wrapping
// tts.ErrVoice; a rate or pitch out of range one wrapping ErrConfig.
func New(cfg Config) (*Synthesizer, error) {
	if cfg.Rate == 0 {
		cfg.Rate = 1
	}
	if math.IsNaN(cfg.Rate) || cfg.Rate < MinRate || cfg.Rate > MaxRate {
		return nil, fmt.Errorf("tts/flite: rate %g not in %g..%g: %w", cfg.Rate, MinRate, MaxRate, ErrConfig)
	}
	if math.IsNaN(cfg.Pitch) || cfg.Pitch < 0 || cfg.Pitch > MaxPitch {
		return nil, fmt.Errorf("tts/flite: pitch %g Hz not in 0..%g: %w", cfg.Pitch, MaxPitch, ErrConfig)
	}
	v, err := engine.OpenVoice(cfg.Voice)
	if errors.Is(err, engine.ErrVoice) {
		return nil, fmt.Errorf("%w: %w", tts.ErrVoice, err)
	}
	if err != nil {
		return nil, err
	}
	return &Synthesizer{cfg: cfg, voice: v}, nil
}

// Limits on Config.
const (
	MinRate  = 0.25
	MaxRate  = 4.0
	MaxPitch = 500.0
)

// SampleRate is 16000.
func (s *Synthesizer) SampleRate() int { return engine.SampleRate }

// Synthesize implements tts.Synthesizer: chunks go to out as flite makes
// them, shaped by tts/stream; every send gives way to ctx.
func (s *Synthesizer) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	opts := engine.Options{Rate: s.cfg.Rate, Pitch: s.cfg.Pitch}
	cfg := stream.Config{SampleRate: engine.SampleRate, LateMarks: true}
	return stream.Buffered(ctx, out, cfg, func(w *stream.Writer) error {
		return s.voice.Synthesize(ctx, text, opts, func(pcm []int16, words []engine.WordMark) error {
			return w.Write(pcm, marks(words))
		})
	})
}

// marks converts the binding's word marks.
func marks(words []engine.WordMark) []tts.WordMark {
	if len(words) == 0 {
		return nil
	}
	out := make([]tts.WordMark, len(words))
	for i, m := range words {
		out[i] = tts.WordMark{TextEnd: m.TextEnd, EndSample: m.EndSample}
	}
	return out
}

// Close releases the synthesizer. It is idempotent; Synthesize fails after.
func (s *Synthesizer) Close() error { return s.voice.Close() }
