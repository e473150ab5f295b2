// Package volc is a tts.Synthesizer on Volcengine's streaming speech
// synthesis, the v1 WebSocket API (/api/v1/tts/ws_binary): one connection
// per Synthesize call, one full client request (JSON, gzip) with the text,
// and audio-only frames back, the last with a negative sequence. Protocol
// facts: ../shared/docs/volcengine-protocols.md, sections 2 and 4.1.
//
// The bidirectional v3 API (text fed while audio comes back, one connection
// per session) would save the handshake per sentence; it is not built.
package volc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/volcproto"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/stream"
)

// Environment variables for the credentials (shared with asr/volc).
const (
	AppIDEnv = "VOLC_APP_ID"
	TokenEnv = "VOLC_ACCESS_TOKEN" //nolint:gosec // the variable's name, not a credential
)

// DefaultURL is the v1 streaming endpoint.
const DefaultURL = "wss://openspeech.bytedance.com/api/v1/tts/ws_binary"

// Config configures the synthesiser.
type Config struct {
	URL     string // "" = DefaultURL
	AppID   string // app.appid
	Token   string // "Authorization: Bearer; <token>" (from TokenEnv)
	Cluster string // app.cluster; "" = volcano_tts
	Voice   string // audio.voice_type, e.g. BV001_streaming
	Rate    int    // audio.rate: 8000, 16000 or 24000 (default)
	Speed   float64
	// Timeout bounds the handshake and every wait for the next frame.
	Timeout time.Duration
	Log     zerolog.Logger
}

// Synthesizer is safe for concurrent use: every call has its own connection.
type Synthesizer struct {
	cfg    Config
	dialer websocket.Dialer
}

// New checks cfg; it does not connect.
func New(cfg Config) (*Synthesizer, error) {
	switch {
	case cfg.AppID == "":
		return nil, fmt.Errorf("volc tts: no app id (set tts.volc.app_id or %s)", AppIDEnv)
	case cfg.Token == "":
		return nil, fmt.Errorf("volc tts: no access token (set %s)", TokenEnv)
	case cfg.Voice == "":
		return nil, fmt.Errorf("volc tts: no voice (tts.volc.voice)")
	}
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "volcano_tts"
	}
	if cfg.Rate == 0 {
		cfg.Rate = 24000
	}
	if cfg.Rate != 8000 && cfg.Rate != 16000 && cfg.Rate != 24000 {
		return nil, fmt.Errorf("volc tts: rate %d (want 8000, 16000 or 24000)", cfg.Rate)
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Synthesizer{cfg: cfg, dialer: websocket.Dialer{HandshakeTimeout: cfg.Timeout}}, nil
}

// SampleRate implements tts.Synthesizer.
func (s *Synthesizer) SampleRate() int { return s.cfg.Rate }

// Close implements io.Closer (nothing is held between calls).
func (s *Synthesizer) Close() error { return nil }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func speakable(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) >= 0
}

// Synthesize implements tts.Synthesizer: audio frames are passed on as
// they arrive. The service gives no word timings on this API, so the one
// word mark says the whole text was heard with the last sample.
func (s *Synthesizer) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	logid := ""
	err := s.synthesize(ctx, text, out, &logid)
	if err != nil && logid != "" && ctx.Err() == nil {
		err = fmt.Errorf("%w (logid %s)", err, logid) // what Volcengine's support asks for
	}
	return err
}

func (s *Synthesizer) synthesize(ctx context.Context, text string, out chan<- tts.Chunk, logid *string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !speakable(text) {
		return nil // the service rejects punctuation-only text (3011)
	}
	cfg := s.cfg
	h := http.Header{}
	h.Set("Authorization", "Bearer; "+cfg.Token) // with the semicolon [DEMO]
	conn, resp, err := s.dialer.DialContext(ctx, cfg.URL, h)
	if resp != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return handshakeError(resp, err)
	}
	defer conn.Close()
	*logid = resp.Header.Get("X-Tt-Logid")
	cfg.Log.Debug().Str("logid", *logid).Msg("volc tts: connected")
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	reqid := newID()
	payload, _ := json.Marshal(map[string]any{
		"app":  map[string]any{"appid": cfg.AppID, "token": "access_token", "cluster": cfg.Cluster},
		"user": map[string]any{"uid": "voxpipe"},
		"audio": map[string]any{"voice_type": cfg.Voice, "encoding": "pcm", "rate": cfg.Rate,
			"speed_ratio": cfg.Speed},
		"request": map[string]any{"reqid": reqid, "text": text, "text_type": "plain", "operation": "submit"},
	})
	req, err := volcproto.Encode(volcproto.Frame{Type: volcproto.TypeFullClient, Serial: volcproto.SerialJSON, Comp: volcproto.CompGzip, Payload: payload})
	if err != nil {
		return err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(cfg.Timeout))
	if err := conn.WriteMessage(websocket.BinaryMessage, req); err != nil {
		return s.connErr(ctx, "sending the request", err)
	}
	total := 0
	var odd []byte // a byte of a sample split across frames
	// The service's audio is shaped like every engine's (tts/stream): its
	// leading silence dropped, long pauses cut, the mark moved to match.
	w := stream.NewWriter(stream.Config{SampleRate: cfg.Rate}, stream.Send(ctx, out))
	for {
		_ = conn.SetReadDeadline(time.Now().Add(cfg.Timeout))
		kind, msg, err := conn.ReadMessage()
		if err != nil {
			if total > 0 {
				return s.connErr(ctx, "connection lost mid-audio", err)
			}
			return s.connErr(ctx, "connection lost before any audio", err)
		}
		if kind == websocket.TextMessage {
			return fmt.Errorf("volc tts: server error: %s", strings.TrimSpace(string(msg)))
		}
		f, err := volcproto.Decode(msg)
		if err != nil {
			return fmt.Errorf("volc tts: %w", err)
		}
		switch f.Type {
		case volcproto.TypeError:
			return &volcproto.ServerError{Service: "volc tts", Code: f.Code, Message: errMessage(f.Payload)}
		case volcproto.TypeAudioServer:
			if f.Flags == 0 && len(f.Payload) == 0 {
				continue // an ACK
			}
			b := f.Payload
			if len(odd) > 0 {
				b = append(odd, b...)
				odd = nil
			}
			if len(b)%2 == 1 {
				odd = []byte{b[len(b)-1]}
				b = b[:len(b)-1]
			}
			pcm := make([]int16, len(b)/2)
			for i := range pcm { // little-endian [?] (doc 4.1)
				pcm[i] = int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
			}
			total += len(pcm)
			var words []tts.WordMark
			if f.Last() {
				words = []tts.WordMark{{TextEnd: len(text), EndSample: total}}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := w.Write(pcm, words); err != nil {
				return err
			}
			if f.Last() {
				_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return w.Close()
			}
		default:
			// Type 12 (front-end timings) and full responses: nothing to play.
		}
	}
}

func (s *Synthesizer) connErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("volc tts: no frame from the server for %v", s.cfg.Timeout)
	}
	return fmt.Errorf("volc tts: %s: %w", what, err)
}

// errMessage takes the message of the JSON an error frame usually carries.
func errMessage(p []byte) string {
	var m struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(p, &m) == nil && m.Message+m.Error != "" {
		return m.Message + m.Error
	}
	return strings.TrimSpace(string(p))
}

func handshakeError(resp *http.Response, err error) error {
	if resp == nil {
		return fmt.Errorf("volc tts: connect: %w", err)
	}
	var buf [512]byte
	n, _ := resp.Body.Read(buf[:])
	reason, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), "\n")
	return fmt.Errorf("volc tts: handshake refused: HTTP %d %s (logid %s)", resp.StatusCode, reason, resp.Header.Get("X-Tt-Logid"))
}
