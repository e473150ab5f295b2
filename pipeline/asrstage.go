package pipeline

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
)

// asrStage owns the utterance's asr.Stream: it is the only goroutine that
// calls Write and Close (the asr.Stream contract).
type asrStage struct {
	rec asr.Recognizer
	log zerolog.Logger

	stream       asr.Stream
	results      <-chan asr.Result
	trace        *traceRec
	firstPartial bool
}

func (a *asrStage) run(ctx context.Context, in <-chan asrCmd, toHub chan<- asrEvent) error {
	defer close(toHub)
	defer a.abort()
	for {
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
			if err := a.command(ctx, c, toHub); err != nil {
				return err
			}
		}
	}
}

func (a *asrStage) command(ctx context.Context, c asrCmd, toHub chan<- asrEvent) error {
	switch c.kind {
	case asrStart:
		a.abort() // a stream left open by a lost end; cannot happen, costs nothing
		st, err := safeCall("asr start", a.log, func() (asr.Stream, error) { return a.rec.Start(ctx, asrRate) })
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
