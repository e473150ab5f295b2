package voice

import (
	"testing"

	"github.com/voxpipe/voxpipe/pipeline"
)

// uplinkRates are the rates a start may name for each encoding.
var (
	pcmRates  = []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}
	opusRates = []int{8000, 12000, 16000, 24000, 48000}
)

// FuzzUplink feeds arbitrary binary WebSocket frames to the audio decoder
// of a session, PCM16 or Opus at any allowed rate: it never panics, refuses
// with bad_audio what it cannot decode, and queues at most one message of
// the length the frame can carry. The decoder keeps working after a bad
// frame. Seeds: testdata/fuzz/FuzzUplink (valid Opus packets of each
// frame length, truncated and corrupted ones, odd and empty PCM).
func FuzzUplink(f *testing.F) {
	f.Add(false, uint8(3), []byte{1, 0, 2, 0})
	f.Add(false, uint8(3), []byte{1, 0, 2})
	f.Add(true, uint8(4), []byte{0xf8, 0xff, 0xfe}) // a 20 ms silence packet
	f.Add(true, uint8(4), []byte{})
	f.Add(true, uint8(0), []byte{0xff, 0xff, 0xff, 0xff}) // code 3, 63 frames claimed
	f.Fuzz(func(t *testing.T, opus bool, rateIdx uint8, data []byte) {
		encoding, rates := EncodingPCM16, pcmRates
		if opus {
			encoding, rates = EncodingOpus, opusRates
		}
		rate := rates[int(rateIdx)%len(rates)]
		in := make(chan pipeline.Input, 1)
		up, err := NewUplink(in, encoding, rate)
		if err != nil {
			t.Fatalf("NewUplink(%s, %d): %v", encoding, rate, err)
		}
		for range 2 { // the same frame twice: state after a bad frame
			queued, p := up.Write(data)
			switch {
			case p != nil:
				if p.Code != pipeline.CodeBadAudio || queued {
					t.Fatalf("problem %+v queued %v", p, queued)
				}
				if !opus && len(data) > 0 && len(data)%2 == 0 {
					t.Fatalf("valid PCM16 frame of %d bytes refused: %v", len(data), p)
				}
			case queued:
				m := <-in
				if !opus && len(m.Audio) != len(data)/2 {
					t.Fatalf("pcm16: %d bytes became %d samples", len(data), len(m.Audio))
				}
				if opus && len(m.Audio) > rate*120/1000 {
					t.Fatalf("opus: %d samples from one packet at %d Hz (120 ms is %d)", len(m.Audio), rate, rate*120/1000)
				}
			default:
				t.Fatal("an empty queue refused a frame")
			}
		}
	})
}
