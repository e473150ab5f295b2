package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// Wire names of the start message's encodings.
const (
	EncodingPCM16 = voice.EncodingPCM16
	EncodingOpus  = voice.EncodingOpus
)

// ClientStart is the "start" type a client sends first.
const ClientStart = voice.ClientStart

// FrameMs is the duration of every answer audio frame the server sends.
const FrameMs = voice.FrameMs

const (
	// closeGrace is how long the reader keeps waiting for the client's
	// close reply once the connection is ending.
	closeGrace = time.Second
	// inputQueue bounds audio waiting for the session: 5 s of 20 ms frames.
	// Past it frames are dropped (and counted) so a stalled session never
	// stalls the socket.
	inputQueue = 250
	// ctrlQueue bounds events from the reader waiting for the writer.
	ctrlQueue = 16
	// maxOpusFrameSamples is 120 ms at 48 kHz, the longest Opus packet.
	maxOpusFrameSamples = voice.MaxOpusFrameSamples
)

// ctrlMsg is an event from the reader to the writer. A non-zero closeCode
// makes the writer close the connection after the event.
type ctrlMsg struct {
	ev        pipeline.Event
	closeCode int
}

// conn is one WebSocket voice session. Fields marked "reader" are touched
// only by the reader goroutine, "writer" only by the writer.
type conn struct {
	srv *Server
	ws  *websocket.Conn
	id  string
	log zerolog.Logger // with the session id
	// sessLog is log without the id, for pipeline.NewSession (which adds it).
	sessLog zerolog.Logger

	ctx         context.Context
	cancel      context.CancelFunc
	cancelCause context.CancelCauseFunc // ends ctx with a cause (takeOver, a resumed max_session)
	wg          sync.WaitGroup          // the writer and the session goroutine
	finished    chan struct{}           // closed when serve has parked or dropped the session

	in     chan pipeline.Input  // reader → session; closed by the reader
	ctrl   chan ctrlMsg         // reader → writer; closed by the reader
	out    chan pipeline.Output // session → writer; closed by the session goroutine
	runErr chan error           // session goroutine → writer, buffered 1

	// reader (and serve, after the reader returned)
	token    string        // the session token (resume.go); "" when resume is off
	settings voice.Message // the start message in effect
	// conversation is the tools.Conversations key of the resume chain
	// (conversationKey of its first session's id); "" when resume is off.
	conversation string
	began        time.Time   // when the conversation started (a resumed one: its first connection)
	stopped      bool        // the client sent stop
	maxTimer     *time.Timer // a resumed session's remaining max_session

	// session goroutine, read by serve after wg.Wait
	sess    *pipeline.Session
	sessErr error

	// writer, read by serve after wg.Wait
	seen turnLog

	// reader
	rules    voice.Rules
	started  bool
	startDue time.Time // without a start by then the connection is closed
	draining bool      // a fatal error was reported: discard input until closed
	readBuf  []byte
	uplink   *voice.Uplink
}

func newConn(s *Server, ws *websocket.Conn, id string, log zerolog.Logger) *conn {
	c := &conn{
		srv:      s,
		ws:       ws,
		id:       id,
		log:      log.With().Str("session", id).Logger(),
		sessLog:  log,
		in:       make(chan pipeline.Input, inputQueue),
		ctrl:     make(chan ctrlMsg, ctrlQueue),
		out:      make(chan pipeline.Output),
		runErr:   make(chan error, 1),
		readBuf:  make([]byte, s.cfg.MaxFrameBytes+1),
		finished: make(chan struct{}),
	}
	base, cancelBase := s.sessionContext()
	c.ctx, c.cancelCause = context.WithCancelCause(base)
	c.cancel = func() {
		c.cancelCause(nil)
		cancelBase()
	}
	c.startDue = time.Now().Add(s.cfg.StartTimeout)
	return c
}

// serve runs the connection to its end: the reader here, the writer and
// (after start) the session in goroutines it waits for.
func (c *conn) serve() {
	c.log.Debug().Msg("websocket connected")
	c.wg.Go(c.writeLoop)
	c.readLoop()
	if !c.started {
		close(c.out) // no session goroutine owns it
	}
	c.wg.Wait()
	c.cancel()
	_ = c.ws.Close()
	if c.maxTimer != nil {
		c.maxTimer.Stop()
	}
	if c.token != "" {
		p := c.parkable()
		c.srv.resume.release(c.token, c, p)
		if p == nil {
			c.endConversation()
		}
	}
	close(c.finished)
	c.log.Debug().Msg("websocket closed")
}

// conversationKey names the conversation of a resume chain by its first
// session's id, apart from xiaozhi's device keys.
func conversationKey(firstID string) string { return "ws:" + firstID }

// endConversation ends the chain's conversation when its session ended for
// good (stop, max_session, shutdown, a failure): no one can resume it, so
// its timers stop now rather than ring into nothing until the hold ends.
func (c *conn) endConversation() {
	if reg := c.srv.backends.Conversations; reg != nil && c.conversation != "" {
		reg.Open(c.conversation).End()
	}
}

// takeOver ends the connection because another one resumes its session.
func (c *conn) takeOver() { c.cancelCause(errTakenOver) }

// parkable returns what to keep of a session that ended, or nil when it
// ended for good: the client's stop, shutdown, max_session or a failure.
func (c *conn) parkable() *parkedSession {
	cause := context.Cause(c.ctx)
	taken := errors.Is(cause, errTakenOver)
	switch {
	case c.sess == nil || c.stopped:
		return nil
	case taken:
	case c.srv.baseCtx.Err() != nil, errors.Is(cause, errMaxSession):
		return nil
	case c.sessErr != nil && !errors.Is(c.sessErr, context.Canceled):
		return nil
	}
	p := &parkedSession{
		history:      settledHistory(c.sess.History(), &c.seen),
		lastTurn:     c.sess.LastTurn(),
		settings:     c.settings,
		conversation: c.conversation,
		started:      c.began,
		cut:          c.seen.cut(),
	}
	c.log.Info().Int("turn", p.lastTurn).Int("cut", len(p.cut)).Bool("taken_over", taken).Msg("session parked for resumption")
	return p
}

// readLoop is the connection's only reader.
func (c *conn) readLoop() {
	defer close(c.ctrl)
	defer close(c.in)

	c.extendDeadline()
	c.ws.SetPongHandler(func(string) error {
		c.extendDeadline()
		return nil
	})
	// A read blocks without a context: when the connection is ending, cut
	// the deadline to a grace period for the client's close reply.
	stop := context.AfterFunc(c.ctx, c.cutDeadline)
	defer stop()

	for {
		typ, r, err := c.ws.NextReader()
		if err != nil && !c.started && !c.draining && c.ctx.Err() == nil && isTimeout(err) {
			// A connection that never starts holds a session slot: it
			// gets a grace period to read the error, then is closed.
			c.srv.LimitRejected("start_timeout")
			c.reject(pipeline.CodeNotStarted, fmt.Sprintf("no start within %s", c.srv.cfg.StartTimeout), websocket.ClosePolicyViolation)
			return
		}
		if err != nil {
			// A close from the client is normal; a timeout or a vanished
			// peer is worth a line (not an error: it is the client's doing).
			if c.ctx.Err() == nil && !c.draining && !websocket.IsCloseError(err,
				websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
				c.log.Info().Err(err).Msg("websocket ended without a close")
			}
			return
		}
		if c.draining {
			continue // NextReader discards the rest of each message
		}
		c.extendDeadline()
		n, err := voice.ReadUpTo(r, c.readBuf)
		if err != nil {
			c.log.Debug().Err(err).Msg("websocket read failed")
			return
		}
		if n > c.srv.cfg.MaxFrameBytes {
			c.reject(pipeline.CodeTooLarge, fmt.Sprintf("message over %d bytes", c.srv.cfg.MaxFrameBytes), websocket.CloseMessageTooBig)
			c.draining = true
			continue
		}
		data := c.readBuf[:n]
		if typ == websocket.TextMessage {
			c.handleText(data)
		} else {
			c.handleAudio(data)
		}
		if c.ctx.Err() != nil && !c.draining {
			c.draining = true
		}
	}
}

func (c *conn) extendDeadline() {
	if c.draining {
		return
	}
	due := time.Now().Add(c.srv.cfg.IdleTimeout)
	if !c.started && c.startDue.Before(due) {
		due = c.startDue
	}
	_ = c.ws.SetReadDeadline(due)
	if c.ctx.Err() != nil { // lost a race with cutDeadline: cut again
		c.cutDeadline()
	}
}

// isTimeout says whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (c *conn) cutDeadline() {
	_ = c.ws.SetReadDeadline(time.Now().Add(closeGrace))
}

func (c *conn) handleText(data []byte) {
	msg, ev, start, p := c.rules.Parse(data)
	switch {
	case p != nil:
		c.rejectProblem(p, 0)
	case start:
		c.handleStart(msg)
	default:
		if ev.Type == pipeline.ClientStop {
			c.stopped = true
		}
		select { // control messages are never dropped
		case c.in <- pipeline.Input{Event: ev}:
		case <-c.ctx.Done():
		}
	}
}

func (c *conn) handleStart(msg voice.Message) {
	var resumed *parkedSession
	token := msg.Resume
	conversation := ""
	if c.srv.resume.enabled() {
		conversation = conversationKey(c.id)
	}
	if token != "" {
		// Validated against the parked session's settings before it is
		// taken: a refused start leaves the conversation parked, so the
		// client may correct it and resume (protocol.md). A token's
		// settings never change, so these are the ones take returns.
		was, conv, ok := c.srv.resume.settings(token)
		if !ok { // unknown, used, expired or resume off: take says which
			var p *voice.Problem
			if resumed, p = c.resumeFrom(token); p != nil {
				c.rejectProblem(p, 0)
				return
			}
			was, conv = resumed.settings, resumed.conversation // parked in the meantime
		}
		msg = mergeStart(msg, was)
		conversation = conv
	}
	encoding, outRate, p := voice.ValidateStart(msg)
	if p != nil {
		c.rejectProblem(p, 0)
		return
	}
	up, err := voice.NewUplink(c.in, encoding, msg.SampleRate)
	if err != nil {
		c.reject(pipeline.CodeBadFormat, err.Error(), 0)
		return
	}
	cfg := c.srv.cfg.Pipeline
	cfg.InputRate, cfg.OutputRate = msg.SampleRate, outRate
	cfg.Device = msg.Device
	cfg.DeviceEcho = msg.EchoCancelled != nil && !*msg.EchoCancelled
	// The resumed session joins the conversation of the chain's first
	// session, so its timers ring here.
	cfg.ConversationKey = conversation
	log := c.sessLog.With().Str("client", msg.Client.Name).Str("client_version", msg.Client.Version).Logger()
	sess, p := voice.Start(c.id, cfg, c.srv.backends, c.srv.metrics.ForSession(c.id, c.srv.observer(transportWS, c.id, "")), log)
	if p != nil {
		c.rejectProblem(p, 0)
		return
	}
	if token != "" && resumed == nil {
		if resumed, p = c.resumeFrom(token); p != nil {
			c.rejectProblem(p, 0) // the session built above is dropped unrun
			return
		}
	}
	ready := pipeline.Event{Type: pipeline.EventReady, Encoding: encoding, SampleRate: outRate, FrameMs: FrameMs}
	c.began = time.Now()
	if resumed != nil {
		if err := sess.Resume(resumed.history, resumed.lastTurn); err != nil {
			c.reject(pipeline.CodeInternal, err.Error(), 0)
			return
		}
		c.began = resumed.started
		if ms := c.srv.cfg.MaxSession; ms > 0 {
			c.maxTimer = time.AfterFunc(ms-time.Since(c.began), func() { c.cancelCause(errMaxSession) })
		}
		ready.Resumed, ready.Turn = true, resumed.lastTurn
	}
	// settings before register: resumeStore.settings reads them once the
	// token is known.
	c.sess, c.settings, c.conversation = sess, msg, conversation
	if c.srv.resume.enabled() {
		c.token = c.srv.resume.register(c)
		ready.SessionToken = c.token
	}
	c.uplink = up
	c.started = true
	c.extendDeadline() // the start deadline no longer applies
	c.rules.AcceptStart()
	c.rules.Running()
	c.log.Info().Str("client", msg.Client.Name).Str("client_version", msg.Client.Version).Str("encoding", encoding).Int("input_rate", msg.SampleRate).Int("output_rate", outRate).Str("device", msg.Device).Bool("resumed", resumed != nil).Msg("session started")
	// ready goes through ctrl before the session can produce anything, and
	// the writer drains ctrl first, so it is the first event the client
	// sees; a resumed session's turn_cut reports follow it.
	c.send(ctrlMsg{ev: ready})
	if resumed != nil {
		for _, ev := range resumed.cut {
			c.send(ctrlMsg{ev: ev})
		}
	}
	c.wg.Go(func() {
		defer close(c.out)
		err := c.srv.runSession(c.ctx, recording{id: c.id, inRate: msg.SampleRate, outRate: outRate}, sess, c.in, c.out, c.log)
		c.sessErr = err
		c.runErr <- err
	})
}

// resumeFrom takes the parked session token names, or returns a
// resume_failed problem (the client may send a plain start).
func (c *conn) resumeFrom(token string) (*parkedSession, *voice.Problem) {
	if !c.srv.resume.enabled() {
		return nil, &voice.Problem{Code: pipeline.CodeResumeFailed, Message: "sessions are not resumable on this server (server.resume.ttl is 0)"}
	}
	p, err := c.srv.resume.take(c.ctx, token)
	if err != nil {
		c.log.Info().Err(err).Msg("resume refused")
		return nil, &voice.Problem{Code: pipeline.CodeResumeFailed, Message: err.Error() + "; send a start without resume for a new session"}
	}
	if ms := c.srv.cfg.MaxSession; ms > 0 && time.Since(p.started) >= ms {
		return nil, &voice.Problem{Code: pipeline.CodeResumeFailed, Message: "the session reached max_session; send a start without resume for a new session"}
	}
	return p, nil
}

// settings returns the start message and the conversation key of the
// session token names, parked or still live (for a takeover), without
// taking it.
func (r *resumeStore) settings(token string) (voice.Message, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.parked[token]; ok {
		return p.settings, p.conversation, true
	}
	if c, ok := r.live[token]; ok {
		return c.settings, c.conversation, true // written before register took r.mu
	}
	return voice.Message{}, "", false
}

// mergeStart fills the fields a resuming start leaves out from the
// parked session's start message.
func mergeStart(msg, was voice.Message) voice.Message {
	if msg.SampleRate == 0 {
		msg.SampleRate = was.SampleRate
	}
	if msg.Encoding == "" {
		msg.Encoding = was.Encoding
	}
	if msg.OutputSampleRate == 0 && msg.SampleRate == was.SampleRate {
		msg.OutputSampleRate = was.OutputSampleRate
	}
	if msg.Client == (voice.ClientInfo{}) {
		msg.Client = was.Client
	}
	if msg.Device == "" {
		msg.Device = was.Device
	}
	msg.Resume = ""
	return msg
}

func (c *conn) handleAudio(data []byte) {
	if !c.started {
		c.reject(pipeline.CodeNotStarted, "audio before start", 0)
		return
	}
	queued, p := c.uplink.Write(data)
	switch {
	case p != nil:
		c.rejectProblem(p, 0)
	case !queued:
		c.srv.metrics.FrameDropped(reasonInputFull)
	}
}

func (c *conn) rejectProblem(p *voice.Problem, closeCode int) {
	c.reject(p.Code, p.Message, closeCode)
}

// reject reports a client error as an error event and counts it; with a
// closeCode the writer closes the connection after it.
func (c *conn) reject(code, msg string, closeCode int) {
	c.srv.metrics.frameRejected(code)
	c.log.Debug().Str("code", code).Str("reason", msg).Msg("client message rejected")
	c.send(ctrlMsg{ev: pipeline.Event{Type: pipeline.EventError, Code: code, Message: msg}, closeCode: closeCode})
}

func (c *conn) send(m ctrlMsg) {
	select {
	case c.ctrl <- m:
	case <-c.ctx.Done():
	}
}

// writeLoop is the connection's only writer. It ends the connection
// (cancel) whenever it returns.
func (c *conn) writeLoop() {
	defer c.cancel()
	w := writer{conn: c}
	ping := time.NewTicker(c.srv.cfg.IdleTimeout * 9 / 10)
	defer ping.Stop()

	ctrl, out := c.ctrl, c.out
	for ctrl != nil || out != nil {
		// ctrl first: ready must precede the session's output.
		if ctrl != nil {
			select {
			case m, ok := <-ctrl:
				if !ok {
					ctrl = nil
					continue
				}
				if !w.control(m) {
					return
				}
				continue
			default:
			}
		}
		select {
		case m, ok := <-ctrl:
			if !ok {
				ctrl = nil
				continue
			}
			if !w.control(m) {
				return
			}
		case o, ok := <-out:
			if !ok {
				w.sessionEnded(c.runErr)
				return
			}
			if !w.output(o) {
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.srv.cfg.WriteTimeout)); err != nil {
				return
			}
		case <-c.ctx.Done():
			w.ctxEnded()
			return
		}
	}
	w.close(websocket.CloseNormalClosure, "")
}

// writer holds the writer goroutine's state.
type writer struct {
	conn      *conn
	encoding  string
	rate      int
	announced bool // an audio event went out before the binary frames
	down      *voice.Downlink
}

// control writes an event from the reader; false ends the writer.
func (w *writer) control(m ctrlMsg) bool {
	if m.ev.Type == pipeline.EventReady {
		w.encoding, w.rate = m.ev.Encoding, m.ev.SampleRate
		w.down = voice.NewPCMDownlink()
		if w.encoding == EncodingOpus {
			down, err := voice.NewOpusDownlink(w.rate, w.conn.srv.cfg.OpusBitrate, FrameMs)
			if err != nil {
				w.conn.log.Error().Err(err).Msg("opus encoder")
				_ = w.event(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: err.Error()})
				w.close(websocket.CloseInternalServerErr, "opus encoder")
				return false
			}
			w.down = down
		}
	}
	if err := w.event(m.ev); err != nil {
		return false
	}
	if m.closeCode != 0 {
		w.close(m.closeCode, m.ev.Code)
		return false
	}
	return true
}

// output writes one session output; false ends the writer.
func (w *writer) output(o pipeline.Output) bool {
	if o.Event != nil {
		ev := *o.Event
		if ev.Type == pipeline.EventAudio {
			w.fillAudio(&ev)
			w.announced = true
		}
		if w.event(ev) != nil {
			return false
		}
		w.conn.seen.observe(&ev)
		return true
	}
	if !w.announced {
		ev := pipeline.Event{Type: pipeline.EventAudio}
		w.fillAudio(&ev)
		if w.event(ev) != nil {
			return false
		}
		w.announced = true
	}
	payload, err := w.down.Write(o.Audio)
	if err != nil {
		w.conn.srv.metrics.FrameDropped(reasonOpusEncode)
		w.conn.log.Debug().Err(err).Int("samples", len(o.Audio)).Msg("opus encode")
		return true
	}
	c := w.conn
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, payload); err != nil {
		c.log.Debug().Err(err).Msg("websocket write failed")
		return false
	}
	return true
}

func (w *writer) fillAudio(ev *pipeline.Event) {
	fillAudioFormat(ev, w.encoding, w.rate)
}

func (w *writer) event(ev pipeline.Event) error {
	c := w.conn
	if ev.Type == pipeline.EventError {
		c.srv.metrics.ErrorSent(ev.Code)
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	if err := c.ws.WriteJSON(ev); err != nil {
		c.log.Debug().Err(err).Str("event", ev.Type).Msg("websocket write failed")
		return err
	}
	return nil
}

// sessionEnded reports how Run ended and closes the connection.
func (w *writer) sessionEnded(runErr <-chan error) {
	var err error
	select {
	case err = <-runErr:
	default: // no session ran
	}
	if w.conn.ctx.Err() != nil {
		// Shutdown or max_session ended the session: the client is told
		// which, whichever of the two the writer saw first.
		w.ctxEnded()
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		w.conn.log.Warn().Err(err).Msg("session failed")
		_ = w.event(pipeline.Event{Type: pipeline.EventError, Code: pipeline.CodeInternal, Message: err.Error()})
		w.close(websocket.CloseInternalServerErr, "session failed")
		return
	}
	w.close(websocket.CloseNormalClosure, "")
}

// ctxEnded closes a connection whose context ended: 1008 at max_session,
// else 1001 (the server is shutting down).
func (w *writer) ctxEnded() {
	if errors.Is(context.Cause(w.conn.ctx), errTakenOver) {
		w.close(closeTakenOver, errTakenOver.Error())
		return
	}
	if w.conn.srv.maxSessionReached(w.conn.ctx) {
		w.close(websocket.ClosePolicyViolation, errMaxSession.Error())
		return
	}
	w.close(websocket.CloseGoingAway, "server shutting down")
}

func (w *writer) close(code int, text string) {
	c := w.conn
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text),
		time.Now().Add(c.srv.cfg.WriteTimeout))
}
