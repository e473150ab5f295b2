package xiaozhi

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// benchPair is a server-side device conn on a real loopback WebSocket,
// with the client's raw TCP connection for writing and reading bytes
// without a WebSocket library (so the client costs no allocations).
type benchPair struct {
	c   *conn
	raw net.Conn
}

func newBenchPair(b *testing.B, version int) *benchPair {
	b.Helper()
	h, err := New(DefaultConfig(), Host{Rejected: func(string) {}, Dropped: func(string) {}, Base: context.Background(),
		OpusBitrate: 24000, MaxFrameBytes: 4096, IdleTimeout: time.Minute, WriteTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	server := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := h.upgrader.Upgrade(w, r, nil)
		if err != nil {
			b.Error(err)
			return
		}
		server <- ws
	}))
	b.Cleanup(srv.Close)
	cws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
	b.Cleanup(func() { _ = cws.Close() })
	ws := <-server
	b.Cleanup(func() { _ = ws.Close() })
	c := newConn(h, ws, "24:0a:c4:12:34:56", "", version, "bench")
	b.Cleanup(c.cancel)
	return &benchPair{c: c, raw: cws.NetConn()}
}

// maskedFrame builds one client→server binary WebSocket frame by hand.
func maskedFrame(payload []byte) []byte {
	f := []byte{0x82, 0x80 | byte(len(payload))}
	if len(payload) > 125 {
		f = []byte{0x82, 0x80 | 126, byte(len(payload) >> 8), byte(len(payload))}
	}
	key := [4]byte{1, 2, 3, 4}
	f = append(f, key[:]...)
	for i, p := range payload {
		f = append(f, p^key[i%4])
	}
	return f
}

// BenchmarkDeviceUplinkPacket is one 60 ms device packet through the
// reader: WebSocket frame read (frameReader), v2 header, Opus decode into the ring, queued for
// the session (drained by a stand-in).
func BenchmarkDeviceUplinkPacket(b *testing.B) {
	p := newBenchPair(b, 2)
	enc, err := audio.NewOpusEncoder(16000, 32000)
	if err != nil {
		b.Skip(err)
	}
	pcm := make([]int16, 960)
	for i := range pcm {
		pcm[i] = int16(3000 * ((i / 20) % 2))
	}
	pkt := make([]byte, audio.MaxOpusPacket)
	n, _ := enc.Encode(pcm, pkt)
	frame := maskedFrame(v2Frame(pkt[:n], 0))
	c := p.c
	c.uplink, _ = voice.NewUplink(c.in, voice.EncodingOpus, uplinkRate)
	c.started, c.listening = true, true
	go func() {
		for range c.in {
		}
	}()
	go func() { // the device, sending as fast as the reader takes them
		for {
			if _, err := p.raw.Write(frame); err != nil {
				return
			}
		}
	}()
	fr := newFrameReader(c.ws.NetConn())
	one := func() {
		op, n, err := fr.next(c.readBuf, nil)
		if err != nil || op != opBinary {
			b.Fatal(op, err)
		}
		c.handleAudio(c.readBuf[:n])
	}
	for range 2 * (inputQueue + 2) { // steady state: every ring slot has grown once
		one()
	}
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// BenchmarkDeviceDownlinkPacket is one 60 ms answer packet through the
// writer: three 20 ms session frames gathered, Opus-encoded at 24 kHz, a
// v2 header, written to the WebSocket.
func BenchmarkDeviceDownlinkPacket(b *testing.B) {
	p := newBenchPair(b, 2)
	go func() { _, _ = io.Copy(io.Discard, p.raw) }()
	w := &writer{c: p.c, stopTimer: time.NewTimer(time.Hour)}
	if !w.control(ctrlMsg{kind: ctrlStart, msg: helloReply(p.c.id, 2, 24000)}) {
		b.Fatal("writer start failed")
	}
	w.turn, w.ttsOn, w.firstAt = 1, true, time.Now()
	frame := make([]int16, 480)
	for i := range frame {
		frame[i] = int16(binary.BigEndian.Uint16([]byte{byte(i), byte(i * 7)}) / 8)
	}
	for range 3 {
		w.audio(frame)
	}
	b.ReportAllocs()
	for b.Loop() {
		for range 3 {
			if !w.audio(frame) {
				b.Fatal("write failed")
			}
		}
	}
}
