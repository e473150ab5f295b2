package speexdsp

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

const (
	rate  = 16000
	frame = 160 // 10 ms
)

// testData is pocketsphinx-testdata's directory: real recorded speech.
const testData = "/usr/share/pocketsphinx/test/data"

func readRaw(t testing.TB, name string) []int16 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testData, name))
	if err != nil {
		t.Skipf("requires pocketsphinx-testdata (apt-get install pocketsphinx-testdata): %v", err)
	}
	pcm := make([]int16, len(b)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return pcm
}

// readWAV reads the samples of a 16 kHz PCM16 WAV with a 44-byte header.
func readWAV(t testing.TB, name string) []int16 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testData, name))
	if err != nil || len(b) < 44 {
		t.Skipf("requires pocketsphinx-testdata (apt-get install pocketsphinx-testdata): %v", err)
	}
	pcm := make([]int16, (len(b)-44)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(b[44+2*i:]))
	}
	return pcm
}

func newProc(t testing.TB, cfg Config) *Processor {
	t.Helper()
	p, err := NewProcessor(cfg)
	if errors.Is(err, ErrNoCgo) {
		t.Skip("requires cgo: libspeexdsp unavailable in a CGO_ENABLED=0 build")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// echoOf is what a microphone picks up of far played by a loudspeaker in a
// room: the direct path delay samples late at gain (linear), then a
// reverberant tail decaying 60 dB over rt60 samples (a synthetic room
// impulse response, fixed seed).
func echoOf(far []int16, delay int, gain float64, rt60 int) []float64 {
	ir := make([]float64, rt60)
	rng := rand.New(rand.NewPCG(1, 2))
	ir[0] = 1
	for i := 1; i < rt60; i++ {
		ir[i] = 0.3 * rng.NormFloat64() * math.Pow(10, -3*float64(i)/float64(rt60))
	}
	out := make([]float64, len(far)+delay+rt60)
	for i, s := range far {
		if s == 0 {
			continue
		}
		v := float64(s) * gain
		for k, h := range ir {
			out[i+delay+k] += v * h
		}
	}
	return out[:len(far)]
}

func toPCM(x []float64) []int16 {
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = int16(max(-32768, min(32767, math.Round(v))))
	}
	return out
}

func energy(x []int16) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

func db(num, den float64) float64 { return 10 * math.Log10(num/den) }

// run feeds mic and ref through p frame by frame and returns the output.
func run(t testing.TB, p *Processor, mic, ref []int16) []int16 {
	t.Helper()
	out := make([]int16, len(mic)/frame*frame)
	for i := 0; i+frame <= len(out); i += frame {
		var r []int16
		if ref != nil {
			r = ref[i : i+frame]
		}
		if err := p.Process(mic[i:i+frame], r, out[i:i+frame]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEchoCancelled: real speech played through a simulated room (120 ms
// delay, a 100 ms reverberant tail, -6 dB) is cancelled by the adaptive
// filter: over the last 5 s the output holds at least 20 dB less than the
// microphone did (30 dB with the residual echo suppressor), and the
// filter's peak sits at the path's delay.
func TestEchoCancelled(t *testing.T) {
	far := readWAV(t, "librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
	far = append(far, readWAV(t, "librivox/sense_and_sensibility_01_austen_64kb-0880.wav")...)
	const delay = 1920 // 120 ms
	mic := toPCM(echoOf(far, delay, 0.5, 1600))
	for _, residual := range []bool{false, true} {
		p := newProc(t, Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 4800, ResidualEcho: residual})
		out := run(t, p, mic, far)
		tail := len(out) - 5*rate
		erle := db(energy(mic[tail:]), energy(out[tail:]))
		want := 20.0
		if residual {
			want = 30
		}
		t.Logf("residual suppression %v: echo return loss enhancement over the last 5 s: %.1f dB (%.1f s of speech)",
			residual, erle, float64(len(far))/rate)
		if erle < want {
			t.Errorf("residual suppression %v: echo reduced by %.1f dB, want >= %.0f", residual, erle, want)
		}
		d, ok := p.Delay()
		t.Logf("filter peak at %d samples (path delay %d)", d, delay)
		if !ok || d < delay-frame || d > delay+frame {
			t.Errorf("estimated delay %d samples (ok %v), want %d ± %d", d, ok, delay, frame)
		}
	}
}

// TestNearEndKept: while the far end plays, the person speaks too (double
// talk): their speech survives cancellation. The output is compared with
// the near end alone by correlation (at the preprocessor's one-frame
// delay), so that leftover echo does not count as kept speech.
func TestNearEndKept(t *testing.T) {
	far := readWAV(t, "librivox/sense_and_sensibility_01_austen_64kb-0870.wav")
	far = append(far, readWAV(t, "librivox/sense_and_sensibility_01_austen_64kb-0880.wav")...)
	near := readRaw(t, "goforward.raw")
	echo := echoOf(far, 1600, 0.5, 1600)
	at := len(far) - len(near) - rate // near-end speech in the last seconds
	mix := make([]float64, len(echo))
	copy(mix, echo)
	for i, s := range near {
		mix[at+i] += float64(s)
	}
	mic := toPCM(mix)
	for _, residual := range []bool{false, true} {
		p := newProc(t, Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 4800, ResidualEcho: residual})
		out := run(t, p, mic, far)
		lag := 0
		if residual {
			lag = frame
		}
		seg := out[at+lag : at+lag+len(near)]
		var dot, nn, oo float64
		for i, s := range near {
			dot += float64(s) * float64(seg[i])
			nn += float64(s) * float64(s)
			oo += float64(seg[i]) * float64(seg[i])
		}
		corr := dot / math.Sqrt(nn*oo)
		t.Logf("residual suppression %v: double talk at echo %+.1f dB to the near end; output's correlation with the near end %.2f",
			residual, db(energy(toPCM(echo[at:at+len(near)])), nn), corr)
		if corr < 0.75 {
			t.Errorf("residual suppression %v: near-end speech correlation %.2f after cancellation, want >= 0.75", residual, corr)
		}
	}
}

// TestDenoise: stationary noise alone is attenuated by the noise
// suppressor, speech in it much less.
func TestDenoise(t *testing.T) {
	speech := readRaw(t, "goforward.raw")
	rng := rand.New(rand.NewPCG(3, 4))
	noise := make([]float64, 3*rate+len(speech))
	for i := range noise {
		noise[i] = 300 * rng.NormFloat64()
	}
	noisy := make([]float64, len(noise))
	copy(noisy, noise)
	for i, s := range speech {
		noisy[3*rate+i] += float64(s)
	}
	in := toPCM(noisy)
	p := newProc(t, Config{SampleRate: rate, FrameSamples: frame, Denoise: true})
	out := run(t, p, in, nil)
	noiseDrop := db(energy(in[2*rate:3*rate]), energy(out[2*rate:3*rate]))
	end := len(out)
	speechDrop := db(energy(in[3*rate:end]), energy(out[3*rate:end]))
	t.Logf("noise alone: -%.1f dB; speech in noise: -%.1f dB", noiseDrop, speechDrop)
	if noiseDrop < 10 {
		t.Errorf("noise attenuated by %.1f dB, want >= 10", noiseDrop)
	}
	if speechDrop > 3 {
		t.Errorf("speech attenuated by %.1f dB, want <= 3", speechDrop)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{
		{SampleRate: 4000, FrameSamples: 80, Denoise: true},
		{SampleRate: rate, FrameSamples: 7, Denoise: true},
		{SampleRate: rate, FrameSamples: frame, EchoTailSamples: -1},
		{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 10 * rate},
		{SampleRate: rate, FrameSamples: frame, Denoise: true, NoiseSuppressDB: 5},
		{SampleRate: rate, FrameSamples: frame},
		{SampleRate: rate, FrameSamples: frame, Denoise: true, ResidualEcho: true},
	} {
		if _, err := NewProcessor(c); !errors.Is(err, ErrConfig) {
			t.Errorf("NewProcessor(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

func TestProcessErrors(t *testing.T) {
	p := newProc(t, Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 1600, ResidualEcho: true, Denoise: true})
	buf := make([]int16, frame)
	if err := p.Process(buf[:10], buf, make([]int16, frame)); !errors.Is(err, ErrFrame) {
		t.Errorf("short mic: %v, want ErrFrame", err)
	}
	if err := p.Process(buf, nil, make([]int16, frame)); !errors.Is(err, ErrFrame) {
		t.Errorf("no reference with echo on: %v, want ErrFrame", err)
	}
	if err := p.Process(buf, buf, buf); !errors.Is(err, ErrFrame) {
		t.Errorf("in place with echo on: %v, want ErrFrame", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Process(buf, buf, make([]int16, frame)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// BenchmarkProcess: the cost of one 10 ms frame, echo canceller with a
// 300 ms tail plus preprocessor, against the preprocessor alone.
func BenchmarkProcess(b *testing.B) {
	far := readRaw(b, "goforward.raw")
	mic := toPCM(echoOf(far, 1600, 0.5, 1600))
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"denoise", Config{SampleRate: rate, FrameSamples: frame, Denoise: true}},
		{"echo300ms", Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 4800}},
		{"echo300ms+residual", Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 4800, ResidualEcho: true}},
		{"echo300ms+residual+denoise", Config{SampleRate: rate, FrameSamples: frame, EchoTailSamples: 4800, ResidualEcho: true, Denoise: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := newProc(b, bc.cfg)
			out := make([]int16, frame)
			n := len(mic) / frame
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				k := (i % n) * frame
				if err := p.Process(mic[k:k+frame], far[k:k+frame], out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
