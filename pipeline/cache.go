package pipeline

import (
	"context"
	"slices"
	"strings"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
	"github.com/voxpipe/voxpipe/tts"
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
	names := make([]string, len(t.req.Tools))
	for i, tool := range t.req.Tools {
		names[i] = tool.Name
	}
	slices.Sort(names)
	s.Tools = strings.Join(names, ",")
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
	if tc == nil || tc.hit != nil || t.llmFailed || t.cut != cutNone || len(t.exchange) > 0 ||
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
	if t.cache == nil || t.cache.hit != nil || t.cache.over {
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
