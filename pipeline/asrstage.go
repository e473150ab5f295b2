package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
)

// asrBacklogFrames bounds the audio the ASR stage keeps when recognition
// lags: 60 s of 20 ms frames (1.9 MB at most, allocated only while lagging).
// Beyond the input queue's 3 s the audio-in stage would drop frames, and the
// person's words with them (issue 12 saw "today only platforms one and three
// are used" come back as "today only reforms one and the wheel used" under
// load); the backlog takes the queue's frames instead and the recogniser
// catches up after the utterance. Only past 60 s are frames dropped
// ("asr_backlog_full").
const asrBacklogFrames = 3000

// asrBacklogAt is the queue length at which the stage moves waiting frames
// into its backlog (0.6 s behind): below it, frames are decoded straight from
// audio-in's ring without a copy.
const asrBacklogAt = asrQueueFrames / 5

// ASRBufferObserver is an optional Observer method: n frames were kept in
// the ASR stage's backlog because recognition fell behind real time (web's
// metrics count them as voxpipe_asr_frames_buffered_total).
type ASRBufferObserver interface {
	ASRFramesBuffered(n int)
}

// asrStage owns the utterance's asr.Stream: it is the only goroutine that
// calls Write and Close (the asr.Stream contract).
type asrStage struct {
	rec       asr.Recognizer
	log       zerolog.Logger
	obs       Observer
	inputRate int // the client's rate, for asr.SessionOptions

	// backlog holds commands taken off the input queue but not yet
	// handled, in order; frames in it own their pcm (copied from the
	// ring, whose slots audio-in reuses). free recycles those buffers.
	backlog []asrCmd
	head    int
	free    [][]int16

	stream       asr.Stream
	results      <-chan asr.Result
	trace        *traceRec
	firstPartial bool
}

func (a *asrStage) run(ctx context.Context, in <-chan asrCmd, toHub chan<- asrEvent) error {
	defer close(toHub)
	defer a.abort()
	if s, ok := a.rec.(asr.Sessioner); ok {
		sess := s.NewSession(asr.SessionOptions{InputRate: a.inputRate})
		defer sess.Close()
		a.rec = sess
	}
	for {
		if a.head < len(a.backlog) {
			// Behind: keep taking what audio-in queued, then work on the
			// oldest command.
			a.take(in)
			c := a.backlog[a.head]
			a.backlog[a.head] = asrCmd{}
			a.head++
			switch {
			case a.head == len(a.backlog):
				a.backlog, a.head = a.backlog[:0], 0
			case a.head >= 512 && 2*a.head >= len(a.backlog):
				// Still behind: drop the handled half so the slice
				// stays within the bound.
				n := copy(a.backlog, a.backlog[a.head:])
				clear(a.backlog[n:])
				a.backlog, a.head = a.backlog[:n], 0
			}
			err := a.command(ctx, c, in, toHub)
			if c.kind == asrFrame {
				a.free = append(a.free, c.pcm[:cap(c.pcm)])
			}
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r, ok := <-a.results: // nil (never ready) without a stream
			if !ok {
				a.results = nil // the stream's context ended
				continue
			}
			if err := a.result(ctx, r, toHub); err != nil {
				return err
			}
		case c, ok := <-in:
			if !ok {
				return nil
			}
			if err := a.command(ctx, c, in, toHub); err != nil {
				return err
			}
			if len(in) >= asrBacklogAt {
				a.take(in)
			}
		}
	}
}

// take moves every command waiting in in to the backlog, copying frames
// out of audio-in's ring. Past asrBacklogFrames, frames are dropped and
// counted; starts and ends are always kept.
func (a *asrStage) take(in <-chan asrCmd) {
	n := 0
	for {
		var c asrCmd
		var ok bool
		select {
		case c, ok = <-in:
		default:
			ok = false
		}
		if !ok {
			// Nothing waiting, or in is closed (the session is ending: run
			// handles the backlog, then sees the close). Receiving from a
			// closed channel again would loop here forever, appending
			// zero commands without bound.
			if n > 0 {
				if o, ok := a.obs.(ASRBufferObserver); ok {
					o.ASRFramesBuffered(n)
				}
			}
			return
		}
		if c.kind == asrFrame {
			if len(a.backlog)-a.head >= asrBacklogFrames {
				a.obs.FrameDropped("asr_backlog_full")
				continue
			}
			var buf []int16
			if k := len(a.free); k > 0 {
				buf, a.free = a.free[k-1], a.free[:k-1]
			}
			if cap(buf) < len(c.pcm) {
				buf = make([]int16, len(c.pcm))
			}
			c.pcm = append(buf[:0], c.pcm...)
			n++
		}
		a.backlog = append(a.backlog, c)
	}
}

func (a *asrStage) command(ctx context.Context, c asrCmd, in <-chan asrCmd, toHub chan<- asrEvent) error {
	switch c.kind {
	case asrStart:
		a.abort() // a stream left open by a lost end; cannot happen, costs nothing
		st, err := a.start(ctx, in)
		if err != nil {
			return a.fail(ctx, toHub, fmt.Errorf("asr: start: %w", err))
		}
		a.stream, a.results, a.trace, a.firstPartial = st, st.Results(), c.trace, false
		return a.write(ctx, c.pcm, toHub)
	case asrFrame:
		return a.write(ctx, c.pcm, toHub)
	case asrPause:
		if a.stream == nil || a.trace == nil {
			return nil
		}
		if err := a.write(ctx, nil, toHub); err != nil { // what is ready first
			return err
		}
		return a.send(ctx, toHub, asrEvent{trace: a.trace, pause: c.seq})
	case asrEnd:
		if a.stream == nil {
			return nil
		}
		if err := a.stream.Close(); err != nil {
			// A remote recogniser fails here when the final never came:
			// the client hears why (the final, if any, is empty).
			if err := a.fail(ctx, toHub, fmt.Errorf("asr: %w", err)); err != nil {
				return err
			}
		}
		// The final is always delivered after Close; wait for it here so
		// the next utterance's stream starts after this one is done.
		for a.results != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case r, ok := <-a.results:
				if !ok {
					a.results = nil
					break
				}
				if err := a.result(ctx, r, toHub); err != nil {
					return err
				}
			}
		}
		a.stream, a.trace = nil, nil
	}
	return nil
}

// asrStartPoll is how often the stage moves audio-in's frames into its
// backlog while a Start is in progress.
const asrStartPoll = 100 * time.Millisecond

// start calls the recogniser's Start on a goroutine of its own and, while
// it runs, keeps moving what audio-in queues into the backlog. A Start can
// take seconds: a pocketsphinx decoder loaded on demand when the pool is
// empty costs 0.3-0.5 s of CPU, and several seconds while eight sessions
// arrive at once on two cores (voxbench lost 13 frames to asr_queue_full
// that way), or a remote recogniser's handshake. Without this the input
// queue (3 s) filled behind it and the person's first words were dropped.
func (a *asrStage) start(ctx context.Context, in <-chan asrCmd) (asr.Stream, error) {
	var (
		st  asr.Stream
		err error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		st, err = safeCall(ctx, "asr start", a.log, func(ctx context.Context) (asr.Stream, error) { return a.rec.Start(ctx, asrRate) })
	}()
	tick := time.NewTicker(asrStartPoll)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return st, err
		case <-tick.C:
			if len(in) >= asrBacklogAt {
				a.take(in)
			}
		}
	}
}

// write feeds pcm and then drains whatever hypotheses are ready, as the
// asr.Stream contract asks.
func (a *asrStage) write(ctx context.Context, pcm []int16, toHub chan<- asrEvent) error {
	if a.stream == nil {
		return nil // the stream failed; skip the rest of the utterance
	}
	if err := a.stream.Write(pcm); err != nil {
		a.abort()
		return a.fail(ctx, toHub, fmt.Errorf("asr: write: %w", err))
	}
	for a.results != nil {
		select {
		case r, ok := <-a.results:
			if !ok {
				a.results = nil
				return nil
			}
			if err := a.result(ctx, r, toHub); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

func (a *asrStage) result(ctx context.Context, r asr.Result, toHub chan<- asrEvent) error {
	if a.trace == nil {
		return nil
	}
	if r.Final {
		a.trace.mark(MarkASRFinal)
	} else {
		if r.Text == "" {
			return nil
		}
		if !a.firstPartial {
			a.firstPartial = true
			a.trace.mark(MarkASRFirstPartial)
		}
	}
	return a.send(ctx, toHub, asrEvent{trace: a.trace, text: r.Text, final: r.Final})
}

// fail reports a backend error to the turn manager (which tells the client)
// and keeps the stage serving.
func (a *asrStage) fail(ctx context.Context, toHub chan<- asrEvent, err error) error {
	a.log.Warn().Err(err).Msg("asr failed")
	return a.send(ctx, toHub, asrEvent{err: err})
}

func (a *asrStage) send(ctx context.Context, toHub chan<- asrEvent, ev asrEvent) error {
	select {
	case toHub <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abort closes an open stream without waiting for its final.
func (a *asrStage) abort() {
	if a.stream != nil {
		_ = a.stream.Close()
	}
	a.stream, a.results, a.trace = nil, nil, nil
}
