package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/record"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/access"
	"github.com/voxpipe/voxpipe/web/internal/voice"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// What the transports share beyond web/internal/voice: the audio event's
// wire format, running a session, and metrics labelled by transport.

// Transport names, the "transport" label of the per-transport metrics.
const (
	transportWS      = "websocket"
	transportWebRTC  = "webrtc"
	transportXiaozhi = "xiaozhi"
)

// reasonOpusEncode counts answer frames the Opus encoder refused.
const reasonOpusEncode = "opus_encode"

// fillAudioFormat completes an audio event with the transport's wire
// format: the session speaks PCM, the encoding is the transport's business.
func fillAudioFormat(ev *pipeline.Event, encoding string, rate int) {
	if encoding != "" {
		ev.Encoding = encoding
	}
	if ev.SampleRate == 0 {
		ev.SampleRate = rate
	}
	if ev.FrameMs == 0 {
		ev.FrameMs = FrameMs
	}
}

// recording names a session for Config.Recorder: its id and its audio
// rates in and out.
type recording struct {
	id              string
	inRate, outRate int
}

// runSession runs sess, recorded when the server records sessions; a
// panic in it becomes an error wrapping errInternal.
func (s *Server) runSession(ctx context.Context, rec recording, sess *pipeline.Session, in <-chan pipeline.Input, out chan<- pipeline.Output, log zerolog.Logger) error {
	if s.cfg.Recorder == nil {
		return runGuarded(ctx, sess, in, out, log)
	}
	r, err := s.cfg.Recorder.Start(rec.id, rec.inRate, rec.outRate)
	if err != nil {
		// A recording is never worth a session.
		log.Warn().Err(err).Msg("session not recorded")
		return runGuarded(ctx, sess, in, out, log)
	}
	err = runRecorded(ctx, r, sess, in, out, log)
	if dir, cerr := r.Close(); cerr != nil {
		log.Warn().Err(cerr).Msg("recording dropped")
	} else {
		log.Debug().Str("recording", dir).Msg("session recorded")
	}
	return err
}

// runRecorded runs sess between two tees that record what passes: the
// client's input (copied, since a transport reuses its audio buffers once
// the session has taken them) and the session's output.
func runRecorded(ctx context.Context, r *record.Session, sess *pipeline.Session, in <-chan pipeline.Input, out chan<- pipeline.Output, log zerolog.Logger) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in2 := make(chan pipeline.Input)
	out2 := make(chan pipeline.Output)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(in2)
		for {
			var m pipeline.Input
			select {
			case v, ok := <-in:
				if !ok {
					return
				}
				m = v
			case <-tctx.Done():
				return
			}
			if m.Event != nil {
				r.Event("in", m.Event)
			} else {
				r.In(m.Audio)
				m.Audio = slices.Clone(m.Audio)
			}
			select {
			case in2 <- m:
			case <-tctx.Done():
				return
			}
		}
	})
	wg.Go(func() {
		for o := range out2 { // until the session has returned
			if o.Event != nil {
				r.Event("out", o.Event)
			} else {
				r.Out(o.Audio)
			}
			if ctx.Err() == nil {
				select {
				case out <- o:
				case <-ctx.Done():
				}
			}
		}
	})
	err := runGuarded(tctx, sess, in2, out2, log)
	close(out2)
	cancel()
	wg.Wait()
	return err
}

// runGuarded runs sess; a panic in it becomes an error wrapping errInternal.
func runGuarded(ctx context.Context, sess *pipeline.Session, in <-chan pipeline.Input, out chan<- pipeline.Output, log zerolog.Logger) error {
	err := voice.Run(ctx, sess, in, out, log)
	if errors.Is(err, voice.ErrPanic) {
		return fmt.Errorf("%w: %w", errInternal, err)
	}
	return err
}

// transportMetrics are the per-transport series: every transport feeds the
// same voxpipe_* histograms through Metrics, and these say which transport
// a turn came over.
type transportMetrics struct {
	voiceToVoice *prometheus.HistogramVec // server-side, first_audio_out - speech_end
	heard        *prometheus.HistogramVec // playback_start - speech_end, as the client reported (or the device path estimated)
	turns        *prometheus.CounterVec
}

func newTransportMetrics(reg prometheus.Registerer) *transportMetrics {
	tm := &transportMetrics{
		voiceToVoice: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "voxpipe_transport_voice_to_voice_seconds",
			Help:    "Server-side voice-to-voice latency (first_audio_out - speech_end) per turn, by transport.",
			Buckets: latencyBuckets,
		}, []string{"transport"}),
		heard: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "voxpipe_transport_heard_voice_to_voice_seconds",
			Help:    "Voice-to-voice latency up to playback_start (reported by the client; for xiaozhi devices, when the first packet was written) per turn, by transport.",
			Buckets: latencyBuckets,
		}, []string{"transport"}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voxpipe_transport_turns_total",
			Help: "Turns traced, by transport and outcome (completed, interrupted).",
		}, []string{"transport", "outcome"}),
	}
	reg.MustRegister(tm.voiceToVoice, tm.heard, tm.turns)
	for _, tr := range []string{transportWS, transportWebRTC, transportXiaozhi} {
		tm.voiceToVoice.WithLabelValues(tr)
		tm.heard.WithLabelValues(tr)
		tm.turns.WithLabelValues(tr, "completed")
		tm.turns.WithLabelValues(tr, "interrupted")
	}
	return tm
}

// transportObserver is a session's pipeline.Observer: the server's Metrics
// plus the series labelled with the session's transport.
type transportObserver struct {
	*Metrics
	v2v, heard          prometheus.Observer
	completed, interrup prometheus.Counter
	limit               func(string) // Server.LimitRejected
	rec                 traceRecorder
}

// TurnLimited counts an utterance ended at pipeline.Config.MaxTurn.
func (o *transportObserver) TurnLimited() { o.limit("max_turn") }

// observer returns the Observer for session over transport (device: a
// xiaozhi session's device id); its turns go to GET /traces too.
func (s *Server) observer(transport, session, device string) pipeline.Observer {
	tm := s.transportMetrics
	return &transportObserver{
		rec:       traceRecorder{log: s.traces, session: session, transport: transport, name: device},
		Metrics:   s.metrics,
		v2v:       tm.voiceToVoice.WithLabelValues(transport),
		heard:     tm.heard.WithLabelValues(transport),
		completed: tm.turns.WithLabelValues(transport, "completed"),
		interrup:  tm.turns.WithLabelValues(transport, "interrupted"),
		limit:     s.LimitRejected,
	}
}

func (o *transportObserver) TurnTraced(tr pipeline.Trace) {
	o.Metrics.TurnTraced(tr)
	o.rec.record(tr)
	if ms, ok := tr.VoiceToVoice(); ok && ms >= 0 {
		o.v2v.Observe(ms / 1000)
	}
	if ms, ok := tr.SinceSpeechEnd()[pipeline.MarkPlaybackStart]; ok && ms >= 0 {
		o.heard.Observe(ms / 1000)
	}
	if tr.Interrupted {
		o.interrup.Inc()
	} else {
		o.completed.Inc()
	}
}

// device is a live xiaozhi connection, for Shutdown to cut.
type device struct{ closeNow func() }

// mountXiaozhi serves xiaozhi devices on the server's pipeline, session
// slots and metrics.
func (s *Server) mountXiaozhi(cfg xiaozhi.Config) error {
	h, err := xiaozhi.New(cfg, xiaozhi.Host{
		Backends: s.backends,
		Pipeline: s.cfg.Pipeline,
		Observer: s.observer(transportXiaozhi, "", ""),
		SessionObserver: func(info xiaozhi.SessionInfo) pipeline.Observer {
			return s.metrics.ForSession(info.ID, s.observer(transportXiaozhi, info.ID, info.DeviceID))
		},
		Reserve: func() (func(), string) {
			if reason := s.reserve(); reason != "" {
				s.metrics.sessionRejected(reason)
				return nil, refusalMessage(reason, s.cfg.MaxSessions)
			}
			return s.release, ""
		},
		Track: func(closeNow func()) (func(), bool) {
			d := &device{closeNow: closeNow}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.closing {
				return nil, false
			}
			s.devices[d] = struct{}{}
			s.metrics.SessionStarted("xiaozhi")
			s.metrics.activeSessions.Set(float64(s.activeLocked()))
			return func() {
				s.mu.Lock()
				delete(s.devices, d)
				s.metrics.activeSessions.Set(float64(s.activeLocked()))
				s.mu.Unlock()
			}, true
		},
		Authenticated: func(r *http.Request) bool { return access.Principal(r) != "" },
		CheckOrigin:   s.guard.OriginOK,
		Base:          s.baseCtx,
		Log:           s.log.With().Str("transport", transportXiaozhi).Logger(),
		Rejected:      s.metrics.frameRejected,
		Dropped:       s.metrics.FrameDropped,
		OpusBitrate:   s.cfg.OpusBitrate,
		MaxFrameBytes: s.cfg.MaxFrameBytes,
		IdleTimeout:   s.cfg.IdleTimeout,
		WriteTimeout:  s.cfg.WriteTimeout,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// The device endpoints are routes like any other (server.go): the
	// WebSocket is a session held to the origin rule and to an API key,
	// session token or the device token when any is configured (the
	// handler checks the device token and the allow list itself,
	// docs/xiaozhi.md); the OTA check, which devices make before they have
	// a token, only to the host and origin rules.
	dev := http.NewServeMux()
	h.Mount(dev)
	s.handle(Route{Pattern: h.WSPath(), Rule: access.Device, Device: h.DeviceTokenOK, Hijacks: true}, dev)
	s.handle(Route{Pattern: h.OTAPath(), Rule: access.DeviceSetup}, dev)
	if ota := h.OTAPath(); !strings.HasSuffix(ota, "/") {
		s.handle(Route{Pattern: ota + "/activate", Rule: access.DeviceSetup}, dev)
	}
	return nil
}
