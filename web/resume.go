package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// Resumable /ws sessions (docs/protocol.md, "Resuming"). Every session
// started on /ws gets a session token in its ready event. When the
// connection drops (anything but the client's stop, the server's shutdown,
// max_session or a session failure), the conversation is parked under the
// token for ResumeConfig.TTL: its history, the start message's settings, the
// turn number reached and what the drop cut. A start with "resume": TOKEN
// takes it back once: the new session continues the history, numbers turns
// on, and is told of each cut turn (turn_cut). A token whose connection the
// server still thinks alive (a dead Wi-Fi link is noticed only at
// idle_timeout) is taken over: the old connection is closed (4000) and
// parked first.

// ResumeConfig configures resumable /ws sessions.
type ResumeConfig struct {
	// TTL is how long a dropped session waits to be resumed; 0 = sessions
	// are not resumable (no token is handed out).
	TTL time.Duration
	// MaxParked bounds the dropped sessions kept at once; past it the
	// oldest is forgotten. 0 = 1024.
	MaxParked int
}

const (
	defaultMaxParked = 1024
	// takeoverWait bounds how long a resuming client waits for the old
	// connection of its token to end.
	takeoverWait = 5 * time.Second
	// closeTakenOver is the close code of a connection whose session was
	// resumed by another connection.
	closeTakenOver = 4000
)

// Resume outcomes, the result label of voxpipe_session_resumes_total.
const (
	resumeParked  = "parked"  // a dropped session was kept
	resumeOK      = "resumed" // a start took one back
	resumeRefused = "refused" // unknown, expired or used token
	resumeExpired = "expired" // a kept session was forgotten (TTL, or MaxParked)
)

var (
	errTakenOver     = errors.New("resumed by another connection")
	errResumeUnknown = errors.New("unknown or already used session token")
	errResumeExpired = errors.New("session token expired")
	errResumeBusy    = errors.New("the session's old connection did not end in time")
)

// parkedSession is a dropped session waiting for its client.
type parkedSession struct {
	history  []llm.Message
	lastTurn int
	settings voice.Message // the start message (format, client)
	// conversation is the chain's tools.Conversations key (conn.conversation).
	conversation string
	started      time.Time        // the first connection's start, for max_session
	cut          []pipeline.Event // turn_cut events for the resumed client
	expires      time.Time
}

// resumeStore holds the tokens of live sessions and the parked ones.
type resumeStore struct {
	cfg     ResumeConfig
	results *prometheus.CounterVec

	mu     sync.Mutex // guards live and parked
	live   map[string]*conn
	parked map[string]*parkedSession
}

func newResumeStore(cfg ResumeConfig, reg prometheus.Registerer) *resumeStore {
	if cfg.MaxParked <= 0 {
		cfg.MaxParked = defaultMaxParked
	}
	r := &resumeStore{
		cfg:    cfg,
		live:   map[string]*conn{},
		parked: map[string]*parkedSession{},
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voxpipe_session_resumes_total",
			Help: "Resumable /ws sessions: parked (dropped, kept for server.resume.ttl), resumed, refused (unknown, expired or used token), expired (forgotten unresumed).",
		}, []string{"result"}),
	}
	reg.MustRegister(r.results)
	for _, res := range []string{resumeParked, resumeOK, resumeRefused, resumeExpired} {
		r.results.WithLabelValues(res)
	}
	return r
}

func (r *resumeStore) enabled() bool { return r.cfg.TTL > 0 }

// register hands out a new token for c's session.
func (r *resumeStore) register(c *conn) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	token := hex.EncodeToString(b[:])
	r.mu.Lock()
	r.live[token] = c
	r.mu.Unlock()
	return token
}

// release ends the token of c's connection: p, when not nil, is parked
// under it for the TTL.
func (r *resumeStore) release(token string, c *conn, p *parkedSession) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[token] == c {
		delete(r.live, token)
	}
	r.sweepLocked(now)
	if p == nil {
		return
	}
	if len(r.parked) >= r.cfg.MaxParked {
		r.evictOldestLocked()
	}
	p.expires = now.Add(r.cfg.TTL)
	r.parked[token] = p
	r.results.WithLabelValues(resumeParked).Inc()
}

// sweepLocked forgets parked sessions past their TTL.
func (r *resumeStore) sweepLocked(now time.Time) {
	for token, p := range r.parked {
		if now.After(p.expires) {
			delete(r.parked, token)
			r.results.WithLabelValues(resumeExpired).Inc()
		}
	}
}

func (r *resumeStore) evictOldestLocked() {
	var oldest string
	for token, p := range r.parked {
		if oldest == "" || p.expires.Before(r.parked[oldest].expires) {
			oldest = token
		}
	}
	delete(r.parked, oldest)
	r.results.WithLabelValues(resumeExpired).Inc()
}

// take removes and returns the session parked under token. A token whose
// connection is still live is taken over: that connection is ended, and
// take waits for it to park.
func (r *resumeStore) take(ctx context.Context, token string) (*parkedSession, error) {
	p, err := r.takeOnce(ctx, token, true)
	if err != nil {
		r.results.WithLabelValues(resumeRefused).Inc()
		return nil, err
	}
	r.results.WithLabelValues(resumeOK).Inc()
	return p, nil
}

func (r *resumeStore) takeOnce(ctx context.Context, token string, takeover bool) (*parkedSession, error) {
	now := time.Now()
	r.mu.Lock()
	if p, ok := r.parked[token]; ok {
		delete(r.parked, token)
		r.mu.Unlock()
		if now.After(p.expires) {
			r.results.WithLabelValues(resumeExpired).Inc()
			return nil, errResumeExpired
		}
		return p, nil
	}
	old, live := r.live[token]
	r.mu.Unlock()
	if !live || !takeover {
		return nil, errResumeUnknown
	}
	old.takeOver()
	t := time.NewTimer(takeoverWait)
	defer t.Stop()
	select {
	case <-old.finished:
	case <-t.C:
		return nil, errResumeBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.takeOnce(ctx, token, false)
}

// turnLog is what the writer sent of the session's turns, for the report
// of what a drop cut. The writer goroutine owns it; serve reads it after
// the writer has exited.
type turnLog struct {
	finalTurn   int    // the latest final transcript's turn
	finalText   string // its words (several finals of one turn joined)
	partialTurn int    // the latest partial transcript's turn
	partialText string
	answerTurn  int
	answerText  string // what was sent of answerTurn's answer
	tracedTurn  int    // the latest turn whose trace was sent
}

func (l *turnLog) observe(ev *pipeline.Event) {
	switch ev.Type {
	case pipeline.EventTranscript:
		if ev.Final {
			if ev.Turn == l.finalTurn {
				l.finalText = strings.TrimSpace(l.finalText + " " + ev.Text)
			} else {
				l.finalTurn, l.finalText = ev.Turn, ev.Text
			}
			return
		}
		l.partialTurn, l.partialText = ev.Turn, ev.Text
	case pipeline.EventAnswer:
		if ev.Turn != l.answerTurn {
			l.answerTurn, l.answerText = ev.Turn, ""
		}
		l.answerText += ev.Text
	case pipeline.EventTrace:
		l.tracedTurn = max(l.tracedTurn, ev.Turn)
	}
}

// cut returns the turn_cut events for what the drop cut: a turn whose
// words were final but whose trace never went out, and speech whose final
// transcript never came.
func (l *turnLog) cut() []pipeline.Event {
	var evs []pipeline.Event
	if l.finalTurn > l.tracedTurn {
		sent := 0
		if l.answerTurn == l.finalTurn {
			sent = len(strings.TrimSpace(l.answerText))
		}
		msg := "the connection dropped before this turn's answer was sent; ask again"
		if sent > 0 {
			msg = fmt.Sprintf("the connection dropped while this turn's answer was sent (%d characters of it went out); ask again for the rest", sent)
		}
		evs = append(evs, pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeTurnCut, Turn: l.finalTurn, Text: l.finalText, Message: msg})
	}
	if l.partialTurn > l.finalTurn && strings.TrimSpace(l.partialText) != "" {
		evs = append(evs, pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeTurnCut, Turn: l.partialTurn, Text: l.partialText,
			Message: "the connection dropped while you were speaking: these words were heard so far and not answered; say it again"})
	}
	return evs
}

// settledHistory is the session's history with a turn the drop cut closed:
// an answer the drop cut keeps what was sent of it (maybe nothing), so user
// and assistant messages still alternate.
func settledHistory(h []llm.Message, l *turnLog) []llm.Message {
	if n := len(h); n > 0 && h[n-1].Role == llm.RoleUser {
		text := ""
		if l.answerTurn == l.finalTurn {
			text = strings.TrimSpace(l.answerText)
		}
		h = append(h, llm.Message{Role: llm.RoleAssistant, Content: text})
	}
	return h
}
