package voiceclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// Xiaozhi listening modes (the device's listen start modes).
const (
	ModeAuto     = "auto"     // the server's VAD ends each turn; the mic is off while the answer plays
	ModeManual   = "manual"   // push-to-talk: the whole recording is one press, then listen stop
	ModeRealtime = "realtime" // the mic stays open through answers
)

// XiaozhiConfig says how to play a xiaozhi device (the ESP32 firmware's
// protocol, docs/xiaozhi.md): the OTA check, the WebSocket, the hello,
// 16 kHz 60 ms Opus up, the announced rate down.
type XiaozhiConfig struct {
	// OTAURL is the device's OTA address (http://HOST:PORT/xiaozhi/ota/);
	// its answer gives the WebSocket URL, token and framing version.
	// Empty: URL and Token are used as given.
	OTAURL string
	URL    string // ws://HOST:PORT/xiaozhi/v1/, without OTAURL
	Token  string
	// DeviceID and ClientID identify the device (a MAC, a UUID); defaults
	// are fixed made-up ones.
	DeviceID, ClientID string
	// Version is the binary framing (1, 2 or 3); 0 takes the OTA answer's,
	// else 1.
	Version int
	Mode    string // ModeAuto (default), ModeManual or ModeRealtime
	// WakeWord, when set, starts like a wake-word device: a 2 s burst of
	// (quiet) audio sent at once, then listen detect with this text.
	WakeWord string
	// AbortAfter, when > 0, sends abort this long after each answer's first
	// audio (a button press while the device speaks).
	AbortAfter time.Duration
	// HelloTimeout is how long to wait for the server's hello (the
	// firmware's 10 s when 0); past it the connection is closed.
	HelloTimeout time.Duration
	// Turns, Tail, Timeout, KeepAudio and Log as in Config.
	Turns     int
	Tail      time.Duration
	Timeout   time.Duration
	KeepAudio bool
	Log       io.Writer
}

// XiaozhiRate is the device's microphone rate: speech for RunXiaozhi is
// mono PCM16 at this rate.
const XiaozhiRate = 16000

const (
	xzFrame      = XiaozhiRate * 60 / 1000 // samples in a 60 ms packet
	xzPacket     = 60 * time.Millisecond
	xzBurstFrame = 33 // ~2 s of wake-word audio
)

// NewXiaozhiEncoder returns a device microphone's encoder: 16 kHz mono Opus
// at complexity 0, as the firmware configures its own (AS_OPUS_ENC_CONFIG,
// main/audio/audio_service.h), at 32 kbit/s (the firmware lets libopus
// choose).
func NewXiaozhiEncoder() (*audio.OpusEncoder, error) {
	enc, err := audio.NewOpusEncoder(XiaozhiRate, 32000)
	if err != nil {
		return nil, err
	}
	if err := enc.SetComplexity(0); err != nil {
		return nil, err
	}
	return enc, nil
}

// ErrNoHello is returned when the server does not answer the hello in time.
var ErrNoHello = errors.New("voiceclient: no server hello in time (the device closes the connection)")

// RunXiaozhi plays a xiaozhi device speaking speech (16 kHz): in auto mode
// it streams the recording in real time with the mic off while answers
// play (resuming, with a new listen start, once the answer has played), in
// manual mode as one push-to-talk press, in realtime mode continuously. It
// returns every turn measured as Run measures /ws turns (Meter); Trace and
// the server's figures are empty, since the protocol reports none.
func RunXiaozhi(ctx context.Context, cfg XiaozhiConfig, speech []int16) (*Result, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeAuto
	}
	if cfg.Mode != ModeAuto && cfg.Mode != ModeManual && cfg.Mode != ModeRealtime {
		return nil, fmt.Errorf("voiceclient: xiaozhi mode %q (want auto, manual or realtime)", cfg.Mode)
	}
	if cfg.DeviceID == "" {
		cfg.DeviceID = "02:00:00:00:00:01"
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "00000000-0000-4000-8000-000000000001"
	}
	if cfg.Tail == 0 {
		cfg.Tail = DefaultTail
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.OTAURL != "" {
		if err := XiaozhiOTA(ctx, &cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Version == 0 {
		cfg.Version = 1
	}
	if cfg.Version < 1 || cfg.Version > 3 {
		return nil, fmt.Errorf("voiceclient: xiaozhi framing version %d (want 1, 2 or 3)", cfg.Version)
	}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(dialCtx, cfg.URL, cfg.Header())
	if err != nil {
		return nil, dialError(cfg.URL, resp, err)
	}
	_ = resp.Body.Close()
	defer ws.Close()

	d := &device{cfg: cfg, ws: ws, turns: map[int]*Turn{}}
	if d.enc, err = NewXiaozhiEncoder(); err != nil {
		return nil, err
	}
	if err := d.hello(); err != nil {
		return nil, err
	}
	msgs := make(chan xzIncoming, 64)
	go d.read(msgs)
	err = d.loop(ctx, speech, msgs)
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = ws.SetReadDeadline(time.Now().Add(2 * time.Second))
	for range msgs {
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return d.result(), err
}

// XiaozhiOTA does the device's boot-time POST to cfg.OTAURL and takes the
// WebSocket from the answer: cfg.URL, cfg.Token and, when 0, cfg.Version
// (an mqtt-only answer is an error: the device would leave).
func XiaozhiOTA(ctx context.Context, cfg *XiaozhiConfig) error {
	body, _ := json.Marshal(map[string]any{
		"version": 2, "language": "en-US", "mac_address": cfg.DeviceID, "uuid": cfg.ClientID,
		"minimum_free_heap_size": "8000000", // a string, as the firmware sends it
		"application":            map[string]any{"name": "xiaozhi", "version": "2.4.2"},
		"board":                  map[string]any{"type": "voxclient", "name": "voxclient"},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.OTAURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("voiceclient: ota %s: %w", cfg.OTAURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Device-Id", cfg.DeviceID)
	req.Header.Set("Client-Id", cfg.ClientID)
	req.Header.Set("User-Agent", "voxclient/2.4.2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("voiceclient: ota %s: %w", cfg.OTAURL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: ota %s: HTTP %d: %s", ErrRefused, cfg.OTAURL, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	var ans struct {
		WebSocket *struct {
			URL     string `json:"url"`
			Token   string `json:"token"`
			Version int    `json:"version"`
		} `json:"websocket"`
		MQTT json.RawMessage `json:"mqtt"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return fmt.Errorf("voiceclient: ota answer is not JSON: %w", err)
	}
	if ans.MQTT != nil || ans.WebSocket == nil || ans.WebSocket.URL == "" {
		return fmt.Errorf("voiceclient: ota answer has no websocket (or has mqtt, which a device would prefer): %s", data)
	}
	cfg.URL, cfg.Token = ans.WebSocket.URL, ans.WebSocket.Token
	if cfg.Version == 0 {
		cfg.Version = ans.WebSocket.Version
	}
	return nil
}

// Header is the WebSocket handshake's headers, as the firmware sends them.
func (cfg XiaozhiConfig) Header() http.Header {
	h := http.Header{}
	if cfg.Token != "" {
		h.Set("Authorization", "Bearer "+cfg.Token)
	}
	h.Set("Protocol-Version", fmt.Sprint(cfg.Version))
	h.Set("Device-Id", cfg.DeviceID)
	h.Set("Client-Id", cfg.ClientID)
	return h
}

type xzIncoming struct {
	msg   *xzMessage
	audio []int16
	at    time.Time
	err   error
}

type xzMessage struct {
	Type, State, Text, Emotion string
}

// device is one RunXiaozhi. The loop goroutine owns everything but the
// reader's decoder; only it writes to ws (besides the close).
type device struct {
	cfg   XiaozhiConfig
	ws    *websocket.Conn
	enc   *audio.OpusEncoder
	dec   *audio.OpusDecoder
	rate  int // downlink
	sid   string
	meter *Meter

	turns    map[int]*Turn
	order    []int
	cur      int  // the turn being answered (from its stt)
	speaking bool // between tts start and tts stop
	abortAt  time.Time
	playEnd  time.Time // when the audio received so far will have played
	done     int       // turns ended by tts stop
}

func (d *device) send(v map[string]any) error {
	if d.sid != "" {
		v["session_id"] = d.sid
	}
	return d.ws.WriteJSON(v)
}

// hello sends the firmware's hello and waits for the server's.
func (d *device) hello() error {
	sid, rate, err := XiaozhiHello(d.ws, d.cfg.Version, d.cfg.HelloTimeout)
	if err != nil {
		return err
	}
	d.sid, d.rate = sid, rate
	d.dec, err = audio.NewOpusDecoder(d.rate)
	d.meter = NewMeter(XiaozhiRate, d.rate)
	return err
}

// XiaozhiHello sends the firmware's hello (framing version, 16 kHz 60 ms
// Opus up) on ws and waits up to timeout for the server's, skipping
// anything else as the firmware does: it returns the session id and the
// answer audio's rate. Past timeout the error is ErrNoHello.
func XiaozhiHello(ws *websocket.Conn, version int, timeout time.Duration) (sid string, rate int, err error) {
	if err := ws.WriteJSON(map[string]any{"type": "hello", "version": version, "transport": "websocket",
		"features":     map[string]any{"mcp": true},
		"audio_params": map[string]any{"format": "opus", "sample_rate": XiaozhiRate, "channels": 1, "frame_duration": 60},
	}); err != nil {
		return "", 0, fmt.Errorf("voiceclient: send hello: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		_ = ws.SetReadDeadline(deadline)
		typ, data, err := ws.ReadMessage()
		if err != nil {
			return "", 0, fmt.Errorf("%w: %w", ErrNoHello, err)
		}
		var h struct {
			Type        string `json:"type"`
			Transport   string `json:"transport"`
			SessionID   string `json:"session_id"`
			AudioParams struct {
				SampleRate int `json:"sample_rate"`
			} `json:"audio_params"`
		}
		if typ != websocket.TextMessage || json.Unmarshal(data, &h) != nil || h.Type != "hello" || h.Transport != "websocket" {
			continue // the firmware ignores anything else until its hello
		}
		_ = ws.SetReadDeadline(time.Time{})
		rate = h.AudioParams.SampleRate
		if rate == 0 {
			rate = 24000
		}
		return h.SessionID, rate, nil
	}
}

// read is the connection's only reader (after the hello).
func (d *device) read(msgs chan<- xzIncoming) {
	defer close(msgs)
	pcm := make([]int16, d.rate*120/1000)
	for {
		typ, data, err := d.ws.ReadMessage()
		now := time.Now()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				msgs <- xzIncoming{err: err, at: now}
			}
			return
		}
		if typ == websocket.BinaryMessage {
			payload, err := XiaozhiPayload(d.cfg.Version, data)
			if err == nil {
				var n int
				if n, err = d.dec.Decode(payload, pcm); err == nil {
					msgs <- xzIncoming{audio: append([]int16(nil), pcm[:n]...), at: now}
					continue
				}
			}
			msgs <- xzIncoming{err: fmt.Errorf("voiceclient: answer audio: %w", err), at: now}
			return
		}
		var m xzMessage
		if err := json.Unmarshal(data, &m); err != nil {
			msgs <- xzIncoming{err: fmt.Errorf("voiceclient: bad message %q: %w", data, err), at: now}
			return
		}
		msgs <- xzIncoming{msg: &m, at: now}
	}
}

// XiaozhiPayload is the Opus packet of a binary message in framing
// version (the v2/v3 header stripped; big-endian sizes).
func XiaozhiPayload(version int, b []byte) ([]byte, error) {
	switch version {
	case 2:
		if len(b) < 16 || int(binary.BigEndian.Uint32(b[12:])) > len(b)-16 {
			return nil, fmt.Errorf("bad v2 frame of %d bytes", len(b))
		}
		return b[16 : 16+binary.BigEndian.Uint32(b[12:])], nil
	case 3:
		if len(b) < 4 || int(binary.BigEndian.Uint16(b[2:])) > len(b)-4 {
			return nil, fmt.Errorf("bad v3 frame of %d bytes", len(b))
		}
		return b[4 : 4+binary.BigEndian.Uint16(b[2:])], nil
	}
	return b, nil
}

// XiaozhiFrame writes packet into frame in framing version (behind a v2 or
// v3 header) and returns the binary message: frame needs 16 bytes more
// than the packet.
func XiaozhiFrame(version int, packet, frame []byte) []byte {
	hl := 0
	switch version {
	case 2:
		hl = 16
		clear(frame[:16])
		binary.BigEndian.PutUint16(frame, 2)
		binary.BigEndian.PutUint32(frame[12:], uint32(len(packet)))
	case 3:
		hl = 4
		frame[0], frame[1] = 0, 0
		binary.BigEndian.PutUint16(frame[2:], uint16(len(packet)))
	}
	return frame[:hl+copy(frame[hl:], packet)]
}

// sendPCM encodes one 60 ms frame with enc and sends it in the session's
// framing.
func (d *device) sendPCM(enc *audio.OpusEncoder, pcm []int16, packet, frame []byte) error {
	n, err := enc.Encode(pcm, packet)
	if err != nil {
		return err
	}
	return d.ws.WriteMessage(websocket.BinaryMessage, XiaozhiFrame(d.cfg.Version, packet[:n], frame))
}

func (d *device) loop(ctx context.Context, speech []int16, msgs <-chan xzIncoming) error {
	packet := make([]byte, audio.MaxOpusPacket)
	frame := make([]byte, 16+audio.MaxOpusPacket)
	buf := make([]int16, xzFrame)
	if d.cfg.WakeWord != "" {
		// The 2 s before detection, sent at once, then detect. The
		// firmware encodes the burst with an encoder of its own, opened
		// for it and closed after it (AfeAudioEngine::EncodeWakeWordData),
		// so the speech that follows continues the main encoder's stream:
		// a server that does not decode the burst stays in step with it.
		burst, err := NewXiaozhiEncoder()
		if err != nil {
			return err
		}
		for i := range xzBurstFrame {
			for j := range buf {
				buf[j] = int16((i*31 + j*17) % 64)
			}
			if err := d.sendPCM(burst, buf, packet, frame); err != nil {
				return err
			}
		}
		if err := d.send(map[string]any{"type": "listen", "state": "detect", "text": d.cfg.WakeWord}); err != nil {
			return err
		}
	}
	listen := func() error {
		return d.send(map[string]any{"type": "listen", "state": "start", "mode": d.cfg.Mode})
	}
	if err := listen(); err != nil {
		return err
	}
	tail := int(d.cfg.Tail / xzPacket)
	if d.cfg.Mode == ModeManual {
		tail = 0 // the button is released when the speech ends
	}
	total := (len(speech)+xzFrame-1)/xzFrame + tail
	next := 0
	var sentAll time.Time
	tick := time.NewTicker(xzPacket)
	defer tick.Stop()
	wantListen := false // auto: listen start again once the answer has played
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-msgs:
			if !ok {
				if d.finished(sentAll) {
					return nil
				}
				return errors.New("voiceclient: the server closed the connection")
			}
			if m.err != nil {
				return m.err
			}
			if err := d.handle(m); err != nil {
				return err
			}
			if m.msg != nil && m.msg.Type == "tts" && m.msg.State == "stop" && d.cfg.Mode == ModeAuto {
				wantListen = true
			}
			if d.finished(sentAll) {
				return nil
			}
		case now := <-tick.C:
			// The last turn may have ended before the audio was all sent
			// (auto mode resumes the tail after each answer): no message
			// may follow, so the end is checked on the clock too.
			if d.finished(sentAll) {
				return nil
			}
			if !d.abortAt.IsZero() && !now.Before(d.abortAt) {
				d.abortAt = time.Time{}
				if err := d.send(map[string]any{"type": "abort"}); err != nil {
					return err
				}
			}
			if wantListen && !now.Before(d.playEnd) {
				wantListen = false
				if next < total {
					if err := listen(); err != nil {
						return err
					}
				}
			}
			micOn := d.cfg.Mode == ModeRealtime || (!d.speaking && !wantListen)
			if !micOn || next >= total {
				if next >= total && sentAll.IsZero() {
					sentAll = now
					if d.cfg.Mode == ModeManual {
						if err := d.send(map[string]any{"type": "listen", "state": "stop"}); err != nil {
							return err
						}
					}
				}
				if !sentAll.IsZero() && now.Sub(sentAll) > d.cfg.Timeout {
					return fmt.Errorf("voiceclient: no end of turn %v after the audio was sent", d.cfg.Timeout)
				}
				continue
			}
			clear(buf)
			if off := next * xzFrame; off < len(speech) {
				copy(buf, speech[off:])
			}
			next++
			if err := d.sendPCM(d.enc, buf, packet, frame); err != nil {
				return fmt.Errorf("voiceclient: send audio: %w", err)
			}
			d.meter.Sent(buf, time.Now())
		}
	}
}

// finished: the turns asked for are done, or all audio is sent and every
// turn that began has ended.
func (d *device) finished(sentAll time.Time) bool {
	if d.cfg.Turns > 0 && d.done >= d.cfg.Turns {
		return true
	}
	return !sentAll.IsZero() && !d.speaking && d.done == len(d.order) && d.done > 0 && time.Since(sentAll) > d.cfg.Tail
}

func (d *device) turn(id int) *Turn {
	t, ok := d.turns[id]
	if !ok {
		t = &Turn{Turn: id}
		d.turns[id] = t
		d.order = append(d.order, id)
	}
	return t
}

func (d *device) handle(m xzIncoming) error {
	if m.audio != nil {
		if !d.speaking {
			return nil // the firmware drops audio outside speaking
		}
		t := d.turn(d.cur)
		if d.meter.Received(m.audio, m.at) && d.cfg.AbortAfter > 0 {
			d.abortAt = m.at.Add(d.cfg.AbortAfter)
		}
		if d.playEnd.Before(m.at) {
			d.playEnd = m.at
		}
		d.playEnd = d.playEnd.Add(time.Duration(len(m.audio)) * time.Second / time.Duration(d.rate))
		if d.cfg.KeepAudio {
			t.Audio = append(t.Audio, m.audio...)
		}
		return nil
	}
	msg := m.msg
	switch {
	case msg.Type == "stt":
		d.cur = len(d.order) + 1
		t := d.turn(d.cur)
		t.Transcript = msg.Text
		d.meter.EndOfSpeech(d.cur, m.at)
		d.meter.Transcribed(d.cur, m.at)
		if d.speaking {
			// tts start came first (the server announces the answer when
			// the utterance ends): the audio from here on is this turn's.
			d.meter.Answering(d.cur)
		}
		fmt.Fprintf(d.cfg.Log, "you: %s\n", msg.Text)
	case msg.Type == "tts" && msg.State == "start":
		d.speaking = true
		d.meter.Answering(d.cur)
	case msg.Type == "tts" && msg.State == "sentence_start":
		t := d.turn(d.cur)
		t.Answer = strings.TrimSpace(t.Answer + " " + msg.Text)
		fmt.Fprintf(d.cfg.Log, "voxpipe: %s\n", msg.Text)
	case msg.Type == "tts" && msg.State == "stop":
		if !d.speaking {
			return nil // an answer to an abort while not speaking
		}
		d.speaking = false
		if d.cur == 0 {
			return nil
		}
		t := d.turn(d.cur)
		if !d.abortAt.IsZero() || d.cfg.AbortAfter > 0 {
			t.Interrupted = d.cfg.AbortAfter > 0
			d.abortAt = time.Time{}
		}
		if v, ok := d.meter.VoiceToVoiceMs(d.cur); ok {
			t.VoiceToVoiceMs = &v
		}
		if h, ok := d.meter.HeardMs(d.cur); ok {
			t.HeardMs = &h
		}
		if h, ok := d.meter.HeardAfterFinalMs(d.cur); ok {
			t.HeardAfterFinalMs = &h
		}
		t.AnswerAudioMs = d.meter.AnswerMs(d.cur)
		d.done++
	case msg.Type == "error":
		fmt.Fprintf(d.cfg.Log, "server error: %s\n", msg.Text)
	}
	return nil
}

func (d *device) result() *Result {
	res := &Result{AudioRate: d.rate}
	for _, id := range d.order {
		if t := d.turns[id]; t.AnswerAudioMs > 0 || t.HeardMs != nil {
			res.Turns = append(res.Turns, *t)
		}
	}
	return res
}
