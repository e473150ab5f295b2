package web

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/answercache"
)

// Metrics holds the server's Prometheus collectors in a registry of its own
// (so tests can run several servers in one process). It implements
// pipeline.Observer: sessions report each turn's trace and every frame they
// drop. Its methods are safe for concurrent use.
type Metrics struct {
	registry *prometheus.Registry

	// marks holds voxpipe_<mark>_seconds per trace mark after speech_end.
	marks          map[string]prometheus.Histogram
	voiceToVoice   prometheus.Histogram
	heard          prometheus.Histogram   // first_audible_out - speech_end
	promptTokens   *prometheus.CounterVec // by whether the turn's request found them cached
	earlyTokens    prometheus.Counter
	turns          *prometheus.CounterVec
	activeSessions prometheus.Gauge
	framesDropped  *prometheus.CounterVec
	asrBuffered    prometheus.Counter
	pauseFinals    *prometheus.CounterVec
	asrReplayed    prometheus.Counter
	speculations   *prometheus.CounterVec
	answerCache    *prometheus.CounterVec   // voxpipe_answer_cache_total{outcome,reason}
	cacheHeard     *prometheus.HistogramVec // voxpipe_answer_cache_heard_seconds{outcome}
	framesRejected *prometheus.CounterVec
	sessionsRej    *prometheus.CounterVec

	// Capacity and observability (issue 12; see docs/performance.md).
	intervals     *prometheus.HistogramVec // voxpipe_trace_interval_seconds{from,to}
	ttft          *prometheus.HistogramVec // voxpipe_llm_ttft_seconds{part}
	sessions      *prometheus.CounterVec   // voxpipe_sessions_total{transport}
	interruptions prometheus.Counter
	errors        *prometheus.CounterVec // voxpipe_errors_total{code}
	tracers       []TurnTracer           // told of every turn with its session (OpenTelemetry)
}

var (
	_ pipeline.Observer          = (*Metrics)(nil)
	_ pipeline.ASRBufferObserver = (*Metrics)(nil)
)

// latencyBuckets span 5 ms .. ~20 s: endpointing alone is hundreds of ms, a
// slow LLM's first token can take seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 13)

// Reasons pre-declared so their series exist (at zero) from the start.
var (
	rejectReasons = []string{
		pipeline.CodeBadMessage, pipeline.CodeUnknownType, pipeline.CodeNotStarted,
		pipeline.CodeBadAudio, pipeline.CodeBadFormat, pipeline.CodeTooLarge,
	}
	sessionRejectReasons = []string{reasonFull, reasonShuttingDown, reasonUpgrade, reasonCapacity, reasonSlow}
	dropReasons          = []string{reasonInputFull}
)

// Reasons used by the transport itself.
const (
	reasonFull         = "full"          // max_sessions reached (HTTP 503)
	reasonShuttingDown = "shutting_down" // the server is stopping (HTTP 503)
	reasonUpgrade      = "bad_upgrade"   // not a valid WebSocket handshake
	reasonInputFull    = "input_full"    // the session fell behind the client's audio
)

// NewMetrics creates and registers every collector.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		marks:    map[string]prometheus.Histogram{},
	}
	for _, mark := range pipeline.MarkOrder {
		if mark == pipeline.MarkSpeechStart || mark == pipeline.MarkSpeechEnd {
			continue // the reference point and what precedes it
		}
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "voxpipe_" + mark + "_seconds",
			Help:    "Time from speech_end to " + strings.ReplaceAll(mark, "_", " ") + ", per turn.",
			Buckets: latencyBuckets,
		})
		m.marks[mark] = h
		m.registry.MustRegister(h)
	}
	m.voiceToVoice = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "voxpipe_voice_to_voice_seconds",
		Help:    "Server-side voice-to-voice latency: first_audio_out - speech_end, per turn.",
		Buckets: latencyBuckets,
	})
	m.heard = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "voxpipe_heard_voice_to_voice_seconds",
		Help:    "Server-side heard latency: first_audible_out (the first answer frame with an audible sample) - speech_end, per turn.",
		Buckets: latencyBuckets,
	})
	m.promptTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_llm_prompt_tokens_total",
		Help: "Prompt tokens of the turns' LLM requests, by cache: hit (reused from the KV cache) or miss (computed after the final transcript).",
	}, []string{"cache"})
	m.earlyTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voxpipe_llm_prefill_early_tokens_total",
		Help: "Prompt tokens prefilled by early start while the person was still speaking.",
	})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_turns_total",
		Help: "Turns traced, by outcome (completed, interrupted).",
	}, []string{"outcome"})
	m.activeSessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "voxpipe_active_sessions",
		Help: "WebSocket voice sessions currently connected.",
	})
	m.framesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_frames_dropped_total",
		Help: "Audio frames dropped to keep real time, by reason.",
	}, []string{"reason"})
	m.framesRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_frames_rejected_total",
		Help: "Client messages refused with an error event, by error code.",
	}, []string{"reason"})
	m.sessionsRej = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_sessions_rejected_total",
		Help: "WebSocket sessions refused before or at the upgrade, by reason.",
	}, []string{"reason"})
	m.asrBuffered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voxpipe_asr_frames_buffered_total",
		Help: "Audio frames kept in a session's ASR backlog because recognition fell behind real time (kept, not dropped).",
	})
	m.registry.MustRegister(m.asrBuffered)
	m.pauseFinals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_asr_pause_finals_total",
		Help: "Finals the recogniser made at a pause (pipeline.turn.pause_final) by how they ended: committed (the turn ended in that pause) or resumed (speech went on and the utterance was decoded again).",
	}, []string{"result"})
	for _, r := range []string{pipeline.PauseFinalCommitted, pipeline.PauseFinalResumed} {
		m.pauseFinals.WithLabelValues(r)
	}
	m.asrReplayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voxpipe_asr_replayed_seconds_total",
		Help: "Audio decoded a second time because speech resumed after a pause final (the recognition CPU it costs).",
	})
	m.registry.MustRegister(m.pauseFinals, m.asrReplayed)
	m.speculations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_speculations_total",
		Help: "Speculative answers (started on a pause before the turn was committed) by how they ended: committed (played at the commit) or discarded (never reached the client).",
	}, []string{"result"})
	for _, r := range []string{pipeline.SpeculationCommitted, pipeline.SpeculationDiscarded} {
		m.speculations.WithLabelValues(r)
	}
	m.registry.MustRegister(m.speculations)
	m.answerCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_answer_cache_total",
		Help: "Questions by what the answer cache did: hit (answered from it), miss (answered by the LLM, then stored), bypass (not looked up; reason: context, time, personal, action, vague).",
	}, []string{"outcome", "reason"})
	m.answerCache.WithLabelValues(pipeline.CacheHit, "")
	m.answerCache.WithLabelValues(pipeline.CacheMiss, "")
	for _, r := range answercache.Reasons {
		m.answerCache.WithLabelValues("bypass", r)
	}
	m.cacheHeard = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "voxpipe_answer_cache_heard_seconds",
		Help:    "first_audible_out - speech_end of the turns the answer cache looked up, by hit or miss.",
		Buckets: latencyBuckets,
	}, []string{"outcome"})
	m.registry.MustRegister(m.answerCache, m.cacheHeard)
	m.registerCapacity()
	m.registry.MustRegister(m.voiceToVoice, m.heard, m.promptTokens, m.earlyTokens, m.turns, m.activeSessions, m.framesDropped, m.framesRejected, m.sessionsRej,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range rejectReasons {
		m.framesRejected.WithLabelValues(r)
	}
	for _, r := range sessionRejectReasons {
		m.sessionsRej.WithLabelValues(r)
	}
	for _, r := range dropReasons {
		m.framesDropped.WithLabelValues(r)
	}
	m.turns.WithLabelValues("completed")
	m.turns.WithLabelValues("interrupted")
	m.promptTokens.WithLabelValues("hit")
	m.promptTokens.WithLabelValues("miss")
	return m
}

// Registry is where the collectors live (for /metrics and tests).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// TurnTraced records one turn's latencies.
func (m *Metrics) TurnTraced(tr pipeline.Trace) {
	for mark, ms := range tr.SinceSpeechEnd() {
		if h, ok := m.marks[mark]; ok && ms >= 0 {
			h.Observe(ms / 1000)
		}
	}
	if ms, ok := tr.VoiceToVoice(); ok && ms >= 0 {
		m.voiceToVoice.Observe(ms / 1000)
	}
	if ms, ok := tr.Heard(); ok && ms >= 0 {
		m.heard.Observe(ms / 1000)
		if tr.Cache == pipeline.CacheHit || tr.Cache == pipeline.CacheMiss {
			m.cacheHeard.WithLabelValues(tr.Cache).Observe(ms / 1000)
		}
	}
	switch {
	case tr.Cache == pipeline.CacheHit || tr.Cache == pipeline.CacheMiss:
		m.answerCache.WithLabelValues(tr.Cache, "").Inc()
	case tr.CacheBypass != "":
		m.answerCache.WithLabelValues("bypass", tr.CacheBypass).Inc()
	}
	if tr.PromptTokens > 0 {
		m.promptTokens.WithLabelValues("hit").Add(float64(tr.CachedTokens))
		m.promptTokens.WithLabelValues("miss").Add(float64(tr.PromptTokens - tr.CachedTokens))
	}
	m.earlyTokens.Add(float64(tr.EarlyTokens))
	m.traceCapacity(tr)
	if tr.Interrupted {
		m.turns.WithLabelValues("interrupted").Inc()
	} else {
		m.turns.WithLabelValues("completed").Inc()
	}
}

// FrameDropped counts one audio frame dropped by a session.
func (m *Metrics) FrameDropped(reason string) {
	m.framesDropped.WithLabelValues(reason).Inc()
}

// ASRFramesBuffered counts frames a session's ASR stage kept in its backlog
// (pipeline.ASRBufferObserver).
func (m *Metrics) ASRFramesBuffered(n int) { m.asrBuffered.Add(float64(n)) }

// PauseFinalEnded counts how a final made at a pause ended and the audio it
// had decoded again (pipeline.PauseFinalObserver).
func (m *Metrics) PauseFinalEnded(result string, replayed time.Duration) {
	m.pauseFinals.WithLabelValues(result).Inc()
	m.asrReplayed.Add(replayed.Seconds())
}

// SpeculationEnded counts how a speculative answer ended
// (pipeline.SpeculationObserver).
func (m *Metrics) SpeculationEnded(result string) { m.speculations.WithLabelValues(result).Inc() }

func (m *Metrics) frameRejected(code string) { m.framesRejected.WithLabelValues(code).Inc() }

func (m *Metrics) sessionRejected(reason string) { m.sessionsRej.WithLabelValues(reason).Inc() }

// TurnTracer receives every traced turn with its session id (the
// OpenTelemetry exporter implements it). It must not block.
type TurnTracer interface {
	TurnTraced(session string, tr pipeline.Trace)
}

// AddTurnTracer makes m pass every turn on to t. Call it before serving.
func (m *Metrics) AddTurnTracer(t TurnTracer) { m.tracers = append(m.tracers, t) }

// ttftParts are the labels of voxpipe_llm_ttft_seconds.
var ttftParts = []string{"queue", "compute", "network"}

func (m *Metrics) registerCapacity() {
	m.intervals = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "voxpipe_trace_interval_seconds",
		Help:    "Time between consecutive trace marks of a turn (from → to, in the trace's order), per turn.",
		Buckets: latencyBuckets,
	}, []string{"from", "to"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "voxpipe_llm_ttft_seconds",
		Help:    "The LLM's time to first token (llm_first_token - llm_request) split: queue (waiting for admission), compute (admission to first token), network (the rest: transport and hand-over).",
		Buckets: latencyBuckets,
	}, []string{"part"})
	m.sessions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_sessions_total",
		Help: "Voice sessions admitted, by transport.",
	}, []string{"transport"})
	m.interruptions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voxpipe_interruptions_total",
		Help: "Turns cut before their answer finished (barge-in or the client's interrupt).",
	})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_errors_total",
		Help: "Error events sent to voice clients, by code.",
	}, []string{"code"})
	m.registry.MustRegister(m.intervals, m.ttft, m.sessions, m.interruptions, m.errors)
	for _, p := range ttftParts {
		m.ttft.WithLabelValues(p)
	}
	for _, t := range []string{"ws", "rtc", "xiaozhi"} {
		m.sessions.WithLabelValues(t)
	}
	for _, c := range []string{pipeline.CodeBusy, pipeline.CodeBackend, pipeline.CodeInternal, pipeline.CodeBadMessage, pipeline.CodeBadAudio} {
		m.errors.WithLabelValues(c)
	}
}

// traceCapacity records a turn's intervals and TTFT split.
func (m *Metrics) traceCapacity(tr pipeline.Trace) {
	prev, prevAt := "", time.Time{}
	for _, mark := range pipeline.MarkOrder {
		at, ok := tr.Marks[mark]
		if !ok {
			continue
		}
		if prev != "" && !at.Before(prevAt) {
			m.intervals.WithLabelValues(prev, mark).Observe(at.Sub(prevAt).Seconds())
		}
		prev, prevAt = mark, at
	}
	if tr.Interrupted {
		m.interruptions.Inc()
	}
	req, ok1 := tr.Marks[pipeline.MarkLLMRequest]
	first, ok2 := tr.Marks[pipeline.MarkLLMFirstToken]
	queue, compute := ttftSplit(tr)
	if !ok1 || !ok2 || compute <= 0 {
		return
	}
	network := first.Sub(req) - queue - compute
	m.ttft.WithLabelValues("queue").Observe(queue.Seconds())
	m.ttft.WithLabelValues("compute").Observe(compute.Seconds())
	m.ttft.WithLabelValues("network").Observe(max(network, 0).Seconds())
}

// ttftSplit is the backend's part of a turn's time to first token: queue
// and compute as reported (the engine; a remote server with timings), or a
// remote server's whole part as compute. Zero compute: not reported.
func ttftSplit(tr pipeline.Trace) (queue, compute time.Duration) {
	queue, compute = tr.TTFT[pipeline.TTFTQueue], tr.TTFT[pipeline.TTFTCompute]
	if queue == 0 && compute == 0 {
		compute = tr.TTFT[pipeline.TTFTServer]
	}
	return queue, compute
}

// SessionStarted counts an admitted session of transport ("ws", "rtc", ...).
func (m *Metrics) SessionStarted(transport string) { m.sessions.WithLabelValues(transport).Inc() }

// ErrorSent counts an error event sent to a voice client.
func (m *Metrics) ErrorSent(code string) { m.errors.WithLabelValues(code).Inc() }

// ForSession returns the Observer for one session: inner (the
// transport's observer, which records the metrics), plus the turn tracers
// told the session's id.
func (m *Metrics) ForSession(id string, inner pipeline.Observer) pipeline.Observer {
	if len(m.tracers) == 0 {
		return inner
	}
	return sessionObserver{Observer: inner, tracers: m.tracers, id: id}
}

type sessionObserver struct {
	pipeline.Observer
	tracers []TurnTracer
	id      string
}

// The optional Observer methods are passed on: embedding the interface
// alone would hide them from the pipeline's type assertions.

func (o sessionObserver) ASRFramesBuffered(n int) {
	if b, ok := o.Observer.(pipeline.ASRBufferObserver); ok {
		b.ASRFramesBuffered(n)
	}
}

func (o sessionObserver) PauseFinalEnded(result string, replayed time.Duration) {
	if p, ok := o.Observer.(pipeline.PauseFinalObserver); ok {
		p.PauseFinalEnded(result, replayed)
	}
}

func (o sessionObserver) SpeculationEnded(result string) {
	if s, ok := o.Observer.(pipeline.SpeculationObserver); ok {
		s.SpeculationEnded(result)
	}
}

func (o sessionObserver) TurnLimited() {
	if l, ok := o.Observer.(pipeline.TurnLimitObserver); ok {
		l.TurnLimited()
	}
}

func (o sessionObserver) TurnTraced(tr pipeline.Trace) {
	o.Observer.TurnTraced(tr)
	for _, t := range o.tracers {
		t.TurnTraced(o.id, tr)
	}
}

// WatchReplacements exports voxpipe_engine_replacements_total{engine}:
// replaced reports how many times that engine's failing instance was
// replaced (internal/renew).
func (m *Metrics) WatchReplacements(engine string, replaced func() int) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "voxpipe_engine_replacements_total",
		Help:        "Engine instances (asr, tts) replaced after failing asr.replace_after / tts.replace_after times in a row.",
		ConstLabels: prometheus.Labels{"engine": engine},
	}, func() float64 { return float64(replaced()) }))
}

// EngineStats is what the in-process LLM engine reports for its gauges.
type EngineStats struct {
	Batch, Queued         int
	KVBytes               int64
	SpecDrafted, SpecKept int
}

// WatchEngine registers the engine gauges, read from stats at each scrape.
func (m *Metrics) WatchEngine(stats func() EngineStats) {
	gauge := func(name, help string, v func(EngineStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	counter := func(name, help string, v func(EngineStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return v(stats()) })
	}
	m.registry.MustRegister(
		gauge("voxpipe_llm_batch_size", "Generations in the engine's last forward pass (0 when idle).", func(s EngineStats) float64 { return float64(s.Batch) }),
		gauge("voxpipe_llm_queue_depth", "Requests waiting for the engine to admit them.", func(s EngineStats) float64 { return float64(s.Queued) }),
		gauge("voxpipe_llm_kv_bytes", "Memory held by the engine's kept conversations' KV caches.", func(s EngineStats) float64 { return float64(s.KVBytes) }),
		counter("voxpipe_llm_spec_drafted_tokens_total", "Tokens proposed by speculative decoding.", func(s EngineStats) float64 { return float64(s.SpecDrafted) }),
		counter("voxpipe_llm_spec_accepted_tokens_total", "Proposed tokens the target model kept.", func(s EngineStats) float64 { return float64(s.SpecKept) }),
		gauge("voxpipe_llm_spec_acceptance_ratio", "Accepted / drafted tokens since the engine opened (0 before any).", func(s EngineStats) float64 {
			if s.SpecDrafted == 0 {
				return 0
			}
			return float64(s.SpecKept) / float64(s.SpecDrafted)
		}),
	)
}
