package web

import (
	"math"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"
	"github.com/rs/zerolog"
)

// BenchmarkRTCWriteFrame is the outbound per-frame work: Opus-encode one
// 20 ms answer frame at 48 kHz and packetize it onto the track (no peer
// bound, so nothing reaches a socket).
func BenchmarkRTCWriteFrame(b *testing.B) {
	track, err := webrtc.NewTrackLocalStaticSample(
		webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: rtcRate, Channels: 2}, "answer", "bench")
	if err != nil {
		b.Fatal(err)
	}
	srv := &Server{cfg: Config{OpusBitrate: defaultOpusBitrate}, metrics: NewMetrics()}
	rs := &rtcSession{srv: srv, track: track, log: zerolog.Nop()}
	w, err := newRTCWriter(rs)
	if err != nil {
		b.Skipf("opus unavailable (requires cgo and libopus-dev): %v", err)
	}
	frame := make([]int16, rtcRate/1000*FrameMs)
	for i := range frame {
		frame[i] = int16(8000 * math.Sin(2*math.Pi*220*float64(i)/rtcRate))
	}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		w.stream.Queue(frame)
		now = now.Add(FrameMs * time.Millisecond)
		if err := w.stream.Pump(now); err != nil {
			b.Fatal("write failed:", err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(FrameMs*1e6), "cpu/realtime")
}
