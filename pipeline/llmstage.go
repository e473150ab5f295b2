package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
	"github.com/voxpipe/voxpipe/tools"
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
	tools   ToolsConfig
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
			answer, exchange, err := l.answer(ctx, t, toTTS, toHub)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				l.log.Warn().Err(err).Msg("llm failed")
			}
			if err := sendCtx(ctx, toHub, llmEvent{t: t, done: true, answer: answer, exchange: exchange, err: err}); err != nil {
				return err
			}
		}
	}
}

// answer streams t's answer and returns the text generated. Its error is a
// backend failure; a cancelled turn returns nil. An answer that calls tools
// runs them (tools.go) and goes back to the model with their results, at
// most Config.Tools.MaxRounds times; the text of every round is spoken as
// it comes, and the rounds' messages go to the history with the answer.
func (l *llmStage) answer(ctx context.Context, t *turn, toTTS chan<- ttsJob, toHub chan<- llmEvent) (string, []llm.Message, error) {
	if t.ctx.Err() != nil {
		return "", nil, nil // cut before it started
	}
	l.chunker.Reset()
	// The answer waits for its first audio from here (TTSGate); the TTS
	// stage releases the hold once it has synthesised the first chunk.
	t.ttsHold = l.gate.hold()
	a := &answering{l: l, t: t, ctx: ctx, toTTS: toTTS, toHub: toHub}
	defer func() {
		if !a.spoke {
			t.ttsHold.release() // no chunk reached the TTS stage
		}
	}()
	if t.say != "" {
		if a.say(t.say) {
			a.speak("", true)
		}
		return a.text.String(), nil, nil
	}
	if t.cache != nil && t.cache.hit != nil {
		a.replayAnswer(t.cache.hit)
		return a.text.String(), nil, nil
	}
	t.trace.mark(MarkLLMRequest)
	req := t.req
	for round := 0; ; round++ {
		calls, err := a.stream(req, round == 0) //nolint:contextcheck // the turn's context, t.ctx, a child of ctx made by the hub
		if err != nil || t.ctx.Err() != nil {
			return a.text.String(), a.exchange, err
		}
		if len(calls) == 0 {
			a.speak(l.chunker.Flush(), true)
			return a.text.String(), a.exchange, nil
		}
		if round >= l.tools.MaxRounds {
			return a.roundsLimit(calls)
		}
		msgs, ok := a.runTools(calls)
		if !ok {
			return a.text.String(), a.exchange, nil
		}
		// The next round sees this round's calls and results.
		req.Messages = append(slices.Clip(req.Messages), msgs...)
	}
}

// answering is one answer in progress: what was generated and spoken.
type answering struct {
	l     *llmStage
	t     *turn
	ctx   context.Context
	toTTS chan<- ttsJob
	toHub chan<- llmEvent

	text       strings.Builder // every round's text, as spoken (the chunks align to it)
	roundText  strings.Builder // this round's, for its assistant message
	exchange   []llm.Message
	cursor     int // where the next chunk is looked for in text
	first      bool
	firstChunk bool
	spoke      bool
}

// speak hands a chunk to the TTS stage; last ends the turn's audio after
// it. It returns false when the turn was cut.
func (a *answering) speak(piece string, last bool) bool {
	return a.speakJob(ttsJob{t: a.t, text: piece, last: last})
}

// speakCached hands a cached piece, with its audio, to the TTS stage.
func (a *answering) speakCached(p *answercache.Piece) bool {
	return a.speakJob(ttsJob{t: a.t, text: p.Text, replay: p})
}

func (a *answering) speakJob(job ttsJob) bool {
	piece := job.text
	job.ends, a.cursor = alignChunk(a.text.String(), a.cursor, piece)
	select {
	case a.toTTS <- job:
		a.spoke = true // the TTS stage releases the hold from now on
	case <-a.t.ctx.Done():
		return false
	}
	if !a.firstChunk && piece != "" {
		a.firstChunk = true
		a.t.trace.mark(MarkTTSFirstChunk)
	}
	return true
}

// delta adds generated text: an answer event, then the chunks it completes.
func (a *answering) delta(s string) bool {
	a.text.WriteString(s)
	a.roundText.WriteString(s)
	if !a.send(llmEvent{t: a.t, delta: s}) {
		return false
	}
	for _, piece := range a.l.chunker.Push(s) {
		if !a.speak(piece, false) {
			return false
		}
	}
	return true
}

// say speaks a whole sentence of the server's own (a filler, a notice, a
// limit), after what was generated so far.
func (a *answering) say(s string) bool {
	if a.text.Len() > 0 {
		s = " " + s
	}
	for _, piece := range a.l.chunker.Push(s) {
		if !a.speak(piece, false) {
			return false
		}
	}
	a.text.WriteString(s)
	if !a.send(llmEvent{t: a.t, delta: s}) {
		return false
	}
	return a.speak(a.l.chunker.Flush(), false)
}

func (a *answering) send(ev llmEvent) bool {
	select {
	case a.toHub <- ev:
		return true
	case <-a.ctx.Done():
		return false
	}
}

// fail ends the turn after the chunks already queued (the text still in
// the chunker is an unfinished sentence and is not spoken), with the
// apology when one is set.
func (a *answering) fail(err error) ([]llm.ToolCall, error) {
	a.l.chunker.Reset()
	if ap := a.l.apology; ap != "" && a.send(llmEvent{t: a.t, delta: " " + ap}) {
		a.text.WriteString(" " + ap)
		a.cursor = a.text.Len() - len(ap)
		a.speak(ap, true)
	} else {
		a.speak("", true)
	}
	return nil, err
}

// stream runs one request and returns the tool calls it made. Its text is
// spoken as it comes; the text before a call is flushed to the TTS when
// the call arrives, so it is heard while the call runs.
func (a *answering) stream(req llm.Request, firstRound bool) ([]llm.ToolCall, error) {
	l, t := a.l, a.t
	a.roundText.Reset()
	tokens, err := safeCall(t.trace.observer(t.ctx, firstRound), "llm stream", l.log, func(ctx context.Context) (<-chan llm.Token, error) { return l.model.Stream(ctx, req) }) //nolint:contextcheck // t.ctx is the turn's, a child of ctx made by the hub
	if err != nil {
		if t.ctx.Err() != nil {
			return nil, nil
		}
		// A turn without an answer still ends (turn_end, trace).
		return a.fail(fmt.Errorf("llm: start: %w", err))
	}
	resetStall := func() {}
	var stallC <-chan time.Time
	if l.stall > 0 {
		stall := time.NewTimer(l.stall)
		defer stall.Stop()
		stallC = stall.C
		resetStall = func() { stall.Reset(l.stall) }
	}
	var calls []llm.ToolCall
	for {
		var tok llm.Token
		var ok bool
		select {
		case <-t.ctx.Done():
			return nil, nil
		case <-stallC:
			return a.fail(errLLMStalled)
		case tok, ok = <-tokens:
			resetStall()
		}
		if !ok {
			if t.ctx.Err() != nil {
				return nil, nil
			}
			return a.fail(errLLMClosed)
		}
		if tok.Err != nil {
			if t.ctx.Err() != nil {
				return nil, nil
			}
			return a.fail(fmt.Errorf("llm: %w", tok.Err))
		}
		if tok.Text != "" {
			if !a.first {
				a.first = true
				t.trace.mark(MarkLLMFirstToken)
			}
			if !a.delta(tok.Text) {
				return nil, nil
			}
		}
		if len(tok.ToolCalls) > 0 {
			if len(calls) == 0 && !a.speak(l.chunker.Flush(), false) {
				return nil, nil
			}
			calls = append(calls, tok.ToolCalls...)
		}
		if tok.Done {
			if tok.Usage != nil && firstRound {
				t.trace.setUsage(*tok.Usage)
			}
			if t.tools == nil && len(calls) > 0 {
				l.log.Warn().Int("calls", len(calls)).Msg("the model called tools the turn did not offer; ignored")
				calls = nil
			}
			return calls, nil
		}
	}
}

// runTools runs one round's calls (after the commit, for a speculative
// answer: nothing acts on words the person may not have finished), says a
// filler while they take long, and returns the round's messages; ok is
// false when the turn was cut.
func (a *answering) runTools(calls []llm.ToolCall) (msgs []llm.Message, ok bool) {
	t, l := a.t, a.l
	if t.committed != nil {
		select {
		case <-t.committed:
		case <-t.ctx.Done():
			return nil, false
		}
	}
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%d_%d", len(a.exchange), i)
		}
		ev := &Event{Type: EventToolCall, Turn: t.id, Tool: &ToolEvent{ID: calls[i].ID, Name: calls[i].Name, Arguments: calls[i].Arguments}}
		if !a.send(llmEvent{t: t, event: ev}) {
			return nil, false
		}
	}
	t.trace.mark(MarkToolCall) // the first call's start
	start := time.Now()
	done := t.tools.Start(t.ctx, t.conv, calls)
	var results []tools.Result
	var fillC <-chan time.Time
	fillers := l.tools.Fillers
	if len(fillers) > 0 && l.tools.FillerAfter > 0 {
		fill := time.NewTimer(l.tools.FillerAfter)
		defer fill.Stop()
		fillC = fill.C
		for results == nil {
			select {
			case results = <-done:
			case <-fillC:
				if !a.say(fillers[0]) {
					return nil, false
				}
				if len(fillers) > 1 {
					fillers = fillers[1:]
				}
				if l.tools.FillerEvery > 0 {
					fill.Reset(l.tools.FillerEvery)
				}
			}
		}
	} else {
		results = <-done
	}
	if t.ctx.Err() != nil {
		return nil, false
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: strings.TrimSpace(a.roundText.String()), ToolCalls: calls})
	for _, r := range results {
		d := durationMs(r.Duration)
		t.trace.addToolCall(ToolCallRecord{Name: r.Call.Name, Start: start, Duration: r.Duration, Outcome: r.Outcome})
		if r.Err != nil {
			l.log.Info().Str("tool", r.Call.Name).Str("outcome", r.Outcome).Err(r.Err).Msg("tool call failed")
		} else {
			l.log.Debug().Str("tool", r.Call.Name).Dur("took", r.Duration).Msg("tool call")
		}
		ev := &Event{Type: EventToolResult, Turn: t.id, Tool: &ToolEvent{
			ID: r.Call.ID, Name: r.Call.Name, Outcome: r.Outcome, DurationMs: &d, Result: clipEvent(r.Content),
		}}
		if !a.send(llmEvent{t: t, event: ev}) {
			return nil, false
		}
		msgs = append(msgs, r.Message())
	}
	a.exchange = append(a.exchange, msgs...)
	return msgs, true
}

// roundsLimit ends a turn whose model keeps calling tools: the calls of the
// round past the limit are not run; the person hears RoundsLimitSay and the
// client gets a tool_rounds error.
func (a *answering) roundsLimit(calls []llm.ToolCall) (string, []llm.Message, error) {
	a.l.log.Warn().Int("rounds", a.l.tools.MaxRounds).Int("calls", len(calls)).Msg("tool rounds limit reached; the last calls were not run")
	a.l.chunker.Reset()
	if s := a.l.tools.RoundsLimitSay; s != "" {
		a.say(s)
	}
	a.speak("", true)
	return a.text.String(), a.exchange, fmt.Errorf("%w: the model asked for tools %d times in one turn", errToolRounds, a.l.tools.MaxRounds+1)
}

// maxEventResult bounds a tool result carried in a tool_result event (the
// model gets all of it).
const maxEventResult = 512

func clipEvent(s string) string {
	if len(s) <= maxEventResult {
		return s
	}
	cut := maxEventResult
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
