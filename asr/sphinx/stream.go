package sphinx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
)

// resultsBuffer is the capacity of Results. The last slot is reserved for
// the final, so partials are dropped (never block Write) once
// resultsBuffer-1 are waiting unread.
const resultsBuffer = 16

// stream is one utterance on one decoder.
type stream struct {
	rec     *Recognizer
	sess    *Session // nil for Recognizer.Start
	ctx     context.Context
	results chan asr.Result
	stop    func() bool // unregisters the ctx.AfterFunc

	mu      sync.Mutex // guards everything below, shared by Write/Close and the cancel callback
	dec     *csphinx.Decoder
	ended   bool   // Close ran or ctx was cancelled; dec is back in the pool
	broken  bool   // a Write failed: dec's state is unknown, free it at the end
	sent    []byte // text of the last partial delivered
	unmeant int    // samples decoded since the CMN mean was last updated
	scratch []byte // current hypothesis, reused every Write
}

func newStream(ctx context.Context, r *Recognizer, d *csphinx.Decoder, sess *Session) *stream {
	s := &stream{
		rec:     r,
		sess:    sess,
		ctx:     ctx,
		results: make(chan asr.Result, resultsBuffer),
		dec:     d,
		sent:    make([]byte, 0, 128),
		scratch: make([]byte, 0, 128),
	}
	s.stop = context.AfterFunc(ctx, s.cancel)
	return s
}

func (s *stream) Results() <-chan asr.Result { return s.results }

// Write decodes pcm (16 kHz mono) and delivers a partial when the
// hypothesis text changed. It does not allocate unless the text changed.
func (s *stream) Write(pcm []int16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("sphinx: write: %w", err)
		}
		return fmt.Errorf("sphinx: write: %w", ErrClosed)
	}
	if err := s.rec.process(s.dec, pcm); err != nil {
		// pocketsphinx may have stopped mid-frame: the decoder must not
		// serve another utterance, even if ending this one succeeds.
		s.broken = true
		return fmt.Errorf("sphinx: write: %w", err)
	}
	if s.rec.cmnEvery > 0 {
		if s.unmeant += len(pcm); s.unmeant >= s.rec.cmnEvery {
			s.unmeant = 0
			s.dec.RefreshCMN()
		}
	}
	s.scratch = s.dec.AppendHyp(s.scratch[:0])
	if len(s.scratch) == 0 || bytes.Equal(s.scratch, s.sent) {
		return nil
	}
	// Keep the last slot for the final; a dropped partial is retried on
	// the next Write because s.sent is only updated on delivery.
	if len(s.results) >= cap(s.results)-1 {
		return nil
	}
	s.results <- asr.Result{Text: string(s.scratch), At: time.Now()}
	s.sent = append(s.sent[:0], s.scratch...)
	return nil
}

// Close ends the utterance, delivers the final (always: a slot is kept
// free for it), closes Results and returns the decoder to the pool. After a
// cancellation it only reports nothing left to do. Idempotent.
func (s *stream) Close() error {
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	s.ended = true
	d := s.dec
	s.dec = nil
	err := d.EndUtt()
	if err != nil {
		// The decoder's state is unknown: free it rather than pool it, and
		// still deliver the best text there is as the final.
		s.rec.release(d, false)
		s.results <- asr.Result{Text: string(s.sent), Final: true, At: time.Now()}
		close(s.results)
		return fmt.Errorf("sphinx: close: %w", err)
	}
	text := d.Hyp()
	if !s.broken {
		text = s.rec.rescore(s.ctx, d, text)
	}
	s.results <- asr.Result{Text: text, Final: true, At: time.Now()}
	close(s.results)
	if s.broken {
		// Neither the decoder nor the mean it ended with can be trusted.
		s.rec.release(d, false)
		return nil
	}
	if s.sess != nil {
		s.sess.learn(d)
	}
	s.rec.release(d, true)
	return nil
}

// cancel runs on ctx's AfterFunc goroutine: Results closes at once without
// a final; the decoder's utterance is then ended (discarding the result) so
// it can go back to the pool.
func (s *stream) cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	close(s.results)
	d := s.dec
	s.dec = nil
	if err := d.EndUtt(); (err != nil && !errors.Is(err, csphinx.ErrClosed)) || s.broken {
		s.rec.release(d, false)
		return
	}
	s.rec.release(d, true)
}
