// Package volc is an asr.Recognizer on Volcengine's big-model streaming
// speech recognition ("sauc", /api/v3/sauc/bigmodel*), a WebSocket carrying
// internal/volcproto frames. Each utterance is one connection: a full
// client request (JSON, gzip, sequence 1), audio packets of PacketMs
// (gzip, sequence 2, 3, ...) and a last packet with the negated next
// sequence; the server answers with JSON results, the last one flagged.
// Protocol facts: ../shared/docs/volcengine-protocols.md, sections 2 and 3.1.
package volc

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/internal/volcproto"
)

// Environment variables for the credentials.
const (
	AppIDEnv = "VOLC_APP_ID"
	TokenEnv = "VOLC_ACCESS_TOKEN" //nolint:gosec // the variable's name, not a credential
)

// DefaultURL is the optimized bidirectional mode (results only when they
// change), which the doc recommends.
const DefaultURL = "wss://openspeech.bytedance.com/api/v3/sauc/bigmodel_async"

// Config configures the recogniser.
type Config struct {
	URL        string // "" = DefaultURL
	AppID      string // X-Api-App-Key
	Token      string // X-Api-Access-Key (from TokenEnv)
	ResourceID string // X-Api-Resource-Id; "" = volc.bigasr.sauc.duration
	// PacketMs is the audio per packet (the doc: 100-200 ms, 200 best).
	PacketMs int
	// EndWindowMs is request.end_window_size (0: the server's default).
	EndWindowMs int
	// Timeout bounds the handshake and the wait for the final result after
	// the last packet.
	Timeout time.Duration
	Log     zerolog.Logger
}

// Recognizer opens one WebSocket per utterance. Safe for concurrent use.
type Recognizer struct {
	cfg    Config
	dialer websocket.Dialer
}

// New checks cfg; it does not connect.
func New(cfg Config) (*Recognizer, error) {
	if cfg.AppID == "" {
		return nil, fmt.Errorf("volc asr: no app id (set asr.volc.app_id or %s)", AppIDEnv)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("volc asr: no access token (set %s)", TokenEnv)
	}
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.ResourceID == "" {
		cfg.ResourceID = "volc.bigasr.sauc.duration"
	}
	if cfg.PacketMs <= 0 {
		cfg.PacketMs = 200
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Recognizer{cfg: cfg, dialer: websocket.Dialer{HandshakeTimeout: cfg.Timeout, EnableCompression: false}}, nil
}

// Close implements io.Closer (nothing is held between utterances).
func (r *Recognizer) Close() error { return nil }

const rate = 16000 // the only rate sauc takes

// Start implements asr.Recognizer. The connection is made in the
// background; audio written meanwhile is queued.
func (r *Recognizer) Start(ctx context.Context, sampleRate int) (asr.Stream, error) {
	if sampleRate != rate {
		return nil, asr.ErrSampleRate
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{
		r: r, ctx: ctx, cancel: cancel,
		packet:  make([]int16, 0, rate*r.cfg.PacketMs/1000),
		sendq:   make(chan []byte, 64), // 64 packets of 200 ms: 12 s ahead
		results: make(chan asr.Result, 16),
		done:    make(chan struct{}),
		seq:     1,
	}
	go s.run()
	return s, nil
}

type stream struct {
	r      *Recognizer
	ctx    context.Context
	cancel context.CancelFunc

	// Write/Close side (one goroutine)
	packet []int16
	seq    int32
	closed bool
	pcm    []byte // scratch for little-endian samples

	sendq   chan []byte
	results chan asr.Result
	done    chan struct{} // closed when run returns

	mu      sync.Mutex
	err     error
	conn    *websocket.Conn // once connected
	closing bool            // Close was called: the final is due within Timeout
}

// awaitFinal bounds the wait for the final from now on. While audio flows
// the server may rightly say nothing for long (bigmodel_async answers only
// when the text changes), so reads have no deadline until then.
func (s *stream) awaitFinal(conn *websocket.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if conn != nil {
		s.conn = conn
	} else {
		s.closing = true
	}
	if s.conn != nil && s.closing {
		_ = s.conn.SetReadDeadline(time.Now().Add(s.r.cfg.Timeout))
	}
}

func (s *stream) setErr(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

func (s *stream) getErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *stream) Results() <-chan asr.Result { return s.results }

func (s *stream) Write(pcm []int16) error {
	if err := s.getErr(); err != nil {
		return err
	}
	if s.closed {
		return errors.New("volc asr: write after close")
	}
	for len(pcm) > 0 {
		n := min(len(pcm), cap(s.packet)-len(s.packet))
		s.packet = append(s.packet, pcm[:n]...)
		pcm = pcm[n:]
		if len(s.packet) == cap(s.packet) {
			if err := s.flush(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush sends the buffered audio as one packet (the last one when last).
func (s *stream) flush(last bool) error {
	s.seq++
	f := volcproto.Frame{Type: volcproto.TypeAudioClient, Flags: volcproto.FlagSeq, Serial: volcproto.SerialRaw, Comp: volcproto.CompGzip, Seq: s.seq}
	if last {
		f.Flags |= volcproto.FlagLast
		f.Seq = -s.seq
	}
	s.pcm = s.pcm[:0]
	for _, v := range s.packet {
		s.pcm = binary.LittleEndian.AppendUint16(s.pcm, uint16(v))
	}
	f.Payload = s.pcm
	s.packet = s.packet[:0]
	b, err := volcproto.Encode(f)
	if err != nil {
		return fmt.Errorf("volc asr: %w", err)
	}
	select {
	case s.sendq <- b:
		return nil
	default:
		err := errors.New("volc asr: the server is not taking audio fast enough")
		s.setErr(err)
		s.cancel()
		return err
	}
}

// Close sends the last packet and waits for the final result (at most
// Timeout). It returns the stream's error, if any.
func (s *stream) Close() error {
	if s.closed {
		return s.getErr()
	}
	s.closed = true
	if s.getErr() == nil {
		_ = s.flush(true) // its error is the stream's
	}
	close(s.sendq)
	s.awaitFinal(nil)
	select {
	case <-s.done:
	case <-time.After(s.r.cfg.Timeout + time.Second): // run's own deadlines fire first
		s.setErr(errors.New("volc asr: no final result"))
	}
	s.cancel()
	return s.getErr()
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// response is the JSON of a full server response (doc 3.1).
type response struct {
	Result struct {
		Text string `json:"text"`
	} `json:"result"`
	// Some error responses carry a code and message in the JSON.
	Code    uint32 `json:"code"`
	Message string `json:"message"`
	Error   string `json:"error"`
}

// run dials, sends the request and the queued audio, and reads results
// until the last one. It sends the final (possibly empty) and closes
// results, unless the stream's context ended.
func (s *stream) run() {
	defer close(s.done)
	defer close(s.results)
	final, logid, err := s.converse()
	if err != nil {
		if logid != "" { // what Volcengine's support asks for
			err = fmt.Errorf("%w (logid %s)", err, logid)
		}
		s.setErr(err)
	}
	if s.ctx.Err() != nil && err == nil {
		return // cancelled: no final, as the contract says
	}
	if err != nil {
		final = "" // a failed utterance gives no words
	}
	s.results <- asr.Result{Text: final, Final: true, At: time.Now()} // room is kept for it
}

func (s *stream) converse() (final, logid string, err error) {
	final, err = s.converseLog(&logid)
	return final, logid, err
}

func (s *stream) converseLog(logid *string) (string, error) {
	cfg := s.r.cfg
	h := http.Header{}
	h.Set("X-Api-App-Key", cfg.AppID)
	h.Set("X-Api-Access-Key", cfg.Token)
	h.Set("X-Api-Resource-Id", cfg.ResourceID)
	connID := newID()
	h.Set("X-Api-Connect-Id", connID)
	h.Set("X-Api-Request-Id", newID())
	conn, resp, err := s.r.dialer.DialContext(s.ctx, cfg.URL, h)
	if resp != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return "", nil
		}
		return "", handshakeError("volc asr", resp, err)
	}
	defer conn.Close()
	*logid = resp.Header.Get("X-Tt-Logid")
	cfg.Log.Debug().Str("logid", *logid).Str("connect_id", connID).Msg("volc asr: connected")
	s.awaitFinal(conn)
	stop := context.AfterFunc(s.ctx, func() { _ = conn.Close() })
	defer stop()

	req := map[string]any{
		"user":  map[string]any{"uid": "voxpipe"},
		"audio": map[string]any{"format": "pcm", "codec": "raw", "rate": rate, "bits": 16, "channel": 1},
		"request": map[string]any{
			"model_name": "bigmodel", "enable_itn": true, "enable_punc": true,
			"show_utterances": true, "result_type": "full",
		},
	}
	if cfg.EndWindowMs > 0 {
		req["request"].(map[string]any)["end_window_size"] = cfg.EndWindowMs
	}
	payload, _ := json.Marshal(req)
	first, err := volcproto.Encode(volcproto.Frame{Type: volcproto.TypeFullClient, Flags: volcproto.FlagSeq, Serial: volcproto.SerialJSON, Comp: volcproto.CompGzip, Seq: 1, Payload: payload})
	if err != nil {
		return "", err
	}
	// One writer goroutine: the request, then the audio as it is queued,
	// until Close closes the queue. It never blocks Write: after a failed
	// send it only drains.
	go func() {
		err := conn.WriteMessage(websocket.BinaryMessage, first)
		for b := range s.sendq {
			if err == nil {
				err = conn.WriteMessage(websocket.BinaryMessage, b)
			}
		}
	}()

	text := ""
	for {
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			if s.ctx.Err() != nil {
				return "", nil
			}
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				return "", fmt.Errorf("volc asr: no final result %v after the last packet", cfg.Timeout)
			}
			return "", fmt.Errorf("volc asr: connection lost before the final result: %w", err)
		}
		if kind == websocket.TextMessage {
			return "", fmt.Errorf("volc asr: server error: %s", strings.TrimSpace(string(msg)))
		}
		f, err := volcproto.Decode(msg)
		if err != nil {
			return "", fmt.Errorf("volc asr: %w", err)
		}
		switch f.Type {
		case volcproto.TypeError:
			return "", &volcproto.ServerError{Service: "volc asr", Code: f.Code, Message: string(f.Payload)}
		case volcproto.TypeFullServer:
			var r response
			if err := json.Unmarshal(f.Payload, &r); err != nil {
				return "", fmt.Errorf("volc asr: bad result JSON: %w", err)
			}
			if r.Code != 0 && r.Code != 20000000 {
				return "", &volcproto.ServerError{Service: "volc asr", Code: r.Code, Message: r.Message + r.Error}
			}
			if f.Last() {
				// The final. Whether the server then closes is not
				// documented [?]; the client closes (deferred).
				return r.Result.Text, nil
			}
			if r.Result.Text != "" && r.Result.Text != text {
				text = r.Result.Text
				// Partials are dropped rather than fill the final's room.
				if len(s.results) < cap(s.results)-1 {
					s.results <- asr.Result{Text: text, At: time.Now()}
				}
			}
		default:
			// ACKs (type 11) and anything else carry no result.
		}
	}
}

// handshakeError describes a refused upgrade: the HTTP status and the
// first line of the body the server gave as its reason.
func handshakeError(service string, resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("%s: connect: %w", service, err)
	}
	var buf [512]byte
	n, _ := resp.Body.Read(buf[:])
	reason, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), "\n")
	return fmt.Errorf("%s: handshake refused: HTTP %d %s (logid %s)", service, resp.StatusCode, reason, resp.Header.Get("X-Tt-Logid"))
}
