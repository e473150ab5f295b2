package xiaozhi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// fakeDevice behaves like the xiaozhi firmware (reference §3-§9, read in
// 78/xiaozhi-esp32 websocket_protocol.cc and application.cc): the handshake
// headers, a hello it waits 10 s to see answered (then it gives up and
// closes), 16 kHz 60 ms Opus packets up in the announced framing, and the
// device states: audio is accepted only while speaking (after tts start,
// until tts stop); the rest is dropped, as the firmware drops it.
type fakeDevice struct {
	t       testing.TB
	ws      *websocket.Conn
	version int
	enc     *audio.OpusEncoder
	packet  []byte
	frame   []byte

	hello serverHello

	mu       sync.Mutex
	msgs     []devMsg // every server message, in order
	speaking bool
	dropped  int // audio packets that arrived while not speaking
	closed   bool
	news     chan struct{} // signalled (non-blocking) on every message
	readDone chan struct{}
}

// devMsg is one server message as the device saw it.
type devMsg struct {
	at      time.Time
	typ     string // message type, or "audio"
	state   string
	text    string
	emotion string
	samples int // audio: decoded samples
	audible bool
	raw     []byte
}

type deviceOpts struct {
	version      int           // binary framing; 0 = 1
	token        string        // sent as Authorization: Bearer
	deviceID     string        // "" = a default MAC
	helloTimeout time.Duration // 0 = the firmware's 10 s
	noHello      bool          // connect but send no hello
}

// dialDevice connects like the firmware and completes the hello exchange.
func dialDevice(t testing.TB, url string, o deviceOpts) *fakeDevice {
	t.Helper()
	d, err := tryDialDevice(t, url, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tryDialDevice(t testing.TB, url string, o deviceOpts) (*fakeDevice, error) {
	if o.version == 0 {
		o.version = 1
	}
	if o.deviceID == "" {
		o.deviceID = "24:0a:c4:12:34:56"
	}
	if o.helloTimeout == 0 {
		o.helloTimeout = 10 * time.Second
	}
	h := http.Header{}
	if o.token != "" {
		h.Set("Authorization", "Bearer "+o.token)
	}
	h.Set("Protocol-Version", fmt.Sprint(o.version))
	h.Set("Device-Id", o.deviceID)
	h.Set("Client-Id", "5f1d2c1e-0000-4000-8000-1234567890ab")
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if resp != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	enc, err := audio.NewOpusEncoder(16000, 32000)
	if err != nil {
		_ = ws.Close()
		t.Skipf("no opus: %v", err)
	}
	d := &fakeDevice{t: t, ws: ws, version: o.version, enc: enc, packet: make([]byte, audio.MaxOpusPacket),
		frame: make([]byte, v2HeaderLen+audio.MaxOpusPacket), news: make(chan struct{}, 1), readDone: make(chan struct{})}
	t.Cleanup(d.close)
	if o.noHello {
		go d.read(nil)
		return d, nil
	}
	d.sendJSON(map[string]any{
		"type": "hello", "version": o.version, "transport": "websocket",
		"features":     map[string]any{"mcp": true, "glyph_push": false},
		"audio_params": map[string]any{"format": "opus", "sample_rate": 16000, "channels": 1, "frame_duration": 60},
	})
	hello := make(chan serverHello, 1)
	go d.read(hello)
	select {
	case d.hello = <-hello:
		return d, nil
	case <-time.After(o.helloTimeout):
		// The firmware reports "server timeout", goes idle and abandons
		// the connection.
		d.close()
		return nil, errNoHelloReply
	}
}

var errNoHelloReply = errors.New("fake device: no server hello within the timeout, connection closed")

func (d *fakeDevice) close() {
	d.mu.Lock()
	already := d.closed
	d.closed = true
	d.mu.Unlock()
	if !already {
		_ = d.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = d.ws.Close()
	}
}

func (d *fakeDevice) sendJSON(v any) {
	d.t.Helper()
	m, _ := json.Marshal(v)
	var obj map[string]any
	_ = json.Unmarshal(m, &obj)
	if d.hello.SessionID != "" {
		obj["session_id"] = d.hello.SessionID // the firmware echoes it in every message
	}
	if err := d.ws.WriteJSON(obj); err != nil {
		d.t.Errorf("device send %v: %v", v, err)
	}
}

func (d *fakeDevice) sendRaw(typ int, data []byte) {
	if err := d.ws.WriteMessage(typ, data); err != nil {
		d.t.Errorf("device send: %v", err)
	}
}

// sendOpus encodes one 60 ms frame (960 samples) and sends it framed.
func (d *fakeDevice) sendOpus(pcm []int16) error {
	n, err := d.enc.Encode(pcm, d.packet)
	if err != nil {
		return err
	}
	hl := headerLen(d.version)
	putHeader(d.version, d.frame, n, 0)
	copy(d.frame[hl:], d.packet[:n])
	return d.ws.WriteMessage(websocket.BinaryMessage, d.frame[:hl+n])
}

// stream sends pcm as 60 ms packets, one per 60 ms when paced (the
// firmware's microphone), as fast as possible when not.
func (d *fakeDevice) stream(pcm []int16, paced bool) {
	d.t.Helper()
	const frame = 960
	tick := time.NewTicker(packetDur)
	defer tick.Stop()
	buf := make([]int16, frame)
	for off := 0; off < len(pcm); off += frame {
		clear(buf)
		copy(buf, pcm[off:])
		if err := d.sendOpus(buf); err != nil {
			d.t.Errorf("device stream: %v", err)
			return
		}
		if paced {
			<-tick.C
		}
	}
}

// burst sends pcm as fast as the link allows, encoded as the firmware
// encodes its wake-word audio: on an encoder opened for the burst and
// closed after it (AfeAudioEngine::EncodeWakeWordData), so the main
// encoder's stream, which the question continues, is untouched.
func (d *fakeDevice) burst(pcm []int16) {
	d.t.Helper()
	enc, err := audio.NewOpusEncoder(16000, 32000)
	if err != nil {
		d.t.Errorf("device burst encoder: %v", err)
		return
	}
	main := d.enc
	d.enc = enc
	d.stream(pcm, false)
	d.enc = main
}

// streamUntil sends silence packets in real time until stop returns true
// (a device listening while the server thinks), at most for max.
func (d *fakeDevice) streamUntil(stop func() bool, max time.Duration) {
	silence := make([]int16, 960)
	tick := time.NewTicker(packetDur)
	defer tick.Stop()
	for end := time.Now().Add(max); time.Now().Before(end) && !stop(); <-tick.C {
		if d.sendOpus(silence) != nil {
			return
		}
	}
}

func (d *fakeDevice) read(hello chan<- serverHello) {
	defer close(d.readDone)
	var dec *audio.OpusDecoder
	pcm := make([]int16, 5760)
	for {
		typ, data, err := d.ws.ReadMessage()
		if err != nil {
			return
		}
		m := devMsg{at: time.Now(), raw: data}
		var gotHello *serverHello // told once the message is recorded
		if typ == websocket.TextMessage {
			var v struct {
				Type, State, Text, Emotion string
			}
			if err := json.Unmarshal(data, &v); err != nil {
				d.t.Errorf("server sent bad JSON %q: %v", data, err)
				continue
			}
			m.typ, m.state, m.text, m.emotion = v.Type, v.State, v.Text, v.Emotion
			if v.Type == typeHello && hello != nil {
				var h serverHello
				_ = json.Unmarshal(data, &h)
				if h.Transport != "websocket" {
					continue // the firmware ignores such a hello
				}
				rate := h.AudioParams.SampleRate
				if rate == 0 {
					rate = 24000
				}
				if dec, err = audio.NewOpusDecoder(rate); err != nil {
					d.t.Errorf("decoder at %d Hz: %v", rate, err)
					return
				}
				gotHello = &h
			}
		} else {
			m.typ = "audio"
			payload, _, err := parseFrame(d.version, data)
			if err != nil {
				d.t.Errorf("server audio framing (v%d): %v", d.version, err)
				continue
			}
			if dec == nil {
				d.t.Errorf("audio before the server hello")
				continue
			}
			n, err := dec.Decode(payload, pcm)
			if err != nil {
				d.t.Errorf("undecodable server audio: %v", err)
				continue
			}
			m.samples, m.audible = n, audio.IsAudible(pcm[:n], dec.SampleRate())
		}
		d.mu.Lock()
		switch {
		case m.typ == typeTTS && m.state == ttsStart:
			d.speaking = true
		case m.typ == typeTTS && m.state == ttsStop:
			d.speaking = false
		case m.typ == "audio" && !d.speaking:
			d.dropped++
		}
		d.msgs = append(d.msgs, m)
		d.mu.Unlock()
		if gotHello != nil {
			// After recording it: a test that counts the messages once
			// dialDevice returns must count the hello among them.
			hello <- *gotHello
			hello = nil
		}
		select {
		case d.news <- struct{}{}:
		default:
		}
	}
}

// waitFor waits until match accepts a message received after index from,
// and returns its index.
func (d *fakeDevice) waitFor(what string, from int, timeout time.Duration, match func(devMsg) bool) int {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.mu.Lock()
		for i := from; i < len(d.msgs); i++ {
			if match(d.msgs[i]) {
				d.mu.Unlock()
				return i
			}
		}
		n := len(d.msgs)
		d.mu.Unlock()
		select {
		case <-d.news:
		case <-d.readDone:
			d.t.Fatalf("connection ended waiting for %s (%d messages: %s)", what, n, d.summary())
		case <-time.After(time.Until(deadline)):
			d.t.Fatalf("no %s within %v (%d messages: %s)", what, timeout, n, d.summary())
		}
	}
}

func (d *fakeDevice) has(from int, match func(devMsg) bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := from; i < len(d.msgs); i++ {
		if match(d.msgs[i]) {
			return true
		}
	}
	return false
}

func (d *fakeDevice) snapshot() []devMsg {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]devMsg(nil), d.msgs...)
}

// summary lists the messages compactly: audio runs as counts.
func (d *fakeDevice) summary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return summarize(d.msgs)
}

func summarize(msgs []devMsg) string {
	s, run := "", 0
	for _, m := range msgs {
		if m.typ == "audio" {
			run++
			continue
		}
		if run > 0 {
			s += fmt.Sprintf(" audio×%d", run)
			run = 0
		}
		s += " " + m.typ
		if m.state != "" {
			s += ":" + m.state
		}
	}
	if run > 0 {
		s += fmt.Sprintf(" audio×%d", run)
	}
	return s
}

func isMsg(typ, state string) func(devMsg) bool {
	return func(m devMsg) bool { return m.typ == typ && (state == "" || m.state == state) }
}

// v2Frame and v3Frame build uplink frames by hand, byte by byte as the
// firmware's BinaryProtocol2/3 structs lay them out (big-endian).
func v2Frame(payload []byte, ts uint32) []byte {
	b := make([]byte, 16+len(payload))
	binary.BigEndian.PutUint16(b[0:], 2)
	binary.BigEndian.PutUint16(b[2:], 0)
	binary.BigEndian.PutUint32(b[8:], ts)
	binary.BigEndian.PutUint32(b[12:], uint32(len(payload)))
	copy(b[16:], payload)
	return b
}

func v3Frame(payload []byte) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint16(b[2:], uint16(len(payload)))
	copy(b[4:], payload)
	return b
}
