package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/record"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/access"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// Config configures a Server.
type Config struct {
	// MaxSessions is how many WebSocket sessions may run at once; the next
	// upgrade request gets HTTP 503.
	MaxSessions int
	// MaxFrameBytes is the largest WebSocket message read; a bigger one
	// gets a too_large error event and the connection is closed.
	MaxFrameBytes int
	// IdleTimeout closes a WebSocket from which nothing (not even a pong to
	// the server's pings, sent every 9/10 of it) arrived for this long.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write to a client; a client that stops
	// reading for longer is disconnected. 0 = 10 s.
	WriteTimeout time.Duration
	// Pipeline is the session template; InputRate and OutputRate come from
	// each client's start message.
	Pipeline pipeline.Config
	// OpusBitrate is used for Opus answer audio, in bit/s. 0 = 24000.
	OpusBitrate int
	// API, when set, is mounted under /v1/ (the OpenAI-compatible handler
	// from llm/openaiapi; it sees the full path, /v1/...).
	API http.Handler
	// AllowOrigin, when set, replaces Access's origin rule (a request
	// without Origin, from a device, is allowed by the default rule).
	AllowOrigin func(r *http.Request) bool
	// Access is who may use the server (web/access): API keys, allowed
	// origins (same origin by default), the per-IP session rate. Its
	// OnReject is set to count voxpipe_limit_rejections_total.
	Access access.Config
	// MaxSession ends a session that has run this long; 0 = no limit.
	MaxSession time.Duration
	// Recorder, when set, records every /ws and WebRTC session (audio both
	// ways, events, traces; internal/record).
	Recorder *record.Recorder
	// Resume keeps a dropped /ws session's conversation for its client to
	// resume (resume.go); the zero value turns it off.
	Resume ResumeConfig
	// StartTimeout closes a WebSocket whose client has not had a start
	// accepted this long after the upgrade (it holds a session slot while
	// it waits); 0 = 10 s.
	StartTimeout time.Duration
	// RTC configures the WebRTC transport (POST /rtc/offer); its sessions
	// count against MaxSessions with the WebSocket ones.
	RTC RTCConfig
	// Admission refuses sessions the server could not serve in time
	// (admission.go); the zero value admits up to MaxSessions.
	Admission AdmissionConfig
	// Xiaozhi, when set, serves ESP32 xiaozhi devices (OTA + WebSocket,
	// web/xiaozhi); their sessions count against MaxSessions too.
	Xiaozhi *xiaozhi.Config
}

const (
	defaultWriteTimeout = 10 * time.Second
	defaultStartTimeout = 10 * time.Second
	defaultOpusBitrate  = 24000
)

// Server serves voxpipe's HTTP endpoints. Create it with New, serve
// Handler() with an http.Server, and call Shutdown after the http.Server's.
type Server struct {
	cfg      Config
	backends pipeline.Backends
	log      zerolog.Logger
	metrics  *Metrics
	// transportMetrics are the series labelled by transport (transport.go).
	transportMetrics *transportMetrics
	upgrader         websocket.Upgrader
	rtcAPI           *webrtc.API
	mux              *http.ServeMux // written only by handle (routes.go's rules)
	routes           []Route        // every route of mux, in registration order
	rules            map[string]Route
	adm              *admission
	guard            *access.Guard
	limitsHit        *prometheus.CounterVec
	resume           *resumeStore
	traces           *traceLog // the recent turns, for GET /traces

	// baseCtx parents every connection's context; cancelled by Shutdown.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	// handlers counts running WebSocket handlers, for Shutdown to wait on.
	handlers sync.WaitGroup

	// mu guards conns, rtcs, devices, reserved and closing.
	mu       sync.Mutex
	conns    map[*conn]struct{}
	rtcs     map[*rtcSession]struct{}
	devices  map[*device]struct{} // xiaozhi connections (transport.go)
	reserved int                  // slots taken, including upgrades in progress
	closing  bool
	draining bool // Drain: new sessions refused, running ones go on
}

// New returns a Server running sessions on be. be's members must be safe for
// concurrent use (the asr, llm and tts interfaces require it).
func New(cfg Config, be pipeline.Backends, log zerolog.Logger) (*Server, error) {
	if cfg.MaxSessions < 1 {
		return nil, fmt.Errorf("%w: MaxSessions %d (want >= 1)", ErrConfig, cfg.MaxSessions)
	}
	if cfg.MaxFrameBytes < 1024 {
		return nil, fmt.Errorf("%w: MaxFrameBytes %d (want >= 1024)", ErrConfig, cfg.MaxFrameBytes)
	}
	if cfg.IdleTimeout <= 0 {
		return nil, fmt.Errorf("%w: IdleTimeout %v (want > 0)", ErrConfig, cfg.IdleTimeout)
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.OpusBitrate == 0 {
		cfg.OpusBitrate = defaultOpusBitrate
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if be.ASR == nil || be.LLM == nil || be.TTS == nil {
		return nil, fmt.Errorf("%w: backends ASR, LLM and TTS are all required", ErrConfig)
	}
	s := &Server{
		cfg:      cfg,
		backends: be,
		log:      log,
		metrics:  NewMetrics(),
		conns:    map[*conn]struct{}{},
		rtcs:     map[*rtcSession]struct{}{},
		devices:  map[*device]struct{}{},
		mux:      http.NewServeMux(),
		rules:    map[string]Route{},
		traces:   newTraceLog(),
	}
	s.transportMetrics = newTransportMetrics(s.metrics.Registry())
	rtcAPI, err := newRTCAPI(cfg.RTC)
	if err != nil {
		return nil, err
	}
	s.rtcAPI = rtcAPI
	s.limitsHit = newLimitCounter(s.metrics.Registry())
	s.resume = newResumeStore(cfg.Resume, s.metrics.Registry())
	ac := cfg.Access
	ac.OnReject = s.LimitRejected
	if cfg.AllowOrigin != nil {
		ac.CheckOrigin = cfg.AllowOrigin
	}
	s.guard = access.New(ac)
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.startAdmission(log)
	if mem := be.Speakers; mem != nil {
		s.metrics.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "voxpipe_speakers_remembered",
			Help: "Devices whose speaker's pitch range is remembered for their next session (pipeline.turn.remember_speakers)."},
			func() float64 { return float64(mem.Len()) }))
	}
	s.upgrader = websocket.Upgrader{
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   4096,
		WriteBufferSize:  4096,
		// The access guard in front of every route has checked the
		// origin by the configured rule (same origin by default).
		CheckOrigin: func(*http.Request) bool { return true },
		Error:       s.upgradeError,
	}
	s.handle(Route{Pattern: "GET /ws", Rule: access.Session, Hijacks: true}, http.HandlerFunc(s.serveWS))
	s.handle(Route{Pattern: "POST /rtc/offer", Rule: access.Session}, http.HandlerFunc(s.serveRTCOffer))
	s.handle(Route{Pattern: "GET /rtc/config", Rule: access.Keyed}, http.HandlerFunc(s.serveRTCConfig))
	if err := s.mountPage(); err != nil {
		return nil, fmt.Errorf("web: embedded ui: %w", err)
	}
	s.handle(Route{Pattern: "GET /healthz", Rule: access.Open}, http.HandlerFunc(s.serveHealth))
	s.handle(Route{Pattern: "GET " + TracesPath, Rule: access.Keyed}, http.HandlerFunc(s.serveTraces))
	s.handle(Route{Pattern: "GET /metrics", Rule: access.Open}, promhttp.HandlerFor(s.metrics.Registry(), promhttp.HandlerOpts{}))
	s.handle(Route{Pattern: access.TokenPath, Rule: access.TokenEndpoint}, http.NotFoundHandler()) // the guard answers it
	if cfg.API != nil {
		s.handle(Route{Pattern: "/v1/", Rule: access.Keyed}, cfg.API)
	}
	if cfg.Xiaozhi != nil {
		if err := s.mountXiaozhi(*cfg.Xiaozhi); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Handler returns the server's routes, each behind its access rule.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Metrics returns the server's collectors (also the sessions' Observer).
func (s *Server) Metrics() *Metrics { return s.metrics }

// ActiveSessions is the number of WebSocket and WebRTC sessions connected now.
func (s *Server) ActiveSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + len(s.rtcs) + len(s.devices)
}

// Shutdown refuses new sessions, cancels every running one (each client gets
// a close frame) and waits for their goroutines to exit. When ctx ends first
// it cuts the remaining connections, waits for them, and returns
// ErrShutdownForced. Call it after http.Server.Shutdown, which does not touch
// hijacked connections such as WebSockets.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cancelBase()

	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		_ = c.ws.Close() // unblocks the reader and the writer at once
	}
	for rs := range s.rtcs {
		rs.cancel() // already cancelled through baseCtx; serve closes the peer
	}
	for d := range s.devices {
		d.closeNow()
	}
	s.mu.Unlock()
	<-done
	return ErrShutdownForced
}

// reserve takes a session slot; it returns the reason when none is free.
func (s *Server) reserve() (reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing || s.draining:
		return reasonShuttingDown
	case s.reserved >= s.cfg.MaxSessions:
		return reasonFull
	}
	if reason := s.adm.refuse(s.reserved); reason != "" {
		return reason
	}
	s.reserved++
	s.handlers.Add(1)
	return ""
}

// release frees the slot taken by reserve.
func (s *Server) release() {
	s.mu.Lock()
	s.reserved--
	s.mu.Unlock()
	s.handlers.Done()
}

// track adds or removes c from the live set. It returns false when adding
// after Shutdown began (the caller then closes c at once).
func (s *Server) track(c *conn, live bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !live {
		delete(s.conns, c)
		s.metrics.activeSessions.Set(float64(s.activeLocked()))
		return true
	}
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.metrics.SessionStarted("ws")
	s.metrics.activeSessions.Set(float64(s.activeLocked()))
	return true
}

func (s *Server) activeLocked() int { return len(s.conns) + len(s.rtcs) + len(s.devices) }

// trackRTC is track for WebRTC sessions.
func (s *Server) trackRTC(rs *rtcSession, live bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !live {
		delete(s.rtcs, rs)
	} else {
		if s.closing {
			return false
		}
		s.rtcs[rs] = struct{}{}
		s.metrics.SessionStarted("rtc")
	}
	s.metrics.activeSessions.Set(float64(s.activeLocked()))
	return true
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		s.metrics.sessionRejected(reasonUpgrade)
		writeJSONError(w, http.StatusBadRequest, pipeline.CodeBadMessage, "/ws expects a WebSocket upgrade request")
		return
	}
	if reason := s.reserve(); reason != "" {
		s.rejectBusy(w, reason)
		return
	}
	defer s.release()
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // upgradeError has answered and counted it
	}
	id := newSessionID()
	c := newConn(s, ws, id, s.log.With().Str("remote", r.RemoteAddr).Logger())
	if !s.track(c, true) {
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
		_ = ws.Close()
		return
	}
	defer s.track(c, false)
	c.serve()
}

// rejectBusy answers a session request refused by reserve with HTTP 503.
func (s *Server) rejectBusy(w http.ResponseWriter, reason string) {
	s.metrics.sessionRejected(reason)
	msg := refusalMessage(reason, s.cfg.MaxSessions)
	w.Header().Set("Retry-After", "1")
	writeJSONError(w, http.StatusServiceUnavailable, pipeline.CodeBusy, msg)
}

func (s *Server) upgradeError(w http.ResponseWriter, _ *http.Request, status int, reason error) {
	s.metrics.sessionRejected(reasonUpgrade)
	writeJSONError(w, status, pipeline.CodeBadMessage, reason.Error())
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	status, code := "ok", http.StatusOK
	if s.draining || s.closing {
		status, code = "draining", http.StatusServiceUnavailable
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Status         string `json:"status"`
		ActiveSessions int    `json:"active_sessions"`
		MaxSessions    int    `json:"max_sessions"`
	}{status, s.ActiveSessions(), s.adm.Limit()})
}

// Drain refuses new sessions (HTTP 503, as during Shutdown) and makes
// /healthz answer 503 "draining" so a load balancer sends no more; running
// sessions go on. WaitIdle then waits for them to end.
func (s *Server) Drain() {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
}

// WaitIdle returns nil once no session is running (nor being set up), or
// ctx's error when it ends first.
func (s *Server) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := s.reserved
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// writeJSONError answers a plain HTTP request with the same shape as a
// WebSocket error event, so clients parse one format.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(pipeline.Event{Type: pipeline.EventError, Code: code, Message: msg})
}

func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// Route is one route of the server's mux and what guards it. Every route
// is registered through handle, and serveHTTP looks each request's route
// up by the pattern the mux matched, so a route registered on the mux any
// other way is refused rather than served unguarded.
type Route struct {
	Pattern string // the mux pattern, "[METHOD ]PATH"
	Rule    access.Rule
	// Device checks a device credential (access.Device routes).
	Device access.DeviceCheck
	// Hijacks: a WebSocket, which sets its own write deadlines.
	Hijacks bool
}

// Routes lists every route of the mux with its rule (for the tests that
// walk them all, and for docs/security.md).
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// handle registers h under rt.
func (s *Server) handle(rt Route, h http.Handler) {
	s.mux.Handle(rt.Pattern, h) // panics on a duplicate or conflicting pattern
	s.routes = append(s.routes, rt)
	s.rules[rt.Pattern] = rt
}

// serveHTTP applies the access rule of the route r matches, then serves it.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	rt, ok := s.rules[pattern]
	if !ok && pattern != "" {
		s.log.Error().Str("pattern", pattern).Msg("route without an access rule: refused (register it with Server.handle)")
		writeJSONError(w, http.StatusInternalServerError, pipeline.CodeInternal, "route without an access rule")
		return
	}
	// pattern "": the mux's own 404, 405 or redirect, under the Open rule.
	r, ok = s.guard.Admit(rt.Rule, w, r, rt.Device)
	if !ok {
		return
	}
	if !rt.Hijacks {
		dw := newDeadlineWriter(w, s.cfg.WriteTimeout)
		defer dw.finish()
		w = dw
	}
	s.mux.ServeHTTP(w, r)
}

// deadlineWriter gives each write of a response its own deadline,
// WriteTimeout from when it starts: a client that stops reading is cut
// off that long after, while an answer that streams for minutes (a /v1
// completion, tokens as they come) or takes long to start is not. The
// http.Server has no WriteTimeout of its own, which would cut both.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func newDeadlineWriter(w http.ResponseWriter, d time.Duration) *deadlineWriter {
	dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
	dw.extend() // replaces one a previous request on the connection left
	return dw
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// Flush is http.Flusher's, which SSE handlers look for.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish gives net/http's own last flush of the response a deadline.
func (w *deadlineWriter) finish() { w.extend() }

// mountPage serves the browser page (ui.go) under the Open rule: the
// files mountUI serves, each forwarded to a mux of its own.
func (s *Server) mountPage() error {
	page := http.NewServeMux()
	if err := mountUI(page); err != nil {
		return err
	}
	s.handle(Route{Pattern: "GET /{$}", Rule: access.Open}, page)
	entries, err := fs.ReadDir(uiFiles, "ui")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() && e.Name() != "index.html" {
			s.handle(Route{Pattern: "GET /" + e.Name(), Rule: access.Open}, page)
		}
	}
	return nil
}
