package xiaozhi

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

const (
	// uplinkRate is the rate device audio is decoded at: the ASR's, so the
	// session resamples nothing (the firmware encodes 16 kHz anyway).
	uplinkRate = 16000
	// inputQueue bounds device audio waiting for the session: 5 s of 60 ms
	// packets. Past it packets are dropped and counted.
	inputQueue = 84
	ctrlQueue  = 16
	closeGrace = time.Second
	// endSilenceMargin is added to the VAD's end silence when a listen stop
	// pushes silence to end the utterance at once.
	endSilenceMargin = 2 * pipeline.FrameMs
)

// conn is one device session. Fields marked "reader" are touched only by
// the reader goroutine (the HTTP handler's), "writer" only by the writer.
//
//	reader ──in──► session ──out──► writer
//	   └──────────ctrl (hello, abort)──┘   writer ──in (playback_start, interrupt)──► session
//
// in is never closed (the reader and the writer both send events on it):
// the session ends when ctx is cancelled, which whoever ends first does.
// The reader closes ctrl; the session goroutine closes out (serve closes it
// when no session started).
type conn struct {
	h   *Handler
	ws  *websocket.Conn
	id  string
	log zerolog.Logger

	info    SessionInfo
	version int // binary framing, from Protocol-Version, then the hello

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	in     chan pipeline.Input
	ctrl   chan ctrlMsg
	mcp    chan []byte // JSON-RPC for the device → writer; never closed (a tool call may send as the session ends)
	out    chan pipeline.Output
	runErr chan error

	lastActive atomic.Int64 // unix nanos of the last listen start, final transcript or answer end

	// dev is the device's MCP tools, nil unless its hello announced MCP
	// and Config.DeviceTools is on; set by the reader before the session
	// starts.
	dev *deviceTools

	// reader
	started    bool
	draining   bool
	readBuf    []byte
	uplink     *voice.Uplink
	listening  bool
	mode       string
	idleFrames int // audio outside listening: the wake-word burst
	silenceN   int // silence packets a listen stop pushes
}

type ctrlKind int

const (
	ctrlJSON  ctrlKind = iota + 1 // write msg
	ctrlAbort                     // the device aborted: stop the answer, answer tts stop
	ctrlClose                     // close with code after writing msg (if any)
	ctrlStart                     // the session started: the writer may set up its encoder
)

type ctrlMsg struct {
	kind ctrlKind
	msg  any
	code int
}

func newConn(h *Handler, ws *websocket.Conn, deviceID, clientID string, version int, remote string) *conn {
	id := newSessionID()
	if version == 0 {
		version = 1
	}
	c := &conn{
		h:       h,
		ws:      ws,
		id:      id,
		log:     h.host.Log.With().Str("remote", remote).Str("session", id).Str("device", deviceID).Logger(),
		info:    SessionInfo{ID: id, DeviceID: deviceID, ClientID: clientID},
		version: version,
		in:      make(chan pipeline.Input, inputQueue),
		ctrl:    make(chan ctrlMsg, ctrlQueue),
		mcp:     make(chan []byte, ctrlQueue),
		out:     make(chan pipeline.Output),
		runErr:  make(chan error, 1),
		readBuf: make([]byte, h.host.MaxFrameBytes),
		mode:    modeAuto,
	}
	c.ctx, c.cancel = context.WithCancel(h.host.Base)
	c.touch()
	return c
}

func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

func (c *conn) serve() {
	c.log.Debug().Int("protocol_version", c.version).Msg("xiaozhi device connected")
	c.wg.Go(c.writeLoop)
	c.readLoop()
	c.cancel() // the device is gone: end the session
	if !c.started {
		close(c.out)
	}
	c.wg.Wait()
	_ = c.ws.Close()
	c.log.Debug().Msg("xiaozhi device disconnected")
}

// readLoop is the connection's only reader (frameReader, on the raw
// connection; see wsread.go).
func (c *conn) readLoop() {
	defer close(c.ctrl)
	// The hello must come first, within HelloTimeout.
	_ = c.ws.SetReadDeadline(time.Now().Add(c.h.cfg.HelloTimeout))
	stop := context.AfterFunc(c.ctx, func() { _ = c.ws.SetReadDeadline(time.Now().Add(closeGrace)) })
	defer stop()
	fr := newFrameReader(c.ws.NetConn())
	onControl := func(op byte, payload []byte) {
		if op == opPing {
			_ = c.ws.WriteControl(websocket.PongMessage, payload, time.Now().Add(c.h.host.WriteTimeout))
		}
		if c.started {
			c.extendDeadline()
		}
	}
	for {
		op, n, err := fr.next(c.readBuf, onControl)
		var ne interface{ Timeout() bool }
		switch {
		case err == nil && op == opClose:
			code := websocket.CloseNoStatusReceived
			if n >= 2 {
				code = int(binary.BigEndian.Uint16(fr.control[:2]))
			}
			c.log.Debug().Int("code", code).Msg("device closed the websocket")
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(c.h.host.WriteTimeout))
			return
		case errors.Is(err, errTooBig):
			if !c.draining {
				c.reject(pipeline.CodeTooLarge, fmt.Sprintf("message over %d bytes", c.h.host.MaxFrameBytes), websocket.CloseMessageTooBig)
			}
			continue
		case errors.Is(err, errProtocol):
			c.log.Info().Err(err).Msg("xiaozhi websocket protocol error")
			c.send(ctrlMsg{kind: ctrlClose, code: websocket.CloseProtocolError})
			return
		case err != nil && (c.ctx.Err() != nil || c.draining):
			return
		case err != nil && !c.started && errors.As(err, &ne) && ne.Timeout():
			c.log.Info().Dur("timeout", c.h.cfg.HelloTimeout).Msg("xiaozhi device sent no hello")
			c.send(ctrlMsg{kind: ctrlClose, code: websocket.ClosePolicyViolation,
				msg: errorMessage{Type: typeError, Code: pipeline.CodeNotStarted, Message: "no hello within " + c.h.cfg.HelloTimeout.String(), SessionID: c.id}})
			return
		case err != nil:
			c.log.Info().Err(err).Msg("xiaozhi websocket ended without a close")
			return
		}
		if c.draining {
			continue
		}
		if c.started {
			c.extendDeadline()
		}
		if op == opText {
			c.handleText(c.readBuf[:n])
		} else {
			c.handleAudio(c.readBuf[:n])
		}
		if c.ctx.Err() != nil {
			c.draining = true
		}
	}
}

func (c *conn) extendDeadline() {
	if c.ctx.Err() == nil {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.h.host.IdleTimeout))
	}
}

func (c *conn) handleText(data []byte) {
	m, err := parseDeviceMessage(data)
	if err != nil {
		c.reject(pipeline.CodeBadMessage, err.Error(), 0)
		return
	}
	if m.Type == typeHello {
		c.hello(m)
		return
	}
	if !c.started {
		c.reject(pipeline.CodeNotStarted, m.Type+" before hello", 0)
		return
	}
	switch m.Type {
	case typeListen:
		c.listen(m)
	case typeAbort:
		c.log.Debug().Str("reason", m.Reason).Msg("device aborted the answer")
		c.send(ctrlMsg{kind: ctrlAbort})
	case typeMCP:
		c.handleMCP(m.Payload)
	case typePing:
		c.send(ctrlMsg{kind: ctrlJSON, msg: pongMessage{Type: typePong, SessionID: c.id}})
	case typeGoodbye:
		c.log.Debug().Msg("device said goodbye")
		c.send(ctrlMsg{kind: ctrlClose, code: websocket.CloseNormalClosure})
		c.draining = true
	case typeIoT:
		c.log.Debug().Msg("legacy iot message ignored")
	default:
		c.log.Debug().Str("type", m.Type).Msg("unknown xiaozhi message type ignored")
	}
}

// hello starts the session and answers at once (the device waits 10 s).
// A repeated hello is answered again and changes nothing else.
func (c *conn) hello(m deviceMessage) {
	if c.started {
		c.send(ctrlMsg{kind: ctrlJSON, msg: helloReply(c.id, c.version, c.h.cfg.OutputRate)})
		return
	}
	if v := int(m.Version); v != 0 {
		c.version = v
	}
	c.info.MCP = bool(m.Features.MCP)
	up, err := voice.NewUplink(c.in, voice.EncodingOpus, uplinkRate)
	if err != nil {
		c.reject(pipeline.CodeInternal, err.Error(), websocket.CloseInternalServerErr)
		return
	}
	cfg := c.h.host.Pipeline
	cfg.InputRate, cfg.OutputRate = uplinkRate, c.h.cfg.OutputRate
	cfg.Device = c.info.DeviceID
	// A board without echo cancellation hears the answer it plays: the
	// session cancels it (pipeline.echo.mode auto), and barge-in stays on.
	cfg.DeviceEcho = !bool(m.Features.AEC)
	// A device that reconnects gets its conversation back: a timer it set
	// before the drop rings after it (tools.Conversations).
	if c.info.DeviceID != "" {
		cfg.ConversationKey = "xiaozhi:" + c.info.DeviceID
	}
	obs := c.h.host.Observer
	if f := c.h.host.SessionObserver; f != nil {
		obs = f(c.info)
	}
	be := c.h.host.Backends
	if c.info.MCP && c.h.cfg.DeviceTools {
		rpc := newMCPClient(c.ctx, c.h.cfg.MCPTimeout, c.log, c.queueMCP, c.tryQueueMCP)
		c.dev = newDeviceTools(rpc, c.h.cfg, c.info.DeviceID, c.log)
		if f := c.h.cfg.onDeviceTools; f != nil {
			f(c.dev)
		}
		// A copy: the server's slice is every session's.
		be.Tools = append(slices.Clip(be.Tools), c.dev)
	}
	sess, p := voice.Start(c.id, cfg, be, obs, c.h.host.Log.With().Str("device", c.info.DeviceID).Logger())
	if p != nil {
		c.reject(p.Code, p.Message, websocket.CloseInternalServerErr)
		return
	}
	c.uplink, c.started = up, true
	// The longest the endpointer may wait: the VAD's end silence, or the
	// semantic end of turn's ceiling.
	endMs := max(cfg.VAD.EndSilenceMs, cfg.Turn.MaxSilenceMs, pipeline.DefaultConfig().VAD.EndSilenceMs)
	c.silenceN = (endMs + endSilenceMargin + frameDurationMs - 1) / frameDurationMs
	c.extendDeadline()
	c.log.Info().Int("protocol_version", c.version).Bool("mcp", c.info.MCP).Bool("aec", bool(m.Features.AEC)).
		Str("client_id", c.info.ClientID).Int("output_rate", c.h.cfg.OutputRate).Msg("xiaozhi session started")
	// The reply goes through ctrl before the session can produce output,
	// and the writer drains ctrl first.
	c.send(ctrlMsg{kind: ctrlStart, msg: helloReply(c.id, c.version, c.h.cfg.OutputRate)})
	if c.dev != nil {
		c.wg.Go(func() { c.dev.discover(c.ctx) })
	}
	c.wg.Go(func() {
		defer close(c.out)
		c.runErr <- voice.Run(c.ctx, sess, c.in, c.out, c.log)
	})
}

func (c *conn) listen(m deviceMessage) {
	switch m.State {
	case listenDetect:
		// The wake word fired; its audio (the burst before this) is not
		// part of the question. Typed text turns are not supported.
		c.log.Debug().Str("wake_word", m.Text).Int("burst_packets", c.idleFrames).Msg("device wake word")
		c.idleFrames = 0
	case listenStart:
		c.mode, c.listening = listenMode(m.Mode), true
		c.touch()
		c.log.Debug().Str("mode", c.mode).Msg("device listening")
	case listenStop:
		if c.listening {
			c.endUtterance()
		}
		c.listening = false
	}
}

// endUtterance ends what the person said at a listen stop (push-to-talk
// released): silence longer than the VAD's end silence goes to the session
// at once, so the turn ends now instead of after the silence would have
// been heard. The audio clock marks speech_end at the last real packet.
func (c *conn) endUtterance() {
	for range c.silenceN {
		if c.uplink.WriteSilence(c.ctx, frameDurationMs*uplinkRate/1000) != nil {
			return
		}
	}
}

func (c *conn) handleAudio(data []byte) {
	if !c.started {
		c.reject(pipeline.CodeNotStarted, "audio before hello", 0)
		return
	}
	payload, _, err := parseFrame(c.version, data)
	if err != nil {
		c.reject(pipeline.CodeBadAudio, err.Error(), 0)
		return
	}
	if len(payload) == 0 {
		return // DTX may produce empty packets: nothing to decode
	}
	if !c.listening {
		c.idleFrames++ // the wake-word burst, or audio after push-to-talk ended
		return
	}
	queued, p := c.uplink.Write(payload)
	switch {
	case p != nil:
		c.reject(p.Code, p.Message, 0)
	case !queued:
		c.h.host.Dropped("input_full")
	}
}

// handleMCP takes a device mcp message's JSON-RPC payload: answers go to
// the device tools' requests; without device tools, the device's own
// requests are still answered.
func (c *conn) handleMCP(payload []byte) {
	if c.dev != nil {
		c.dev.rpc.handle(payload)
		return
	}
	var msg rpcMessage
	if err := json.Unmarshal(payload, &msg); err != nil || msg.Method == "" {
		c.log.Debug().Int("bytes", len(payload)).Msg("device mcp message dropped (no device tools this session)")
		return
	}
	answerDeviceRequest(msg, c.tryQueueMCP, c.log)
}

// queueMCP queues a JSON-RPC object for the device, waiting while the
// writer is behind.
func (c *conn) queueMCP(ctx context.Context, payload []byte) error {
	select {
	case c.mcp <- payload:
		return nil
	case <-c.ctx.Done():
		return errDeviceGone
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryQueueMCP queues a JSON-RPC object unless the queue is full (the
// reader's replies, which must not block).
func (c *conn) tryQueueMCP(payload []byte) bool {
	if c.ctx.Err() != nil {
		return false
	}
	select {
	case c.mcp <- payload:
		return true
	default:
		return false
	}
}

// reject reports a bad message to the device (as an error message, which
// the firmware logs and ignores) and counts it; with a closeCode the
// writer closes the connection after it.
func (c *conn) reject(code, msg string, closeCode int) {
	c.h.host.Rejected(code)
	c.log.Debug().Str("code", code).Str("reason", msg).Msg("device message rejected")
	kind := ctrlJSON
	if closeCode != 0 {
		kind = ctrlClose
		c.draining = true
	}
	c.send(ctrlMsg{kind: kind, code: closeCode, msg: errorMessage{Type: typeError, Code: code, Message: msg, SessionID: c.id}})
}

func (c *conn) send(m ctrlMsg) {
	select {
	case c.ctrl <- m:
	case <-c.ctx.Done():
	}
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // a UUID v4, the shape the ecosystem's servers hand out
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
