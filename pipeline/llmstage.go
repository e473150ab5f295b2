package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tts/chunk"
)

// llmStage streams one turn's answer at a time: text deltas go to the turn
// manager (answer events), speakable chunks to the TTS stage.
type llmStage struct {
	model   llm.Model
	chunker *chunk.Chunker
	log     zerolog.Logger
	stall   time.Duration // 0: no stall timeout
	apology string        // spoken after a failure; "" = none
	gate    *TTSGate      // nil: no ordering of the TTS (TTSGate)
}

func (l *llmStage) run(ctx context.Context, jobs <-chan *turn, toTTS chan<- ttsJob, toHub chan<- llmEvent) error {
	defer close(toTTS)
	defer close(toHub)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case t, ok := <-jobs:
			if !ok {
				return nil
			}
			answer, err := l.answer(ctx, t, toTTS, toHub)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				l.log.Warn().Err(err).Msg("llm failed")
			}
			if err := sendCtx(ctx, toHub, llmEvent{t: t, done: true, answer: answer, err: err}); err != nil {
				return err
			}
		}
	}
}

// answer streams t's answer and returns the text generated. Its error is a
// backend failure; a cancelled turn returns nil.
func (l *llmStage) answer(ctx context.Context, t *turn, toTTS chan<- ttsJob, toHub chan<- llmEvent) (string, error) {
	if t.ctx.Err() != nil {
		return "", nil // cut before it started
	}
	l.chunker.Reset()
	// The answer waits for its first audio from here (TTSGate); the TTS
	// stage releases the hold once it has synthesised the first chunk.
	t.ttsHold = l.gate.hold()
	spoke := false
	defer func() {
		if !spoke {
			t.ttsHold.release() // no chunk reached the TTS stage
		}
	}()
	t.trace.mark(MarkLLMRequest)
	var text strings.Builder
	cursor := 0 // where the next chunk is looked for in the answer
	first, firstChunk := true, true
	// speak hands a chunk to the TTS stage; last ends the turn's audio
	// after it. It returns false when the turn was cut.
	speak := func(piece string, last bool) bool {
		ends, next := alignChunk(text.String(), cursor, piece)
		cursor = next
		select {
		case toTTS <- ttsJob{t: t, text: piece, ends: ends, last: last}:
			spoke = true // the TTS stage releases the hold from now on
		case <-t.ctx.Done():
			return false
		}
		if firstChunk && piece != "" {
			firstChunk = false
			t.trace.mark(MarkTTSFirstChunk)
		}
		return true
	}
	// fail ends the turn after the chunks already queued (the text still
	// in the chunker is an unfinished sentence and is not spoken), with the
	// apology when one is set.
	fail := func(err error) (string, error) {
		if l.apology != "" {
			select {
			case toHub <- llmEvent{t: t, delta: " " + l.apology}:
			case <-ctx.Done():
				return text.String(), nil
			}
			text.WriteString(" " + l.apology)
			cursor = text.Len() - len(l.apology)
			speak(l.apology, true)
		} else {
			speak("", true)
		}
		return text.String(), err
	}
	resetStall := func() {}
	tokens, err := safeCall(t.trace.observer(t.ctx, true), "llm stream", l.log, func(ctx context.Context) (<-chan llm.Token, error) { return l.model.Stream(ctx, t.req) }) //nolint:contextcheck // t.ctx is the turn's, a child of ctx made by the hub
	if err != nil {
		if t.ctx.Err() != nil {
			return "", nil
		}
		// A turn without an answer still ends (turn_end, trace).
		return fail(fmt.Errorf("llm: start: %w", err))
	}
	var stallC <-chan time.Time
	if l.stall > 0 {
		stall := time.NewTimer(l.stall)
		defer stall.Stop()
		stallC = stall.C
		resetStall = func() { stall.Reset(l.stall) }
	}
	for {
		var tok llm.Token
		var ok bool
		select {
		case <-t.ctx.Done():
			return text.String(), nil
		case <-stallC:
			return fail(errLLMStalled)
		case tok, ok = <-tokens:
			resetStall()
		}
		if !ok {
			if t.ctx.Err() != nil {
				return text.String(), nil
			}
			return fail(errLLMClosed)
		}
		if tok.Err != nil {
			if t.ctx.Err() != nil {
				return text.String(), nil
			}
			return fail(fmt.Errorf("llm: %w", tok.Err))
		}
		if tok.Text != "" {
			if first {
				first = false
				t.trace.mark(MarkLLMFirstToken)
			}
			text.WriteString(tok.Text)
			select {
			case toHub <- llmEvent{t: t, delta: tok.Text}:
			case <-ctx.Done():
				return text.String(), nil
			}
			for _, piece := range l.chunker.Push(tok.Text) {
				if !speak(piece, false) {
					return text.String(), nil
				}
			}
		}
		if tok.Done {
			if tok.Usage != nil {
				t.trace.setUsage(*tok.Usage)
			}
			speak(l.chunker.Flush(), true)
			return text.String(), nil
		}
	}
}

// sendCtx sends v unless ctx ends first.
func sendCtx[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
