package web

import (
	"testing"

	"github.com/pion/rtp"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/internal/voice"
)

// FuzzRTPPacket feeds arbitrary bytes, as the WebRTC microphone track
// reader gets them, through the RTP parser and the session's Opus decoder
// (rtpAudio), reusing one rtp.Packet as the reader does: it never panics,
// a bad payload is bad_audio, and one packet queues at most 120 ms of
// audio. Seeds: testdata/fuzz/FuzzRTPPacket (valid packets with 20 ms
// Opus frames, padding, CSRCs and a header extension; packets whose
// declared CSRC count, extension length or padding run past the end).
func FuzzRTPPacket(f *testing.F) {
	hdr := []byte{
		0x80, 111, 0x00, 0x01, // V=2, PT=111 (opus), seq 1
		0x00, 0x00, 0x03, 0xc0, // timestamp 960
		0x12, 0x34, 0x56, 0x78, // SSRC
	}
	f.Add(append(append([]byte(nil), hdr...), 0xf8, 0xff, 0xfe)) // 20 ms of silence
	f.Add(hdr)
	f.Add(append([]byte{0x8f}, hdr[1:]...))                                 // 15 CSRCs declared, none present
	f.Add(append([]byte{0x90}, append(hdr[1:], 0xbe, 0xde, 0xff, 0xff)...)) // extension longer than the packet
	f.Add(append([]byte{0xa0}, append(hdr[1:], 0xf8, 0xff, 0xfe, 0xff)...)) // padding of 255 bytes in 4
	f.Fuzz(func(t *testing.T, data []byte) {
		in := make(chan pipeline.Input, 1)
		up, err := voice.NewUplink(in, EncodingOpus, rtcRate)
		if err != nil {
			t.Fatal(err)
		}
		var pkt rtp.Packet
		for range 2 {
			queued, p := rtpAudio(&pkt, data, up)
			switch {
			case p != nil:
				if p.Code != pipeline.CodeBadAudio || queued {
					t.Fatalf("problem %+v, queued %v", p, queued)
				}
			case queued:
				select {
				case m := <-in:
					if len(m.Audio) > voice.MaxOpusFrameSamples {
						t.Fatalf("%d samples from one packet", len(m.Audio))
					}
				default: // skipped: nothing to decode
				}
			default:
				t.Fatal("an empty queue refused a packet")
			}
		}
	})
}
