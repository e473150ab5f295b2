package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
)

// TracesPath serves the recent turn traces of every session (GET): the
// latency overlay's view of sessions that have no page of their own, such
// as xiaozhi devices. It is guarded like /v1/ and /rtc/config (web/access:
// the origin rule, and an API key or session token when keys are set).
const TracesPath = "/traces"

// traceLogSize is how many turns the log keeps, over all sessions: at a
// turn every few seconds, the last minutes of a busy server.
const traceLogSize = 256

// traceLimit is how many traces GET /traces returns without ?limit=.
const traceLimit = 50

// TracedTurn is one turn in GET /traces: its session, the transport and
// device it came over, when its speech ended, and the trace event the
// session sent (or, for a device, would have sent) its client.
type TracedTurn struct {
	Session   string    `json:"session"`
	Transport string    `json:"transport"`
	Device    string    `json:"device,omitempty"` // xiaozhi: the device id
	At        time.Time `json:"at"`               // speech_end, server clock
	*pipeline.Event
}

// TracedSession summarises a session's turns in the log.
type TracedSession struct {
	Session   string    `json:"session"`
	Transport string    `json:"transport"`
	Device    string    `json:"device,omitempty"`
	Turns     int       `json:"turns"`
	Last      time.Time `json:"last"` // the latest turn's speech_end
}

// traceLog keeps the last traceLogSize turns. Sessions record from their
// pacer goroutines; GET /traces reads.
type traceLog struct {
	mu   sync.Mutex // guards ring and next
	ring []TracedTurn
	next int // slot the next turn goes to once the ring is full
}

func newTraceLog() *traceLog { return &traceLog{ring: make([]TracedTurn, 0, traceLogSize)} }

func (l *traceLog) add(t TracedTurn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, t)
		return
	}
	l.ring[l.next] = t
	l.next = (l.next + 1) % len(l.ring)
}

// query returns the turns matching transport and session ("" matches any),
// oldest first, at most limit of the newest; and every session in the log
// of that transport, the most recent first.
func (l *traceLog) query(transport, session string, limit int) ([]TracedTurn, []TracedSession) {
	l.mu.Lock()
	all := make([]TracedTurn, 0, len(l.ring))
	all = append(all, l.ring[l.next:]...)
	all = append(all, l.ring[:l.next]...)
	l.mu.Unlock()
	turns := []TracedTurn{}
	sessions := []TracedSession{}
	index := map[string]int{}
	for _, t := range all {
		if transport != "" && t.Transport != transport {
			continue
		}
		i, ok := index[t.Session]
		if !ok {
			i = len(sessions)
			index[t.Session] = i
			sessions = append(sessions, TracedSession{Session: t.Session, Transport: t.Transport, Device: t.Device})
		}
		sessions[i].Turns++
		sessions[i].Last = t.At
		if session == "" || t.Session == session {
			turns = append(turns, t)
		}
	}
	if len(turns) > limit {
		turns = turns[len(turns)-limit:]
	}
	slices.SortStableFunc(sessions, func(a, b TracedSession) int { return b.Last.Compare(a.Last) })
	return turns, sessions
}

// serveTraces answers GET /traces[?transport=T][&session=ID][&limit=N]:
// {"turns": [...], "sessions": [...]}, turns oldest first.
func (s *Server) serveTraces(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := traceLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > traceLogSize {
			http.Error(w, "limit: want a number from 1 to "+strconv.Itoa(traceLogSize), http.StatusBadRequest)
			return
		}
		limit = n
	}
	switch tr := q.Get("transport"); tr {
	case "", transportWS, transportWebRTC, transportXiaozhi:
	default:
		http.Error(w, "transport "+strconv.Quote(tr)+": want websocket, webrtc or xiaozhi", http.StatusBadRequest)
		return
	}
	turns, sessions := s.traces.query(q.Get("transport"), q.Get("session"), limit)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Turns    []TracedTurn    `json:"turns"`
		Sessions []TracedSession `json:"sessions"`
	}{turns, sessions})
}

// traceRecorder is the part of a session's Observer that logs its turns.
type traceRecorder struct {
	log                      *traceLog
	session, transport, name string
}

func (r traceRecorder) record(tr pipeline.Trace) {
	if r.log == nil {
		return
	}
	r.log.add(TracedTurn{Session: r.session, Transport: r.transport, Device: r.name,
		At: tr.Marks[pipeline.MarkSpeechEnd], Event: tr.Event()})
}
