package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/chunk"
)

// The answer cache (Backends.Answers). A turn whose words are safe to
// answer from a cache (answercache.Classify) is looked up when it starts.
// On a hit the LLM stage hands the cached answer's text to the turn
// manager and its audio, chunk by chunk, to the TTS stage, which passes it
// to the forwarder as if it had synthesised it: the same resampling,
// pacing, word marks and barge-in, with neither the LLM nor the TTS run.
// On a miss the forwarder keeps a copy of the audio it forwards, and the
// turn manager stores the answer once it played out whole; a turn that was
// cut, failed or called a tool is never stored.

// Trace cache outcomes (Trace.Cache, the trace event's cache field).
const (
	CacheHit  = "hit"
	CacheMiss = "miss"
	CacheOff  = "off" // no cache, or the question bypassed it (Trace.CacheBypass says why)
)

// AnswerCache is what a session needs to use an answer cache.
type AnswerCache struct {
	Cache *answercache.Cache
	// Scope names the deployment (model, voice, language); the session
	// adds its system prompt and the tools its turns may call.
	Scope answercache.Scope
	// Knowledge returns the knowledge base's version now ("" for none, or
	// not ready); nil: no knowledge base.
	Knowledge func() string
	// NoLearn keeps the answers of live turns out: only what Preload
	// stored is served.
	NoLearn bool
}

// turnCache is a turn's use of the answer cache.
type turnCache struct {
	ac       *AnswerCache
	scope    answercache.Scope
	meaning  answercache.Meaning
	question string
	hit      *answercache.Entry // nil on a miss

	// The miss's audio as forwarded, owned by the TTS forwarder until the
	// pacer reports the turn's audio ended (the turn manager reads it
	// after that report).
	pieces   []answercache.Piece
	bytes    int64
	maxBytes int64 // 0: no bound
	over     bool  // the audio outgrew maxBytes: the answer is stored without it
}

// attachCache looks t's question up and records the outcome in its trace;
// msgs is the request's conversation, the question last.
func (h *hub) attachCache(t *turn, question string, msgs []llm.Message) {
	ac := h.s.be.Answers
	if ac == nil || ac.Cache == nil {
		t.trace.setCache(CacheOff, "")
		return
	}
	m := answercache.Parse(question)
	prior := -1 // the question itself is the last user message
	for _, msg := range msgs {
		if msg.Role == llm.RoleUser {
			prior++
		}
	}
	if why := answercache.Classify(m, prior); why != "" {
		t.trace.setCache(CacheOff, why)
		return
	}
	tc := &turnCache{ac: ac, scope: h.cacheScope(t), meaning: m, question: question, maxBytes: ac.Cache.MaxEntryAudioBytes()}
	tc.hit = ac.Cache.Lookup(tc.scope, m)
	if tc.hit != nil {
		t.trace.setCache(CacheHit, "")
		h.log.Debug().Str("question", question).Str("cached", tc.hit.Question).Msg("answer cache hit")
	} else {
		t.trace.setCache(CacheMiss, "")
	}
	t.cache = tc
}

func (h *hub) cacheScope(t *turn) answercache.Scope {
	ac := h.s.be.Answers
	s := ac.Scope
	s.SystemPrompt = h.cfg.SystemPrompt
	s.Tools = toolNames(t.req.Tools)
	if ac.Knowledge != nil {
		s.Knowledge = ac.Knowledge()
	}
	return s
}

// storeAnswer keeps t's answer when it is a miss that played out whole
// and called no tool. Called by the turn manager once the LLM is done and
// the pacer has reported the audio's end.
func (h *hub) storeAnswer(t *turn) {
	tc := t.cache
	if tc == nil || tc.hit != nil || tc.ac.NoLearn || t.llmFailed || t.cut != cutNone || len(t.exchange) > 0 ||
		(t.committed != nil && !t.promoted) {
		return
	}
	pieces := tc.pieces
	if tc.over {
		pieces = nil
	}
	if tc.ac.Cache.Store(tc.scope, tc.meaning, tc.question, strings.TrimSpace(t.answer), pieces) {
		h.log.Debug().Str("question", tc.question).Int64("audio_bytes", tc.bytes).Msg("answer cached")
	}
	tc.pieces = nil
}

// recording returns t's cache use when the forwarder should keep its audio.
func (t *turn) recording() *turnCache {
	if t.cache == nil || t.cache.hit != nil || t.cache.over || t.cache.ac.NoLearn {
		return nil
	}
	return t.cache
}

// begin starts the piece of a TTS call.
func (tc *turnCache) begin(text string) {
	tc.pieces = append(tc.pieces, answercache.Piece{Text: text})
}

// add keeps a copy of a chunk of the current piece (the original goes on
// to the pacer and the transport, who own it).
func (tc *turnCache) add(ch tts.Chunk) {
	if len(tc.pieces) == 0 {
		return
	}
	tc.bytes += int64(2 * len(ch.PCM))
	if tc.maxBytes > 0 && tc.bytes > tc.maxBytes {
		tc.over, tc.pieces = true, nil
		return
	}
	p := &tc.pieces[len(tc.pieces)-1]
	p.Audio = append(p.Audio, tts.Chunk{PCM: slices.Clone(ch.PCM), Words: slices.Clone(ch.Words)})
}

// replay is the TTS stage's Synthesize for a cached piece: it sends copies
// of the piece's chunks (their receiver owns them) as the synthesizer did.
func replay(ctx context.Context, p *answercache.Piece, out chan<- tts.Chunk) error {
	for _, ch := range p.Audio {
		c := tts.Chunk{PCM: slices.Clone(ch.PCM), Words: ch.Words} // Words are only read
		select {
		case out <- c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// replayAnswer speaks a cached answer: its text to the turn manager at
// once, its pieces to the TTS stage with their audio (or, for an entry
// kept without audio, its text to be synthesised again).
func (a *answering) replayAnswer(e *answercache.Entry) {
	a.text.WriteString(e.Answer)
	if !a.send(llmEvent{t: a.t, delta: e.Answer}) {
		return
	}
	if e.Pieces == nil {
		for _, piece := range a.l.chunker.Push(e.Answer) {
			if !a.speak(piece, false) {
				return
			}
		}
		a.speak(a.l.chunker.Flush(), true)
		return
	}
	for i := range e.Pieces {
		if !a.speakCached(&e.Pieces[i]) {
			return
		}
	}
	a.speak("", true)
}

// Preload answers questions as a session's first turn would (cfg's system
// prompt, sampling and chunking; the tools be offers), synthesises the
// answers with be.TTS and stores them, text and audio. Questions the cache
// would bypass, answers that call a tool and failures are skipped (a
// failure is logged in the returned error, joined); it returns how many
// answers it stored.
func (ac *AnswerCache) Preload(ctx context.Context, be Backends, cfg Config, questions []string) (int, error) {
	var set *tools.Set
	if len(be.Tools) > 0 {
		set = tools.NewSet(cfg.Tools.Limits, be.Tools...)
	}
	specs := set.Specs()
	stored := 0
	var errs []error
	for _, q := range questions {
		if ctx.Err() != nil {
			return stored, ctx.Err()
		}
		m := answercache.Parse(q)
		if answercache.Classify(m, 0) != "" {
			continue
		}
		var msgs []llm.Message
		if cfg.SystemPrompt != "" {
			msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: cfg.SystemPrompt})
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: q})
		req := llm.Request{Messages: msgs, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, Tools: specs}
		text, ok, err := preloadAnswer(ctx, be.LLM, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", q, err))
			continue
		}
		if !ok {
			continue // it called a tool
		}
		ch := chunk.New(cfg.Chunk)
		pieces := make([]answercache.Piece, 0, 4)
		for _, p := range append(ch.Push(text), ch.Flush()) {
			if strings.TrimSpace(p) == "" {
				continue
			}
			audio, err := preloadSpeech(ctx, be.TTS, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: tts: %w", q, err))
				pieces = nil
				break
			}
			pieces = append(pieces, answercache.Piece{Text: p, Audio: audio})
		}
		if pieces == nil {
			continue
		}
		scope := ac.Scope
		scope.SystemPrompt = cfg.SystemPrompt
		scope.Tools = toolNames(specs)
		if ac.Knowledge != nil {
			scope.Knowledge = ac.Knowledge()
		}
		if ac.Cache.Store(scope, m, q, strings.TrimSpace(text), pieces) {
			stored++
		}
	}
	return stored, errors.Join(errs...)
}

// preloadAnswer streams req's answer; ok is false when it called a tool.
func preloadAnswer(ctx context.Context, model llm.Model, req llm.Request) (text string, ok bool, err error) {
	tokens, err := model.Stream(ctx, req)
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for tok := range tokens {
		if tok.Err != nil {
			return "", false, tok.Err
		}
		if len(tok.ToolCalls) > 0 {
			for range tokens { // drain: the stream closes after its Done token
			}
			return "", false, nil
		}
		b.WriteString(tok.Text)
		if tok.Done {
			return b.String(), true, nil
		}
	}
	if ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	return "", false, errLLMClosed
}

// preloadSpeech synthesises text and returns its chunks.
func preloadSpeech(ctx context.Context, synth tts.Synthesizer, text string) ([]tts.Chunk, error) {
	out := make(chan tts.Chunk)
	var audio []tts.Chunk
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(out)
		return synth.Synthesize(gctx, text, out)
	})
	for c := range out {
		audio = append(audio, c)
	}
	return audio, g.Wait()
}

func toolNames(specs []llm.Tool) string {
	names := make([]string, len(specs))
	for i, tool := range specs {
		names[i] = tool.Name
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
