package web

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voxpipe/voxpipe/web/access"
)

// limitNames are the limits counted by voxpipe_limit_rejections_total,
// pre-declared so their series exist from the start. The /v1 ones are the
// request parameter refused (llm/openaiapi.Limits.OnReject).
var limitNames = []string{
	access.RejectOrigin, access.RejectAuth, access.RejectRate, access.RejectHost,
	"max_session", "max_turn", "start_timeout", "api_messages", "api_stop", "api_max_tokens", "api_body",
}

func newLimitCounter(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voxpipe_limit_rejections_total",
		Help: "Requests and sessions refused or ended by a limit: origin, auth, session_rate (per client IP), host (a Host header not served here), max_session, max_turn (an utterance ended at pipeline.max_turn), start_timeout (a WebSocket without a start), api_* (a /v1 request parameter).",
	}, []string{"limit"})
	reg.MustRegister(c)
	for _, l := range limitNames {
		c.WithLabelValues(l)
	}
	return c
}

// LimitRejected counts one refusal by a limit (the names of limitNames).
func (s *Server) LimitRejected(limit string) { s.limitsHit.WithLabelValues(limit).Inc() }

// errMaxSession ends a session that reached Config.MaxSession (the WebSocket
// close reason, with code 1008).
var errMaxSession = errors.New("max_session: session time limit reached")

// sessionContext is a session's context: ended by Shutdown, or after
// MaxSession with the cause errMaxSession.
func (s *Server) sessionContext() (context.Context, context.CancelFunc) {
	if s.cfg.MaxSession <= 0 {
		return context.WithCancel(s.baseCtx)
	}
	return context.WithTimeoutCause(s.baseCtx, s.cfg.MaxSession, errMaxSession)
}

// maxSessionReached says whether ctx (a session's, ended) ended for
// MaxSession, and counts it once per call.
func (s *Server) maxSessionReached(ctx context.Context) bool {
	if s.baseCtx.Err() != nil || !errors.Is(context.Cause(ctx), errMaxSession) {
		return false
	}
	s.LimitRejected("max_session")
	return true
}
