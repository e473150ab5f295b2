package pipeline

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// Trace is one turn's latency trace: when each mark (MarkSpeechStart, ...)
// happened. Marks that did not happen are absent.
type Trace struct {
	Turn        int
	Marks       map[string]time.Time
	Interrupted bool

	// Prompt tokens of the turn's LLM request, as the backend reported them
	// (llm.Usage; all zero when it reported none, e.g. a cut turn).
	// PromptTokens − CachedTokens is what the request had to prefill.
	PromptTokens int
	CachedTokens int // reused from the backend's cache (earlier turns, early start)
	// EarlyTokens is how many prompt tokens early start prefilled for the
	// turn while the person spoke. Most of them are then cached; the chat
	// template's closing tokens, and words the final changed, are not.
	EarlyTokens int
	// TTFT is the split of the time to first token the backend reported
	// (llm.Usage), for the trace event: a remote backend's ttft_network and
	// ttft_server, and ttft_queue + ttft_compute where known (the engine,
	// or a server that reports its timings). Parts not reported are absent.
	TTFT map[string]time.Duration
	// EndOfTurn says how the turn's end was decided and whether its answer
	// was speculative.
	EndOfTurn EndOfTurn
	// KnowledgePassages and KnowledgeTokens are what the knowledge stage
	// added to the final request (llm.Augmentation).
	KnowledgePassages int
	KnowledgeTokens   int
	// ToolCalls are the turn's tool calls in the order they started.
	ToolCalls []ToolCallRecord
	// Cache is the answer cache's outcome (CacheHit, CacheMiss, CacheOff;
	// "" for a turn that asked no question: a notice), and CacheBypass
	// why a question was not looked up (answercache.Reasons).
	Cache, CacheBypass string
}

// ToolCallRecord is one tool call of a turn.
type ToolCallRecord struct {
	Name     string
	Start    time.Time
	Duration time.Duration
	Outcome  string
}

// ToolTraces returns the calls for the trace event, timed from speech_end
// (from the first call when the turn has none: a timer's announcement).
func (t Trace) ToolTraces() []ToolTrace {
	if len(t.ToolCalls) == 0 {
		return nil
	}
	base, ok := t.Marks[MarkSpeechEnd]
	if !ok {
		base = t.ToolCalls[0].Start
	}
	out := make([]ToolTrace, len(t.ToolCalls))
	for i, c := range t.ToolCalls {
		out[i] = ToolTrace{Name: c.Name, AtMs: durationMs(c.Start.Sub(base)), DurationMs: durationMs(c.Duration), Outcome: c.Outcome}
	}
	return out
}

// TTFT part names (the latency vocabulary of architecture.md).
const (
	TTFTNetwork = "ttft_network"
	TTFTServer  = "ttft_server"
	TTFTQueue   = "ttft_queue"
	TTFTCompute = "ttft_compute"
)

// Event returns the trace event a session sends its client at the end of
// the turn (EventTrace, docs/protocol.md).
func (t Trace) Event() *Event {
	ev := &Event{
		Type: EventTrace, Turn: t.Turn, Marks: t.SinceSpeechEnd(), Interrupted: t.Interrupted,
		PromptTokens: t.PromptTokens, CachedTokens: t.CachedTokens, EarlyTokens: t.EarlyTokens,
		TTFTMs:            t.TTFTMs(),
		EndOfTurn:         t.EndOfTurn,
		KnowledgePassages: t.KnowledgePassages, KnowledgeTokens: t.KnowledgeTokens,
		Tools: t.ToolTraces(),
		Cache: t.Cache, CacheBypass: t.CacheBypass,
	}
	if v2v, ok := t.VoiceToVoice(); ok {
		ev.VoiceToVoiceMs = &v2v
	}
	if heard, ok := t.Heard(); ok {
		ev.HeardMs = &heard
	}
	return ev
}

// TTFTMs returns TTFT in milliseconds, or nil when there is none.
func (t Trace) TTFTMs() map[string]float64 {
	if len(t.TTFT) == 0 {
		return nil
	}
	ms := make(map[string]float64, len(t.TTFT))
	for k, d := range t.TTFT {
		ms[k] = durationMs(d)
	}
	return ms
}

func ttftParts(u llm.Usage) map[string]time.Duration {
	var m map[string]time.Duration
	add := func(k string, d time.Duration) {
		if d != 0 {
			if m == nil {
				m = make(map[string]time.Duration, 4)
			}
			m[k] = d
		}
	}
	add(TTFTNetwork, u.TTFTNetwork)
	add(TTFTServer, u.TTFTServer)
	add(TTFTQueue, u.TTFTQueue)
	add(TTFTCompute, u.TTFTCompute)
	return m
}

// SinceSpeechEnd returns, for every mark, its milliseconds since speech_end
// (negative for speech_start). It returns nil when speech_end is absent.
func (t Trace) SinceSpeechEnd() map[string]float64 {
	end, ok := t.Marks[MarkSpeechEnd]
	if !ok {
		return nil
	}
	ms := make(map[string]float64, len(t.Marks))
	for name, at := range t.Marks {
		ms[name] = durationMs(at.Sub(end))
	}
	return ms
}

// VoiceToVoice is first_audio_out − speech_end in milliseconds, the server's
// view of voice-to-voice latency; ok is false when either mark is absent.
func (t Trace) VoiceToVoice() (ms float64, ok bool) {
	end, ok1 := t.Marks[MarkSpeechEnd]
	out, ok2 := t.Marks[MarkFirstAudioOut]
	if !ok1 || !ok2 {
		return 0, false
	}
	return durationMs(out.Sub(end)), true
}

// Heard is first_audible_out − speech_end in milliseconds: the server's
// view of when the answer can first be heard; ok is false when either mark
// is absent.
func (t Trace) Heard() (ms float64, ok bool) {
	end, ok1 := t.Marks[MarkSpeechEnd]
	out, ok2 := t.Marks[MarkFirstAudibleOut]
	if !ok1 || !ok2 {
		return 0, false
	}
	return durationMs(out.Sub(end)), true
}

func durationMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Observer receives a session's measurements (web/metrics implements it). Its
// methods are called from the session's stage goroutines and must not block.
type Observer interface {
	TurnTraced(Trace)
	FrameDropped(reason string)
}

type nopObserver struct{}

func (nopObserver) TurnTraced(Trace)    {}
func (nopObserver) FrameDropped(string) {}

// traceRec collects one turn's marks. Several stages mark the same turn
// (audio-in, ASR, LLM, TTS, pacer), so the map is guarded; it is touched a
// dozen times per turn, never per frame or per token.
type traceRec struct {
	utt int // the utterance's number in the session (immutable)

	mu          sync.Mutex // guards the fields below
	turn        int
	marks       map[string]time.Time
	interrupted bool
	usage       llm.Usage // of the turn's LLM request
	early       int       // tokens prefilled early for this utterance
	eot         EndOfTurn
	knowledge   llm.Augmentation
	tools       []ToolCallRecord
	cache       string // Trace.Cache
	cacheBypass string
}

func newTraceRec(utt int) *traceRec {
	return &traceRec{utt: utt, marks: make(map[string]time.Time, len(MarkOrder))}
}

// mark records name at now unless it was already recorded (the first wins).
func (r *traceRec) mark(name string) time.Time {
	return r.markAt(name, time.Now())
}

func (r *traceRec) markAt(name string, at time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.marks[name]; ok {
		return prev
	}
	r.marks[name] = at
	if name == MarkInterrupted {
		r.interrupted = true
	}
	return at
}

func (r *traceRec) get(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.marks[name]
	return at, ok
}

func (r *traceRec) setTurn(turn int) {
	r.mu.Lock()
	r.turn = turn
	r.mu.Unlock()
}

func (r *traceRec) setUsage(u llm.Usage) {
	r.mu.Lock()
	r.usage = u
	r.mu.Unlock()
}

// observer returns a context whose requests report their knowledge
// augmentation to r: the first marks MarkKnowledge, the final's (final
// true) sets the counts. One closure per request, none per token.
func (r *traceRec) observer(ctx context.Context, final bool) context.Context {
	return llm.WithObserver(ctx, func(a llm.Augmentation) {
		r.mark(MarkKnowledge)
		if final {
			r.mu.Lock()
			r.knowledge = a
			r.mu.Unlock()
		}
	})
}

func (r *traceRec) addToolCall(c ToolCallRecord) {
	r.mu.Lock()
	r.tools = append(r.tools, c)
	r.mu.Unlock()
}

func (r *traceRec) addEarly(tokens int) {
	r.mu.Lock()
	r.early += tokens
	r.mu.Unlock()
}

// snapshot copies the marks into a Trace.
func (r *traceRec) snapshot() Trace {
	r.mu.Lock()
	defer r.mu.Unlock()
	marks := make(map[string]time.Time, len(r.marks))
	for k, v := range r.marks {
		marks[k] = v
	}
	return Trace{
		Turn: r.turn, Marks: marks, Interrupted: r.interrupted,
		PromptTokens: r.usage.PromptTokens, CachedTokens: r.usage.CachedTokens, EarlyTokens: r.early,
		TTFT:              ttftParts(r.usage),
		EndOfTurn:         r.eot,
		KnowledgePassages: r.knowledge.Passages, KnowledgeTokens: r.knowledge.Tokens,
		ToolCalls: slices.Clone(r.tools),
		Cache:     r.cache, CacheBypass: r.cacheBypass,
	}
}

func (r *traceRec) setCache(outcome, bypass string) {
	r.mu.Lock()
	r.cache, r.cacheBypass = outcome, bypass
	r.mu.Unlock()
}
