package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// xzDevice plays a xiaozhi smart speaker (docs/xiaozhi.md) as its firmware
// does: the OTA check, the WebSocket with the firmware's headers, the
// hello, 16 kHz Opus up in 60 ms packets, the hello's rate down. In auto
// mode (the default) the microphone is off from tts start until tts stop
// and listen start opens it again; with --barge-in the device listens in
// realtime mode, its microphone open through answers. The protocol numbers
// no turns and carries no trace: the device numbers its turns by their
// stt, and takes each turn's trace from the server's GET /traces for its
// session when tts stop ends the turn.
type xzDevice struct {
	otaURL, tracesURL string
	mode              string
}

// xzPacketSamples is a 60 ms uplink packet at the device's 16 kHz.
const xzPacketSamples = voiceclient.XiaozhiRate * 60 / 1000

func newXiaozhiDevice(raw string, realtime bool) (device, error) {
	u, err := httpURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: --url: %w", errCommandLine, err)
	}
	traces := *u
	traces.Path = "/traces"
	if !strings.HasSuffix(u.Path, "/ota/") {
		u.Path = "/xiaozhi/ota/" // the server's default; a /ws URL names the host
	}
	d := &xzDevice{otaURL: u.String(), tracesURL: traces.String(), mode: voiceclient.ModeAuto}
	if realtime {
		d.mode = voiceclient.ModeRealtime
	}
	return d, nil
}

func (d *xzDevice) session(ctx context.Context, p sessionPlan, report func(turnResult)) error {
	cfg := voiceclient.XiaozhiConfig{OTAURL: d.otaURL, DeviceID: p.device, ClientID: randomUUID()}
	if cfg.DeviceID == "" {
		cfg.DeviceID = randomMAC() // the handshake requires one; a new device each session
	}
	if err := voiceclient.XiaozhiOTA(ctx, &cfg); err != nil {
		return err
	}
	if cfg.Version == 0 {
		cfg.Version = 1
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, resp, err := wsDialer.DialContext(dctx, cfg.URL, cfg.Header())
	if err != nil {
		err = dialRefusal(resp, err)
		if re := (*refusedError)(nil); errors.As(err, &re) && re.status == http.StatusServiceUnavailable {
			re.code = pipeline.CodeBusy // the device endpoint answers a full server in plain text
		}
		return err
	}
	_ = resp.Body.Close()
	defer ws.Close()
	sid, rate, err := voiceclient.XiaozhiHello(ws, cfg.Version, 10*time.Second)
	if err != nil {
		return err
	}
	dec, err := audio.NewOpusDecoder(rate)
	if err != nil {
		return err
	}
	enc, err := voiceclient.NewXiaozhiEncoder()
	if err != nil {
		return err
	}
	l := &xzLink{ws: ws, enc: enc, version: cfg.Version, mode: d.mode, sid: sid,
		pcm: make([]int16, 0, xzPacketSamples), packet: make([]byte, audio.MaxOpusPacket),
		frame: make([]byte, 16+audio.MaxOpusPacket)}
	l.relisten.Store(true) // the device listens from the start
	q := url.Values{"session": {sid}, "limit": {"1"}}
	r := &xzReader{ctx: ctx, ws: ws, dec: dec, rate: rate, version: cfg.Version, link: l,
		tracesURL: d.tracesURL + "?" + q.Encode(), client: &http.Client{Timeout: 2 * time.Second}}
	in := newInbox()
	readErr := make(chan error, 1)
	go func() { readErr <- r.run(in) }()
	err = converse(ctx, l, voiceclient.XiaozhiRate, rate, p, in, report)
	return hangUp(ctx, ws, map[string]string{"type": "goodbye", "session_id": sid}, in, readErr, err)
}

// xzLink is the device's microphone: converse's 20 ms frames gathered
// into the firmware's 60 ms Opus packets.
type xzLink struct {
	ws            *websocket.Conn
	enc           *audio.OpusEncoder
	version       int
	mode          string
	sid           string
	pcm           []int16 // the packet being gathered
	packet, frame []byte
	// speaking: from tts start to tts stop (set by the reader; in auto
	// mode the microphone is off). relisten: listen start goes out before
	// the next audio (set at the start and, in auto mode, by tts stop).
	speaking, relisten atomic.Bool
}

func (l *xzLink) sendAudio(pcm []int16) error {
	if l.mode == voiceclient.ModeAuto && l.speaking.Load() {
		l.pcm = l.pcm[:0]
		return nil
	}
	if l.relisten.Swap(false) {
		if err := l.ws.WriteJSON(map[string]string{"type": "listen", "state": "start", "mode": l.mode, "session_id": l.sid}); err != nil {
			return err
		}
	}
	l.pcm = append(l.pcm, pcm...)
	if len(l.pcm) < xzPacketSamples {
		return nil
	}
	n, err := l.enc.Encode(l.pcm, l.packet)
	l.pcm = l.pcm[:0]
	if err != nil {
		return err
	}
	return l.ws.WriteMessage(websocket.BinaryMessage, voiceclient.XiaozhiFrame(l.version, l.packet[:n], l.frame))
}

// sendJSON drops converse's /ws control messages (playback_start,
// interrupt, stop): the firmware has none of them; the server marks
// playback when it writes the first packet and hears barge-ins itself.
func (l *xzLink) sendJSON(any) error { return nil }

// xzReader is the connection's only reader: it turns the device protocol
// into the events converse reads.
type xzReader struct {
	ctx       context.Context // the session's: ends a trace read in flight
	ws        *websocket.Conn
	dec       *audio.OpusDecoder
	rate      int
	version   int
	link      *xzLink
	tracesURL string
	client    *http.Client

	turn       int  // the device's count of stt messages
	open       bool // turn has an stt and no tts stop yet
	serverTurn int  // the server's turn of the last trace taken
}

func (r *xzReader) run(in *inbox) error {
	defer in.close()
	pcm := make([]int16, r.rate*120/1000)
	for {
		typ, data, err := r.ws.ReadMessage()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
				return nil
			}
			return err
		}
		now := time.Now()
		if typ == websocket.BinaryMessage {
			payload, err := voiceclient.XiaozhiPayload(r.version, data)
			if err != nil {
				return fmt.Errorf("answer audio: %w", err)
			}
			n, err := r.dec.Decode(payload, pcm)
			if err != nil {
				return fmt.Errorf("answer audio: %w", err)
			}
			in.put(wsMsg{audio: append([]int16(nil), pcm[:n]...), at: now}, nil)
			continue
		}
		var m struct{ Type, State, Text, Code, Message string }
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("bad message %q: %w", data, err)
		}
		switch {
		case m.Type == "stt":
			r.turn++
			r.open = true
			in.put(wsMsg{ev: &pipeline.Event{Type: pipeline.EventTranscript, Turn: r.turn, Final: true, Text: m.Text}, at: now}, nil)
			// The first packet may come before its subtitle: the audio
			// from here on is this turn's.
			in.put(wsMsg{ev: &pipeline.Event{Type: pipeline.EventAnswer, Turn: r.turn}, at: now}, nil)
		case m.Type == "tts" && m.State == "start":
			r.link.speaking.Store(true)
		case m.Type == "tts" && m.State == "sentence_start":
			in.put(wsMsg{ev: &pipeline.Event{Type: pipeline.EventAnswer, Turn: r.turn, Text: m.Text + " "}, at: now}, nil)
		case m.Type == "tts" && m.State == "stop":
			r.link.speaking.Store(false)
			// The firmware sends listen start again only where speaking
			// stopped its audio processor: in auto mode, not realtime.
			r.link.relisten.Store(r.link.mode == voiceclient.ModeAuto)
			if r.open {
				r.open = false
				ev := r.trace()
				ev.Turn = r.turn
				in.put(wsMsg{ev: ev, at: now}, nil)
			}
		case m.Type == "error":
			in.put(wsMsg{ev: &pipeline.Event{Type: pipeline.EventError, Turn: r.turn, Code: m.Code, Message: m.Message}, at: now}, nil)
		}
	}
}

// trace is the server's trace of the turn tts stop just ended: the newest
// of the session's turns in GET /traces, if it is one not taken before (a
// turn cut by a barge-in may be traced a little after its tts stop, so it
// looks three times). Without it the turn has its heard figure only.
func (r *xzReader) trace() *pipeline.Event {
	for try := range 3 {
		if try > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		var got struct {
			Turns []pipeline.Event `json:"turns"`
		}
		req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.tracesURL, nil)
		if err != nil {
			break
		}
		resp, err := r.client.Do(req)
		if err != nil {
			break
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			break
		}
		if n := len(got.Turns); n > 0 && got.Turns[n-1].Turn > r.serverTurn {
			ev := got.Turns[n-1]
			r.serverTurn = ev.Turn
			return &ev
		}
	}
	return &pipeline.Event{Type: pipeline.EventTrace}
}

// randomMAC is a locally administered unicast MAC, the form of a device id.
func randomMAC() string {
	b := rand.Uint64()
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(b>>32), byte(b>>24), byte(b>>16), byte(b>>8), byte(b))
}

// randomUUID is a version 4 UUID, the form of the firmware's client id.
func randomUUID() string {
	a, b := rand.Uint64(), rand.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, 0x8000|(b>>48)&0x3fff, b&0xffffffffffff)
}
