package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
)

// ttsStage speaks the chunks of the current turn one after another. Jobs of
// a cut turn are dropped unspoken (that is how queued TTS is discarded).
//
// Synthesize blocks while it streams, so its output is read by a second
// goroutine, the forwarder. The stage announces each call on calls before
// calling Synthesize and reports its end after; calls and pcm are both
// unbuffered, so every send completes only when the forwarder has received
// it and the forwarder sees begin, the call's chunks, end, in that order.
type ttsStage struct {
	synth   tts.Synthesizer
	log     zerolog.Logger
	gate    *TTSGate // nil: chunks are synthesised as they come
	outRate int      // the pacer's rate (turn.queuedOut, sentOut)

	turn   *turn // the turn of the last job, and how many chunks of it were spoken
	chunks int
}

func (s *ttsStage) run(ctx context.Context, jobs <-chan ttsJob, calls chan<- ttsCall, pcm chan<- tts.Chunk, toHub chan<- ttsFailure) error {
	defer close(calls)
	defer close(pcm) // after Synthesize returned: nothing sends on it any more
	defer close(toHub)
	for {
		var job ttsJob
		select {
		case <-ctx.Done():
			return ctx.Err()
		case j, ok := <-jobs:
			if !ok {
				return nil
			}
			job = j
		}
		t := job.t
		if t != s.turn {
			s.turn, s.chunks = t, 0
		}
		if t.committed != nil && s.chunks > 0 {
			// A speculative answer speaks its first chunk only until the
			// commit (or its cancellation).
			select {
			case <-t.committed:
			case <-t.ctx.Done():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		speakable := strings.TrimSpace(job.text) != ""
		if speakable && s.chunks > 0 && t.ctx.Err() == nil && job.replay == nil {
			// A later chunk: an answer still waiting for its first audio
			// goes first while this one has audio queued (TTSGate).
			if d := s.gate.wait(t.ctx, func() time.Duration { return s.ahead(t) }); d > 0 { //nolint:contextcheck // t.ctx is the turn's, a child of ctx made by the hub
				s.log.Trace().Dur("waited", d).Msg("tts: a later chunk waited for first chunks")
			}
		}
		if speakable {
			s.chunks++
		}
		if t.ctx.Err() == nil && speakable {
			if err := sendCtx(ctx, calls, ttsCall{kind: callBegin, job: job}); err != nil {
				return err
			}
			_, err := safeCall(t.ctx, "tts synthesize", s.log, func(ctx context.Context) (struct{}, error) { //nolint:contextcheck // t.ctx is the turn's, a child of ctx made by the hub
				if job.replay != nil {
					return struct{}{}, replay(ctx, job.replay, pcm) // cached audio: no synthesis
				}
				return struct{}{}, s.synth.Synthesize(ctx, job.text, pcm)
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := sendCtx(ctx, calls, ttsCall{kind: callEnd, job: job}); err != nil {
				return err
			}
			if err != nil && t.ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("tts failed")
				if err := sendCtx(ctx, toHub, ttsFailure{t: t, err: fmt.Errorf("tts: %w", err)}); err != nil {
					return err
				}
			}
		}
		if speakable || job.last || t.ctx.Err() != nil {
			t.ttsHold.release() // its first chunk is done, or none will be
		}
		if job.last && t.ctx.Err() == nil {
			if err := sendCtx(ctx, calls, ttsCall{kind: callTurnEnd, job: job}); err != nil {
				return err
			}
		}
	}
}

// ahead is t's audio queued ahead of playback: handed to the pacer and not
// yet sent.
func (s *ttsStage) ahead(t *turn) time.Duration {
	n := t.queuedOut.Load() - t.sentOut.Load()
	if n <= 0 || s.outRate <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second / time.Duration(s.outRate)
}

// ttsForwarder receives the engine's chunks, resamples them to OutputRate
// and hands them to the pacer with their word marks converted to absolute
// output samples of the turn.
type ttsForwarder struct {
	rs                 *audio.Resampler // synthesizer rate → OutputRate; nil when equal
	inRate, outRate    int
	log                zerolog.Logger
	tailPad            []int16 // zeros that push the resampler's held-back tail out
	cur                *turn
	job                ttsJob
	inPos, callStartIn int // synthesizer samples of the turn: total, before this call
	outPos             int // output samples of the turn handed to the pacer
	firstAudio         bool
}

func newTTSForwarder(inRate, outRate int, log zerolog.Logger) (*ttsForwarder, error) {
	f := &ttsForwarder{inRate: inRate, outRate: outRate, log: log}
	if inRate != outRate {
		rs, err := audio.NewResampler(inRate, outRate)
		if err != nil {
			return nil, fmt.Errorf("%w: tts rate: %w", ErrConfig, err)
		}
		f.rs = rs
		f.tailPad = make([]int16, inRate/100) // 10 ms, more than the filter holds back
	}
	return f, nil
}

// toOut converts a sample position at the synthesizer's rate to OutputRate.
func (f *ttsForwarder) toOut(in int) int { return int(int64(in) * int64(f.outRate) / int64(f.inRate)) }

func (f *ttsForwarder) run(ctx context.Context, calls <-chan ttsCall, pcm <-chan tts.Chunk, toPacer chan<- pacedAudio) error {
	defer close(toPacer)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c, ok := <-calls:
			if !ok {
				return nil // the TTS stage is gone, and with it every sender on pcm
			}
			if err := f.call(ctx, c, toPacer); err != nil {
				return err
			}
		case ch, ok := <-pcm:
			if !ok {
				pcm = nil
				continue
			}
			if err := f.chunk(ctx, ch, toPacer); err != nil {
				return err
			}
		}
	}
}

func (f *ttsForwarder) call(ctx context.Context, c ttsCall, toPacer chan<- pacedAudio) error {
	t := c.job.t
	if t != f.cur {
		f.cur, f.inPos, f.outPos, f.firstAudio = t, 0, 0, false
		if f.rs != nil {
			f.rs.Reset()
		}
	}
	switch c.kind {
	case callBegin:
		f.job, f.callStartIn = c.job, f.inPos
		if rc := t.recording(); rc != nil {
			rc.begin(c.job.text)
		}
	case callEnd:
		// The whole chunk has been heard once the call's audio has played,
		// whether or not the engine reported word timings.
		end := heardMark{textEnd: c.job.ends[len(c.job.ends)-1], outEnd: f.toOut(f.inPos)}
		return f.send(ctx, toPacer, pacedAudio{t: t, marks: []heardMark{end}})
	case callTurnEnd:
		var tail []int16
		if f.rs != nil {
			if want := f.toOut(f.inPos) - f.outPos; want > 0 {
				tail = f.rs.Process(make([]int16, 0, f.rs.MaxOutput(len(f.tailPad))), f.tailPad)
				tail = tail[:min(want, len(tail))]
			}
		}
		return f.send(ctx, toPacer, pacedAudio{t: t, pcm: tail, end: true})
	}
	return nil
}

func (f *ttsForwarder) chunk(ctx context.Context, ch tts.Chunk, toPacer chan<- pacedAudio) error {
	t := f.cur
	if t == nil || t.ctx.Err() != nil {
		return nil // cut: drop the rest of the turn's audio
	}
	if len(ch.PCM) > 0 && !f.firstAudio {
		f.firstAudio = true
		t.trace.mark(MarkTTSFirstAudio)
	}
	var marks []heardMark
	if len(ch.Words) > 0 {
		ends := f.job.ends
		marks = make([]heardMark, 0, len(ch.Words))
		for _, w := range ch.Words {
			te := min(max(w.TextEnd, 0), len(ends)-1)
			marks = append(marks, heardMark{textEnd: ends[te], outEnd: f.toOut(f.callStartIn + w.EndSample)})
		}
	}
	if rc := t.recording(); rc != nil {
		rc.add(ch)
	}
	f.inPos += len(ch.PCM)
	out := ch.PCM // ownership passed to us, and now to the pacer
	if f.rs != nil {
		out = f.rs.Process(make([]int16, 0, f.rs.MaxOutput(len(ch.PCM))), ch.PCM)
	}
	f.outPos += len(out)
	t.queuedOut.Add(int64(len(out)))
	if len(out) == 0 && len(marks) == 0 {
		return nil
	}
	return f.send(ctx, toPacer, pacedAudio{t: t, pcm: out, marks: marks})
}

func (f *ttsForwarder) send(ctx context.Context, toPacer chan<- pacedAudio, m pacedAudio) error {
	return sendCtx(ctx, toPacer, m)
}
