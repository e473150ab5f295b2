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
// # The pool
//
// New loads one decoder (so a bad flag or model fails there) and fills the
// pool to PoolSize idle decoders in the background, one build at a time.
// Every Start that takes the last idle decoders starts another background
// build, so the next session finds one ready; a Start that finds none loads
// its own. Returned decoders are kept up to PoolMaxIdle and only freed past
// that: freeing and rebuilding one per utterance cost a third of the server's
// CPU at 8 sessions in the previous design.
//
// # Cepstral mean (CMN)
//
// pocketsphinx normalises every frame by a running estimate of the channel's
// cepstral mean. The model's starting value (feat.params' -cmninit, which
// overrides a -cmninit flag) is far from real microphones, so a fresh
// decoder's first utterance was the least accurate one (cards: 47.6% WER
// fresh vs 19.0% warm). Three things fix it: CMNInit, a mean measured on real
// recordings, is written into every new decoder; a warm-up decode runs when
// a decoder is created; and a Session (asr.Sessioner) carries its own mean
// from one utterance to the next, so a conversation keeps what it learned of
// its speaker's channel whichever pooled decoder serves the next utterance.
//
// # Rescoring
//
// With Config.Rescore set, Close takes the utterance's n-best list from the
// word lattice and lets a language model (a TextScorer, asr/lmscore) pick
// the final among the candidates; partials are not rescored, and past
// Rescore.Timeout the best-path final stands. docs/asr.md has the measured
// gain and cost.
package sphinx

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/voxpipe/voxpipe/asr"
	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
)

var (
	_ asr.Recognizer = (*Recognizer)(nil)
	_ asr.Sessioner  = (*Recognizer)(nil)
)

// Recognizer hands out streams backed by pooled pocketsphinx decoders.
type Recognizer struct {
	args    []string // pocketsphinx flags for every decoder
	size    int      // idle decoders to keep ready
	maxIdle int      // idle decoders to keep at most
	warmUp  bool
	cmn     []float32 // mean every new decoder and session starts from
	cmnNB   []float32 // mean narrowband sessions start from (nil: cmn)
	// cmnWeight: frames the start mean counts as (0: pocketsphinx's);
	// cmnEvery: samples between mean updates in an utterance (0: off).
	cmnWeight, cmnEvery int

	rescoreCfg Rescore

	// process feeds audio to a decoder: (*csphinx.Decoder).ProcessRaw,
	// replaced by tests to make a Write fail.
	process func(*csphinx.Decoder, []int16) error

	wg sync.WaitGroup // background builds

	mu       sync.Mutex // guards the fields below
	idle     []*csphinx.Decoder
	out      int  // decoders take handed out and not yet released
	building bool // a background build is running
	closed   bool
	built    int // decoders created, for Stats
}

// Stats is a snapshot of the pool.
type Stats struct {
	Idle  int // decoders ready
	Built int // decoders created since New
}

// New checks that every model file exists (naming the missing one and the
// package to install), loads one decoder and fills the pool to PoolSize in
// the background.
func New(cfg Config) (*Recognizer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cmn, err := parseCMN(cfg.CMNInit)
	if err != nil {
		return nil, err
	}
	cmnNB, err := parseCMN(cfg.NarrowbandCMNInit)
	if err != nil {
		return nil, err
	}
	r := &Recognizer{
		args:    cfg.decoderArgs(),
		size:    cfg.PoolSize,
		maxIdle: max(cfg.PoolMaxIdle, cfg.PoolSize),
		warmUp:  cfg.WarmUp,
		cmn:     cmn,
		cmnNB:   cmnNB,
		process: (*csphinx.Decoder).ProcessRaw,

		cmnWeight: cfg.CMNWeight,
		cmnEvery:  cfg.CMNUpdate * SampleRate / 100,

		rescoreCfg: cfg.Rescore,
	}
	d, err := r.newDecoder()
	if err != nil {
		return nil, err
	}
	if r.cmn == nil {
		// The model's own starting mean (newDecoder kept it).
		r.cmn = d.CMN(nil)
	}
	if r.cmnNB != nil && len(r.cmnNB) != len(r.cmn) {
		_ = d.Close()
		return nil, fmt.Errorf("%w: NarrowbandCMNInit has %d values, the model's mean %d", ErrConfig, len(r.cmnNB), len(r.cmn))
	}
	r.mu.Lock()
	if r.size > 0 {
		r.idle = append(r.idle, d)
		d = nil
	}
	r.refillLocked()
	r.mu.Unlock()
	if d != nil {
		_ = d.Close()
	}
	return r, nil
}

// newDecoder loads a decoder, runs the warm-up decode and sets its starting
// cepstral mean.
func (r *Recognizer) newDecoder() (*csphinx.Decoder, error) {
	d, err := csphinx.NewDecoder(r.args)
	if err != nil {
		return nil, fmt.Errorf("sphinx: load decoder: %w", err)
	}
	start := r.cmn
	if start == nil {
		start = d.CMN(nil) // the model's -cmninit
	}
	if r.warmUp {
		if err := warmUp(d); err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("sphinx: warm-up decode: %w", err)
		}
	}
	if len(start) > 0 {
		if err := d.SetCMN(start); err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("sphinx: cmninit: %w", err)
		}
	}
	r.mu.Lock()
	r.built++
	r.mu.Unlock()
	return d, nil
}

// warmClip is the warm-up decode's audio: 0.6 s of a voiced, vowel-like
// sound between quiet stretches, enough for the front end and the search to
// run one whole utterance. What it is recognised as does not matter; its
// effect on the mean is undone afterwards.
var warmClip = func() []int16 {
	const n = SampleRate * 14 / 10
	pcm := make([]int16, n)
	seed := uint32(1)
	for i := range pcm {
		seed = seed*1664525 + 1013904223
		noise := float64(int32(seed)>>20) / 8 // about -60 dBFS
		v := noise
		if i > SampleRate*4/10 && i < SampleRate {
			t := float64(i) / SampleRate
			for h, a := range []float64{1, 0.8, 0.5, 0.6, 0.3, 0.2, 0.15} {
				v += 1800 * a * math.Sin(2*math.Pi*120*float64(h+1)*t)
			}
		}
		pcm[i] = int16(max(-32768, min(32767, v)))
	}
	return pcm
}()

func warmUp(d *csphinx.Decoder) error {
	if err := d.StartUtt(); err != nil {
		return err
	}
	const chunk = SampleRate / 50
	for off := 0; off < len(warmClip); off += chunk {
		if err := d.ProcessRaw(warmClip[off:min(off+chunk, len(warmClip))]); err != nil {
			_ = d.EndUtt()
			return err
		}
	}
	return d.EndUtt()
}

// refillLocked starts a background build when fewer than size decoders are
// idle and none is being built. r.mu must be held.
func (r *Recognizer) refillLocked() {
	if r.closed || r.building || len(r.idle) >= r.size {
		return
	}
	r.building = true
	r.wg.Go(func() {
		for {
			d, err := r.newDecoder()
			r.mu.Lock()
			if err != nil {
				// The next Start retries, and reports the error if its
				// own load fails too.
				r.building = false
				r.mu.Unlock()
				return
			}
			if r.closed || len(r.idle) >= r.size {
				r.building = false
				r.mu.Unlock()
				r.keepOrFree(d)
				return
			}
			r.idle = append(r.idle, d)
			if len(r.idle) >= r.size {
				r.building = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
		}
	})
}

// Start begins an utterance at sampleRate, which must be 16000 (anything
// else returns asr.ErrSampleRate), starting from the recogniser's CMNInit
// mean. Cancelling ctx ends the stream: Results is closed without a final.
func (r *Recognizer) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	return r.start(ctx, sampleRate, nil)
}

func (r *Recognizer) start(ctx context.Context, sampleRate int, sess *Session) (asr.Stream, error) {
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
	mean := r.cmn
	if sess != nil {
		mean = sess.mean()
	}
	if len(mean) > 0 {
		if err := d.SetCMN(mean); err != nil {
			r.release(d, true)
			return nil, fmt.Errorf("sphinx: start: %w", err)
		}
	}
	if r.cmnWeight > 0 {
		if err := d.SetCMNWeight(r.cmnWeight); err != nil {
			r.release(d, true)
			return nil, fmt.Errorf("sphinx: start: %w", err)
		}
	}
	if err := d.StartUtt(); err != nil {
		r.release(d, false)
		return nil, fmt.Errorf("sphinx: start: %w", err)
	}
	return newStream(ctx, r, d, sess), nil
}

// take returns an idle decoder or loads a new one, and keeps the pool
// filling in the background either way.
func (r *Recognizer) take() (*csphinx.Decoder, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("sphinx: start: %w", ErrClosed)
	}
	var d *csphinx.Decoder
	if n := len(r.idle); n > 0 {
		d = r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
	}
	r.out++
	// A replacement is built unless the decoders out, once returned, would
	// fill the pool to PoolMaxIdle anyway: it would only be freed (with the
	// shipped 8/8 every utterance built one and freed one, 0.3-0.5 s of CPU
	// beside the recogniser).
	if len(r.idle)+r.out < r.maxIdle {
		r.refillLocked()
	}
	r.mu.Unlock()
	if d != nil {
		return d, nil
	}
	// Loading takes long; do it outside the lock.
	d, err := r.newDecoder()
	if err != nil {
		r.mu.Lock()
		r.out--
		r.mu.Unlock()
	}
	return d, err
}

// release ends the loan of a decoder take handed out: back to the pool
// (keepOrFree) when keep, else freed.
func (r *Recognizer) release(d *csphinx.Decoder, keep bool) {
	r.mu.Lock()
	r.out--
	r.mu.Unlock()
	if keep {
		r.keepOrFree(d)
		return
	}
	_ = d.Close()
}

// keepOrFree returns a decoder that has no utterance in progress to the
// pool, or frees it when PoolMaxIdle are idle or the Recognizer is closed.
func (r *Recognizer) keepOrFree(d *csphinx.Decoder) {
	r.mu.Lock()
	if !r.closed && len(r.idle) < r.maxIdle {
		r.idle = append(r.idle, d)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	_ = d.Close()
}

// Stats returns the pool's state.
func (r *Recognizer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{Idle: len(r.idle), Built: r.built}
}

// WaitReady blocks until the background fill has stopped (the pool holds
// PoolSize idle decoders, or a build failed) or ctx ends.
func (r *Recognizer) WaitReady(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close frees the idle decoders after any background build ends; decoders
// of streams still open are freed when those streams end. Start fails with
// ErrClosed afterwards. Close is idempotent.
func (r *Recognizer) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	idle := r.idle
	r.idle = nil
	r.mu.Unlock()
	for _, d := range idle {
		_ = d.Close()
	}
	return nil
}

// NewSession returns a Recognizer for one conversation: its utterances start
// from the cepstral mean its previous utterance ended with (the first from
// CMNInit, or NarrowbandCMNInit for a client at 8 kHz or less).
func (r *Recognizer) NewSession(opts asr.SessionOptions) asr.Session {
	start := r.cmn
	if opts.InputRate > 0 && opts.InputRate <= 8000 && r.cmnNB != nil {
		start = r.cmnNB
	}
	return &Session{rec: r, cmn: append([]float32(nil), start...)}
}

// Session is one conversation's view of a Recognizer (asr.Session).
type Session struct {
	rec *Recognizer

	mu  sync.Mutex // guards cmn: written by a stream's Close or cancel
	cmn []float32
}

// Start begins an utterance of this session.
func (s *Session) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	return s.rec.start(ctx, sampleRate, s)
}

// Close forgets the session's mean. Idempotent.
func (s *Session) Close() error { return nil }

// CMN returns the cepstral mean the session's next utterance starts from.
func (s *Session) CMN() []float32 { return append([]float32(nil), s.mean()...) }

func (s *Session) mean() []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmn
}

// learn keeps the mean a decoder ended an utterance with. It copies into a
// new slice: start may still hold the old one.
func (s *Session) learn(d *csphinx.Decoder) {
	m := d.CMN(make([]float32, 0, len(s.rec.cmn)))
	if len(m) == 0 {
		return
	}
	s.mu.Lock()
	s.cmn = m
	s.mu.Unlock()
}
