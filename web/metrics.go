package web

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/voxpipe/voxpipe/pipeline"
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
	promptTokens   *prometheus.CounterVec // by whether the turn's request found them cached
	earlyTokens    prometheus.Counter
	turns          *prometheus.CounterVec
	activeSessions prometheus.Gauge
	framesDropped  *prometheus.CounterVec
	framesRejected *prometheus.CounterVec
	sessionsRej    *prometheus.CounterVec
}

var _ pipeline.Observer = (*Metrics)(nil)

// latencyBuckets span 5 ms .. ~20 s: endpointing alone is hundreds of ms, a
// slow LLM's first token can take seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 13)

// Reasons pre-declared so their series exist (at zero) from the start.
var (
	rejectReasons = []string{
		pipeline.CodeBadMessage, pipeline.CodeUnknownType, pipeline.CodeNotStarted,
		pipeline.CodeBadAudio, pipeline.CodeBadFormat, pipeline.CodeTooLarge,
	}
	sessionRejectReasons = []string{reasonFull, reasonShuttingDown, reasonUpgrade}
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
	m.registry.MustRegister(m.voiceToVoice, m.promptTokens, m.earlyTokens, m.turns, m.activeSessions, m.framesDropped, m.framesRejected, m.sessionsRej,
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
	if tr.PromptTokens > 0 {
		m.promptTokens.WithLabelValues("hit").Add(float64(tr.CachedTokens))
		m.promptTokens.WithLabelValues("miss").Add(float64(tr.PromptTokens - tr.CachedTokens))
	}
	m.earlyTokens.Add(float64(tr.EarlyTokens))
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

func (m *Metrics) frameRejected(code string) { m.framesRejected.WithLabelValues(code).Inc() }

func (m *Metrics) sessionRejected(reason string) { m.sessionsRej.WithLabelValues(reason).Inc() }
