// Package sphinx is the local speech recogniser: pocketsphinx (through
// cgo/sphinx) behind the asr.Recognizer contract.
//
// # Concurrency
//
// A Recognizer is safe for concurrent use. Each stream owns one decoder for
// its lifetime, taken from a pool of warm decoders (pocketsphinx decoders are
// not thread-safe, and loading one costs 0.3–0.5 s). A stream's Write and
// Close come from the pipeline's ASR goroutine; the only other goroutine that
// touches a stream is the context.AfterFunc that ends it on cancellation, and
// the stream's mutex serialises the two. The mutex is uncontended on the
// per-frame path (about 20 ns against 1–9 ms of decoding per 20 ms frame).
//
// # Why decoders are reused
//
// Besides the load time, a reused decoder carries its running cepstral mean
// (CMN) estimate from one utterance to the next, and that is worth a lot:
// with a fresh decoder for every utterance (CMN starting from the model's
// -cmninit) WER measured 47.6% on cards (vs 19.0% reused), 36.6% on librivox
// (vs 26.8%) and 16.1% on flite slt speech (vs 9.9%). So the first utterance
// on a newly loaded decoder is the least accurate one.
package sphinx

import (
	"context"
	"fmt"
	"sync"

	"github.com/voxpipe/voxpipe/asr"
	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
)

var _ asr.Recognizer = (*Recognizer)(nil)

// Recognizer hands out streams backed by pooled pocketsphinx decoders.
type Recognizer struct {
	args     []string // pocketsphinx flags for every decoder
	poolSize int

	mu     sync.Mutex // guards idle and closed
	idle   []*csphinx.Decoder
	closed bool
}

// New checks that every model file exists (naming the missing one and the
// package to install), then loads cfg.PoolSize decoders.
func New(cfg Config) (*Recognizer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Recognizer{args: cfg.decoderArgs(), poolSize: cfg.PoolSize}
	for range cfg.PoolSize {
		d, err := r.newDecoder()
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		r.idle = append(r.idle, d)
	}
	if cfg.PoolSize == 0 {
		// Load one decoder anyway so that a bad flag or model fails here,
		// not at the first utterance.
		d, err := r.newDecoder()
		if err != nil {
			return nil, err
		}
		_ = d.Close()
	}
	return r, nil
}

func (r *Recognizer) newDecoder() (*csphinx.Decoder, error) {
	d, err := csphinx.NewDecoder(r.args)
	if err != nil {
		return nil, fmt.Errorf("sphinx: load decoder: %w", err)
	}
	return d, nil
}

// Start begins an utterance at sampleRate, which must be 16000 (anything
// else returns asr.ErrSampleRate). It takes a warm decoder, or loads a new
// one (0.3–0.5 s with the full LM) when all are in use. Cancelling ctx ends
// the stream: Results is closed without a final.
func (r *Recognizer) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate != SampleRate {
		return nil, fmt.Errorf("sphinx: %d Hz (want %d): %w", sampleRate, SampleRate, asr.ErrSampleRate)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sphinx: start: %w", err)
	}
	d, err := r.take()
	if err != nil {
		return nil, err
	}
	if err := d.StartUtt(); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("sphinx: start: %w", err)
	}
	return newStream(ctx, r, d), nil
}

// take returns an idle decoder or loads a new one.
func (r *Recognizer) take() (*csphinx.Decoder, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("sphinx: start: %w", ErrClosed)
	}
	if n := len(r.idle); n > 0 {
		d := r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return d, nil
	}
	r.mu.Unlock()
	// Loading takes long; do it outside the lock.
	return r.newDecoder()
}

// release returns a decoder that has no utterance in progress to the pool,
// or frees it when the pool is full or the Recognizer is closed.
func (r *Recognizer) release(d *csphinx.Decoder) {
	r.mu.Lock()
	if !r.closed && len(r.idle) < r.poolSize {
		r.idle = append(r.idle, d)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	_ = d.Close()
}

// Close frees the idle decoders; decoders of streams still open are freed
// when those streams end. Start fails with ErrClosed afterwards. Close is
// idempotent.
func (r *Recognizer) Close() error {
	r.mu.Lock()
	idle := r.idle
	r.idle = nil
	r.closed = true
	r.mu.Unlock()
	for _, d := range idle {
		_ = d.Close()
	}
	return nil
}
