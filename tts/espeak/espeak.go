// Package espeak is a tts.Synthesizer on espeak-ng: many languages
// (en-us, cmn, de, ...), 22050 Hz, streamed chunk by chunk with word
// timings.
//
// espeak-ng is a process-wide singleton, so syntheses from all sessions are
// serialised (see cgo/espeak); at ~0.001 of real time a sentence holds the
// engine for a few milliseconds. The audio is queued per call and sent
// outside the lock (tts/stream), leading silence trimmed and pauses cut to
// stream.MaxPause.
package espeak

import (
	"context"
	"errors"
	"fmt"

	engine "github.com/voxpipe/voxpipe/cgo/espeak"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/stream"
)

// Config selects the voice and its delivery.
type Config struct {
	Voice string // espeak-ng voice: en-us, cmn, de, en-us+f3, ...
	Rate  int    // words per minute, 80..450; 0 means 175
	Pitch int    // base pitch 0..100 (50 is normal)
}

// DefaultConfig is en-us at 175 wpm and normal pitch.
func DefaultConfig() Config { return Config{Voice: "en-us", Rate: engine.DefaultRate, Pitch: 50} }

// Synthesizer speaks with one espeak-ng voice. It is safe for concurrent use.
type Synthesizer struct {
	opts    engine.Options
	speaker *engine.Speaker
}

var _ tts.Synthesizer = (*Synthesizer)(nil)

// New checks cfg and loads its voice once. An unknown voice gives an error
// wrapping tts.ErrVoice; a rate or pitch out of range one wrapping ErrConfig.
func New(cfg Config) (*Synthesizer, error) {
	if cfg.Rate == 0 {
		cfg.Rate = engine.DefaultRate
	}
	if cfg.Rate < engine.MinRate || cfg.Rate > engine.MaxRate {
		return nil, fmt.Errorf("tts/espeak: rate %d wpm not in %d..%d: %w", cfg.Rate, engine.MinRate, engine.MaxRate, ErrConfig)
	}
	if cfg.Pitch < 0 || cfg.Pitch > 100 {
		return nil, fmt.Errorf("tts/espeak: pitch %d not in 0..100: %w", cfg.Pitch, ErrConfig)
	}
	sp, err := engine.New(cfg.Voice)
	if errors.Is(err, engine.ErrVoice) {
		return nil, fmt.Errorf("%w: %w", tts.ErrVoice, err)
	}
	if err != nil {
		return nil, err
	}
	return &Synthesizer{opts: engine.Options{Rate: cfg.Rate, Pitch: cfg.Pitch}, speaker: sp}, nil
}

// SampleRate is 22050.
func (s *Synthesizer) SampleRate() int { return engine.SampleRate }

// Synthesize implements tts.Synthesizer: chunks go to out as espeak makes
// them, shaped by tts/stream; every send gives way to ctx.
func (s *Synthesizer) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	cfg := stream.Config{SampleRate: engine.SampleRate, LateMarks: true}
	return stream.Buffered(ctx, out, cfg, func(w *stream.Writer) error {
		return s.speaker.Synthesize(ctx, text, s.opts, func(pcm []int16, words []engine.WordMark) error {
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
func (s *Synthesizer) Close() error { return s.speaker.Close() }
