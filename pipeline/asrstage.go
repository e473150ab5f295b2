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

// asrReplayMax bounds the audio an utterance keeps for asrResume (20 s,
// 640 KB): an utterance longer than that is no longer split at its pauses,
// so that a long turn is not decoded again and again.
const asrReplayMax = 20 * asrRate

// asrReplayKeep is the largest utterance buffer kept between utterances
// (5 s, 160 KB).
const asrReplayKeep = 5 * asrRate

// ASRBufferObserver is an optional Observer method: n frames were kept in
// the ASR stage's backlog because recognition fell behind real time (web's
// metrics count them as voxpipe_asr_frames_buffered_total).
type ASRBufferObserver interface {
	ASRFramesBuffered(n int)
}

// How a final made at a pause (Config.PauseFinal) ended.
const (
	PauseFinalCommitted = "committed" // the utterance ended in that pause: it was the final
	PauseFinalResumed   = "resumed"   // speech went on: the utterance was decoded again
)

// PauseFinalObserver is an optional Observer method: a final made at a pause
// ended as result; replayed is the audio decoded again for a resumption
// (web's metrics count voxpipe_asr_pause_finals_total{result} and
// voxpipe_asr_replayed_seconds_total, the CPU it costs).
type PauseFinalObserver interface {
	PauseFinalEnded(result string, replayed time.Duration)
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

	// Config.PauseFinal: the utterance's audio so far (keep), and the
	// final of the stream an asrSplit ended while the person pauses
	// (split; stream is nil then).
	keep      bool
	utt       []int16
	uttTooBig bool
	split     bool
	splitText string
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
		if cap(a.utt) > asrReplayKeep {
			a.utt = nil // a long utterance's buffer is not held for the session
		}
		a.split, a.utt, a.uttTooBig = false, a.utt[:0], false
		a.remember(c.pcm)
		return a.write(ctx, c.pcm, toHub)
	case asrFrame:
		a.remember(c.pcm)
		if a.split {
			return nil // kept for asrResume
		}
		return a.write(ctx, c.pcm, toHub)
	case asrSplit:
		return a.splitAt(ctx, c.seq, toHub)
	case asrResume:
		return a.resume(ctx, in, toHub)
	case asrPause:
		return a.pause(ctx, c.seq, toHub)
	case asrEnd:
		if a.split {
			// The final was made at the pause and nothing was said since.
			text := a.splitText
			a.split, a.splitText = false, ""
			if o, ok := a.obs.(PauseFinalObserver); ok {
				o.PauseFinalEnded(PauseFinalCommitted, 0)
			}
			if a.trace != nil {
				a.trace.setPauseFinal()
			}
			err := a.result(ctx, asr.Result{Text: text, Final: true, At: time.Now()}, toHub)
			a.trace = nil
			return err
		}
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

// pause reports pause seq once the audio before it is recognised.
func (a *asrStage) pause(ctx context.Context, seq int, toHub chan<- asrEvent) error {
	if a.stream == nil || a.trace == nil {
		return nil
	}
	if err := a.write(ctx, nil, toHub); err != nil { // what is ready first
		return err
	}
	return a.send(ctx, toHub, asrEvent{trace: a.trace, pause: seq})
}

// remember keeps pcm for a resumption after a split (Config.PauseFinal).
func (a *asrStage) remember(pcm []int16) {
	if !a.keep || a.uttTooBig {
		return
	}
	if len(a.utt)+len(pcm) > asrReplayMax {
		a.uttTooBig, a.utt = true, a.utt[:0]
		return
	}
	a.utt = append(a.utt, pcm...)
}

// splitAt ends the stream at pause seq and reports its final as the
// utterance's partial, then the pause: the end-of-turn score, a speculative
// answer and a commit in this pause get the final's words.
func (a *asrStage) splitAt(ctx context.Context, seq int, toHub chan<- asrEvent) error {
	if a.stream == nil || a.trace == nil || a.uttTooBig {
		return a.pause(ctx, seq, toHub)
	}
	text, err := a.closeStream(ctx, toHub)
	if err != nil {
		return err
	}
	if a.trace == nil { // the stream failed
		return nil
	}
	a.split, a.splitText = true, text
	if text != "" {
		if err := a.send(ctx, toHub, asrEvent{trace: a.trace, text: text}); err != nil {
			return err
		}
	}
	return a.send(ctx, toHub, asrEvent{trace: a.trace, pause: seq, pauseFinal: true})
}

// closeStream closes the stream and returns its final without reporting it
// (partials still waiting are dropped: the final supersedes them). A
// failure is reported as asrEnd reports one, and the utterance is over.
func (a *asrStage) closeStream(ctx context.Context, toHub chan<- asrEvent) (string, error) {
	closeErr := a.stream.Close()
	text := ""
	for a.results != nil {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case r, ok := <-a.results:
			if !ok {
				a.results = nil
			} else if r.Final {
				text = r.Text
			}
		}
	}
	a.stream = nil
	if closeErr != nil {
		a.trace = nil
		return "", a.fail(ctx, toHub, fmt.Errorf("asr: %w", closeErr))
	}
	return text, nil
}

// resume starts a new stream for speech after a split and feeds it the
// utterance from its first sample, so that its final covers the whole
// utterance in one decode as if there had been no split. The partials of
// that catching up are not reported: they repeat what was said.
func (a *asrStage) resume(ctx context.Context, in <-chan asrCmd, toHub chan<- asrEvent) error {
	if !a.split {
		return nil
	}
	st, err := a.start(ctx, in)
	if err != nil {
		// The words before the pause stay the final; what follows is lost,
		// and the client hears why.
		return a.fail(ctx, toHub, fmt.Errorf("asr: start: %w", err))
	}
	a.split, a.splitText = false, ""
	if o, ok := a.obs.(PauseFinalObserver); ok {
		o.PauseFinalEnded(PauseFinalResumed, time.Duration(len(a.utt))*time.Second/asrRate)
	}
	a.stream, a.results = st, st.Results()
	const piece = asrRate / 2 // drain between writes, as the contract asks
	for off := 0; off < len(a.utt); off += piece {
		if err := st.Write(a.utt[off:min(off+piece, len(a.utt))]); err != nil {
			a.abort()
			return a.fail(ctx, toHub, fmt.Errorf("asr: write: %w", err))
		}
		for drained := false; !drained && a.results != nil; {
			select {
			case _, ok := <-a.results:
				if !ok {
					a.results = nil // the stream's context ended
				}
			default:
				drained = true
			}
		}
		if len(in) >= asrBacklogAt {
			a.take(in) // the live audio waits in the backlog, not dropped
		}
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
	a.split, a.splitText = false, ""
}
