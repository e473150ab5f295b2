//go:build cgo

package audio

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// bestCorrelation returns the highest normalised correlation of got against
// want over lags 0..maxLag (Opus delays its output by the encoder's
// look-ahead), and the lag.
func bestCorrelation(want, got []int16, maxLag int) (float64, int) {
	best, bestLag := -1.0, 0
	for lag := 0; lag <= maxLag; lag++ {
		var xy, xx, yy float64
		for i := 0; i+lag < len(got) && i < len(want); i++ {
			x, y := float64(want[i]), float64(got[i+lag])
			xy += x * y
			xx += x * x
			yy += y * y
		}
		if c := xy / math.Sqrt(xx*yy+1e-9); c > best {
			best, bestLag = c, lag
		}
	}
	return best, bestLag
}

// opusRoundTrip encodes pcm in 20 ms frames and decodes it again, losing
// the packets whose frame index is in lost.
func opusRoundTrip(t *testing.T, pcm []int16, rate, bitrate int, lost map[int]bool) []int16 {
	t.Helper()
	enc, err := NewOpusEncoder(rate, bitrate)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewOpusDecoder(rate)
	if err != nil {
		t.Fatal(err)
	}
	frame := rate / 50
	packet := make([]byte, MaxOpusPacket)
	out := make([]int16, 0, len(pcm))
	buf := make([]int16, rate*3/25)
	for f := 0; (f+1)*frame <= len(pcm); f++ {
		n, err := enc.Encode(pcm[f*frame:(f+1)*frame], packet)
		if err != nil {
			t.Fatalf("frame %d: %v", f, err)
		}
		var in []byte
		if !lost[f] {
			in = packet[:n]
		}
		m, err := dec.Decode(in, buf)
		if err != nil {
			t.Fatalf("frame %d: %v", f, err)
		}
		if m != frame {
			t.Fatalf("frame %d decoded to %d samples, want %d", f, m, frame)
		}
		out = append(out, buf[:m]...)
	}
	return out
}

func TestOpusRoundTripTone(t *testing.T) {
	for _, rate := range []int{8000, 16000, 48000} {
		src := sine(rate, 440, 12000, rate)
		got := opusRoundTrip(t, src, rate, 24000, nil)
		corr, lag := bestCorrelation(src, got, rate/100)
		gain := 20 * math.Log10(rms(got[rate/10:])/rms(src[rate/10:]))
		t.Logf("%d Hz, 440 Hz tone at 24 kbit/s: correlation %.3f at lag %d, level change %.2f dB", rate, corr, lag, gain)
		if corr < 0.95 || math.Abs(gain) > 1.5 {
			t.Errorf("%d Hz: correlation %.3f (want >= 0.95), level change %.2f dB (want within 1.5)", rate, corr, gain)
		}
	}
}

func TestOpusRoundTripSpeech(t *testing.T) {
	src := goforwardPCM(t)
	got := opusRoundTrip(t, src, 16000, 24000, nil)
	corr, lag := bestCorrelation(src, got, 400)
	gain := 20 * math.Log10(rms(got)/rms(src[:len(got)]))
	t.Logf("goforward.raw through 16 kHz Opus at 24 kbit/s: correlation %.3f at lag %d, level change %.2f dB", corr, lag, gain)
	if corr < 0.8 || math.Abs(gain) > 2 {
		t.Errorf("correlation %.3f (want >= 0.8), level change %.2f dB (want within 2)", corr, gain)
	}
}

// TestOpusPacketLoss: a nil packet is concealed with a frame of the right
// length that continues the signal instead of dropping to silence.
func TestOpusPacketLoss(t *testing.T) {
	src := sine(16000, 300, 12000, 16000)
	lost := map[int]bool{20: true, 21: true, 35: true}
	got := opusRoundTrip(t, src, 16000, 24000, lost)
	if len(got) != len(src) {
		t.Fatalf("%d samples out, want %d: concealment must keep the timing", len(got), len(src))
	}
	concealed := rms(got[20*320 : 21*320])
	t.Logf("first concealed frame RMS %.0f (signal %.0f)", concealed, rms(src))
	if concealed < rms(src)/10 {
		t.Errorf("concealed frame RMS %.0f: silence instead of PLC", concealed)
	}
}

// TestOpusComplexity: complexity 0 (a device's encoder) codes speech
// differently from the default 10, and an out-of-range one is refused.
func TestOpusComplexity(t *testing.T) {
	src := goforwardPCM(t)
	encode := func(c int) []byte {
		enc, err := NewOpusEncoder(16000, 32000)
		if err != nil {
			t.Fatal(err)
		}
		if c >= 0 {
			if err := enc.SetComplexity(c); err != nil {
				t.Fatal(err)
			}
		}
		var all []byte
		packet := make([]byte, MaxOpusPacket)
		for i := 0; i+960 <= len(src); i += 960 {
			n, err := enc.Encode(src[i:i+960], packet)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, packet[:n]...)
		}
		return all
	}
	if def, c10, c0 := encode(-1), encode(10), encode(0); !bytes.Equal(def, c10) || bytes.Equal(c0, c10) {
		t.Errorf("default and complexity 10 equal: %v; complexity 0 and 10 equal: %v (want true, false)", bytes.Equal(def, c10), bytes.Equal(c0, c10))
	}
	enc, err := NewOpusEncoder(16000, 32000)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.SetComplexity(11); !errors.Is(err, ErrOpus) {
		t.Errorf("complexity 11: %v, want ErrOpus", err)
	}
}

func TestOpusErrors(t *testing.T) {
	if _, err := NewOpusEncoder(44100, 24000); !errors.Is(err, ErrSampleRate) {
		t.Errorf("encoder at 44100 Hz: %v, want ErrSampleRate", err)
	}
	if _, err := NewOpusDecoder(22050); !errors.Is(err, ErrSampleRate) {
		t.Errorf("decoder at 22050 Hz: %v, want ErrSampleRate", err)
	}
	if _, err := NewOpusEncoder(16000, 0); !errors.Is(err, ErrOpus) {
		t.Errorf("bitrate 0: %v, want ErrOpus", err)
	}
	enc, err := NewOpusEncoder(48000, 32000)
	if err != nil {
		t.Fatal(err)
	}
	packet := make([]byte, MaxOpusPacket)
	if _, err := enc.Encode(make([]int16, 320), packet); !errors.Is(err, ErrFrameSize) {
		t.Errorf("320 samples at 48 kHz: %v, want ErrFrameSize", err)
	}
	if _, err := enc.Encode(make([]int16, 960), nil); !errors.Is(err, ErrBuffer) {
		t.Errorf("nil packet buffer: %v, want ErrBuffer", err)
	}
	for _, n := range []int{120, 240, 480, 960, 1920, 2880} {
		if _, err := enc.Encode(make([]int16, n), packet); err != nil {
			t.Errorf("%d samples (a valid Opus duration): %v", n, err)
		}
	}
	dec, err := NewOpusDecoder(48000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Decode([]byte{0xff}, make([]int16, 5760)); !errors.Is(err, ErrOpus) {
		t.Errorf("invalid packet: %v, want ErrOpus", err)
	}
	if _, err := dec.Decode(nil, make([]int16, 100)); !errors.Is(err, ErrBuffer) {
		t.Errorf("PLC into 100 samples: %v, want ErrBuffer", err)
	}
	if !ValidOpusRate(24000) || ValidOpusRate(44100) {
		t.Error("ValidOpusRate is wrong")
	}
}

// BenchmarkOpusEncode20ms measures one 20 ms 16 kHz speech frame at
// 24 kbit/s, the uplink shape.
func BenchmarkOpusEncode20ms(b *testing.B) {
	enc, err := NewOpusEncoder(16000, 24000)
	if err != nil {
		b.Fatal(err)
	}
	pcm := sine(320, 200, 8000, 16000)
	packet := make([]byte, MaxOpusPacket)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc.Encode(pcm, packet); err != nil {
			b.Fatal(err)
		}
	}
}
