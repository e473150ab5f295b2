package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// signal builds a synthetic test signal at 16 kHz as float samples, then
// converts it to PCM16.
type signal struct {
	rng *rand.Rand
	x   []float64
}

func newSignal(seed uint64) *signal {
	return &signal{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func dbfsAmp(db float64) float64 { return 32768 * math.Pow(10, db/20) }

// noise appends ms of white Gaussian noise with RMS level db dBFS.
func (s *signal) noise(ms int, db float64) *signal {
	amp := dbfsAmp(db)
	for range ms * 16 {
		s.x = append(s.x, amp*s.rng.NormFloat64())
	}
	return s
}

// speech appends ms of a speech-like sound: a harmonic tone on a wobbling
// 110-170 Hz pitch with 1/k harmonics up to 4 kHz, roughened by noise
// modulation, under a 4 Hz syllable envelope that dips 20 dB between
// syllables, at RMS level db dBFS, mixed over noise at noiseDB. It starts
// and ends at a syllable peak with 10 ms fades, so the expected onset and
// offset are sharp.
func (s *signal) speech(ms int, db, noiseDB float64) *signal {
	n := ms * 16
	seg := make([]float64, n)
	var phase, sumSq float64
	for i := range seg {
		t := float64(i) / 16000
		f0 := 140 + 30*math.Sin(2*math.Pi*0.7*t)
		phase += 2 * math.Pi * f0 / 16000
		var v float64
		for k := 1; float64(k)*f0 < 4000; k++ {
			v += math.Sin(float64(k)*phase) / float64(k)
		}
		v *= 1 + 0.3*s.rng.NormFloat64()
		env := 0.55 + 0.45*math.Cos(2*math.Pi*4*t)
		fade := min(1, float64(i)/160, float64(n-1-i)/160)
		seg[i] = v * env * fade
		sumSq += seg[i] * seg[i]
	}
	scale := dbfsAmp(db) / math.Sqrt(sumSq/float64(n))
	amp := dbfsAmp(noiseDB)
	for _, v := range seg {
		s.x = append(s.x, v*scale+amp*s.rng.NormFloat64())
	}
	return s
}

func (s *signal) frames() int { return len(s.x) / 320 }

func (s *signal) pcm() []int16 {
	out := make([]int16, len(s.x))
	for i, v := range s.x {
		out[i] = int16(max(-32768, min(32767, math.Round(v))))
	}
	return out
}

type vadEvent struct {
	frame int
	ev    VADEvent
}

// runVAD feeds pcm in 20 ms frames and returns the events.
func runVAD(t *testing.T, v *VAD, pcm []int16) []vadEvent {
	t.Helper()
	var evs []vadEvent
	fs := v.Config().SampleRate * v.Config().FrameMs / 1000
	for f := 0; (f+1)*fs <= len(pcm); f++ {
		if ev := v.Process(pcm[f*fs : (f+1)*fs]); ev != VADNone {
			evs = append(evs, vadEvent{f, ev})
		}
	}
	return evs
}

func mustVAD(t testing.TB, cfg VADConfig) *VAD {
	t.Helper()
	v, err := NewVAD(cfg)
	if err != nil {
		t.Fatalf("NewVAD: %v", err)
	}
	return v
}

// TestVADSyntheticUtterances: two utterances over noise floors from
// digital-quiet to loud; the second has a 300 ms pause inside that must not
// end it. Starts must come StartMs after the onset and ends EndSilenceMs
// after the offset, within 2 frames.
func TestVADSyntheticUtterances(t *testing.T) {
	cfg := DefaultVADConfig()
	startFrames := cfg.StartMs / cfg.FrameMs
	endFrames := cfg.EndSilenceMs / cfg.FrameMs
	const tolerance = 2 // frames
	for _, noiseDB := range []float64{-80, -65, -55, -45, -40} {
		t.Run(fmt.Sprintf("noise%gdBFS", noiseDB), func(t *testing.T) {
			const speechDB = -20
			s := newSignal(uint64(-noiseDB))
			s.noise(1500, noiseDB)
			onA := s.frames()
			s.speech(1500, speechDB, noiseDB)
			offA := s.frames()
			s.noise(1500, noiseDB)
			onB := s.frames()
			s.speech(1000, speechDB, noiseDB).noise(300, noiseDB).speech(1000, speechDB, noiseDB)
			offB := s.frames()
			s.noise(1500, noiseDB)

			v := mustVAD(t, cfg)
			got := runVAD(t, v, s.pcm())
			want := []vadEvent{
				{onA + startFrames - 1, VADSpeechStart}, {offA + endFrames - 1, VADSpeechEnd},
				{onB + startFrames - 1, VADSpeechStart}, {offB + endFrames - 1, VADSpeechEnd},
			}
			if len(got) != len(want) {
				t.Fatalf("events %v, want %v (±%d frames)", got, want, tolerance)
			}
			for i := range want {
				if got[i].ev != want[i].ev || abs(got[i].frame-want[i].frame) > tolerance {
					t.Errorf("event %d = %v at frame %d, want %v at frame %d ±%d", i, got[i].ev, got[i].frame, want[i].ev, want[i].frame, tolerance)
				}
			}
			t.Logf("noise %g dBFS: events %v (want %v), final floor %.1f dBFS", noiseDB, got, want, v.NoiseFloorDB())
		})
	}
}

// TestVADNoiseStep: quiet room, then a steady noise 30 dB louder (a fan or
// a car engine starting). An energy VAD takes the step for speech, but the
// false utterance must end within a few seconds and never come back, and
// real speech over the new noise must still be found.
func TestVADNoiseStep(t *testing.T) {
	cfg := DefaultVADConfig()
	s := newSignal(7)
	s.noise(2000, -70)
	step := s.frames()
	s.noise(20000, -40)
	on := s.frames()
	s.speech(1500, -15, -40)
	off := s.frames()
	s.noise(2000, -40)

	got := runVAD(t, mustVAD(t, cfg), s.pcm())
	t.Logf("noise step at frame %d, speech %d-%d: events %v", step, on, off, got)
	var rest []vadEvent
	switch {
	case len(got) >= 2 && got[0].frame < on:
		// The step itself: one start right after it, one end within
		// the 2.6 s minimum window plus EndSilenceMs plus slack.
		if got[0].ev != VADSpeechStart || got[1].ev != VADSpeechEnd {
			t.Fatalf("events %v: want one start/end pair for the noise step", got)
		}
		if lag := got[1].frame - step; lag > 200 {
			t.Errorf("false utterance from the noise step lasted %d frames, want <= 200 (4 s)", lag)
		}
		rest = got[2:]
	default:
		rest = got
	}
	if len(rest) != 2 || rest[0].ev != VADSpeechStart || rest[1].ev != VADSpeechEnd {
		t.Fatalf("after the noise step: events %v, want exactly the speech's start and end", rest)
	}
	if d := rest[0].frame - (on + cfg.StartMs/cfg.FrameMs - 1); abs(d) > 2 {
		t.Errorf("speech start %d frames off", d)
	}
	if d := rest[1].frame - (off + cfg.EndSilenceMs/cfg.FrameMs - 1); abs(d) > 2 {
		t.Errorf("speech end %d frames off", d)
	}
}

// TestVADShortPauses: pauses shorter than EndSilenceMs, however many, keep
// one utterance going.
func TestVADShortPauses(t *testing.T) {
	cfg := DefaultVADConfig()
	s := newSignal(11).noise(1000, -55)
	for range 6 {
		s.speech(500, -25, -55).noise(cfg.EndSilenceMs-120, -55)
	}
	s.noise(1000, -55)
	got := runVAD(t, mustVAD(t, cfg), s.pcm())
	if len(got) != 2 {
		t.Fatalf("events %v, want one start and one end", got)
	}
}

// goforwardPCM reads pocketsphinx's test recording "go forward ten meters"
// (16 kHz s16le, no header).
func goforwardPCM(t *testing.T) []int16 {
	t.Helper()
	const path = "/usr/share/pocketsphinx/test/data/goforward.raw"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("requires pocketsphinx-testdata: %s not found: %v", path, err)
	}
	pcm := make([]int16, len(raw)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	return pcm
}

// TestVADRealSpeech: a real recording, padded with a second of silence on
// both sides, is exactly one utterance; checked with digital silence and
// with a noise floor under everything.
func TestVADRealSpeech(t *testing.T) {
	speech := goforwardPCM(t)
	for _, noiseDB := range []float64{math.Inf(-1), -65, -50} {
		t.Run(fmt.Sprintf("noise%gdBFS", noiseDB), func(t *testing.T) {
			pad := make([]int16, 16000)
			pcm := append(append(append([]int16{}, pad...), speech...), pad...)
			if !math.IsInf(noiseDB, -1) {
				rng := rand.New(rand.NewPCG(5, 6))
				for i := range pcm {
					pcm[i] = int16(max(-32768, min(32767, float64(pcm[i])+dbfsAmp(noiseDB)*rng.NormFloat64())))
				}
			}
			cfg := DefaultVADConfig()
			got := runVAD(t, mustVAD(t, cfg), pcm)
			t.Logf("goforward.raw with %g dBFS padding noise: events %v (frame = 20 ms; speech in the file runs ~0.45-2.4 s, i.e. frames ~72-170)", noiseDB, got)
			if len(got) != 2 || got[0].ev != VADSpeechStart || got[1].ev != VADSpeechEnd {
				t.Fatalf("events %v, want exactly one utterance", got)
			}
			// Speech in the file starts near 0.5 s and ends near 2.35 s.
			if f := got[0].frame; f < 50+20 || f > 50+35 {
				t.Errorf("start at frame %d, want 70..85 (1 s pad + ~0.5 s + StartMs)", f)
			}
			if f := got[1].frame; f < 50+115+cfg.EndSilenceMs/cfg.FrameMs-10 || f > 50+125+cfg.EndSilenceMs/cfg.FrameMs+20 {
				t.Errorf("end at frame %d, want about 50+120+%d", f, cfg.EndSilenceMs/cfg.FrameMs)
			}
		})
	}
}

// TestVADPreRoll: at SpeechStart the pre-roll holds PreRollMs before the
// onset through the current frame, oldest first.
func TestVADPreRoll(t *testing.T) {
	cfg := DefaultVADConfig()
	s := newSignal(13).noise(1000, -60)
	onset := len(s.x)
	s.speech(600, -20, -60)
	pcm := s.pcm()
	v := mustVAD(t, cfg)
	var pre []int16
	for f := 0; (f+1)*320 <= len(pcm); f++ {
		if v.Process(pcm[f*320:(f+1)*320]) == VADSpeechStart {
			pre = v.PreRoll(make([]int16, 0, 16000))
			end := (f + 1) * 320
			want := pcm[onset-cfg.PreRollMs*16 : end]
			if len(pre) != len(want) {
				t.Fatalf("pre-roll %d samples, want %d (PreRollMs before the onset through frame %d)", len(pre), len(want), f)
			}
			for i := range want {
				if pre[i] != want[i] {
					t.Fatalf("pre-roll sample %d = %d, want %d", i, pre[i], want[i])
				}
			}
			return
		}
	}
	t.Fatal("no speech start")
}

func TestVADRejectsConfig(t *testing.T) {
	base := DefaultVADConfig()
	for name, mut := range map[string]func(*VADConfig){
		"rate":      func(c *VADConfig) { c.SampleRate = 0 },
		"frame":     func(c *VADConfig) { c.FrameMs = 0 },
		"fraction":  func(c *VADConfig) { c.SampleRate, c.FrameMs = 11025, 20 },
		"end":       func(c *VADConfig) { c.EndSilenceMs = 0 },
		"threshold": func(c *VADConfig) { c.ThresholdDB = math.NaN() },
		"preroll":   func(c *VADConfig) { c.PreRollMs = -1 },
	} {
		cfg := base
		mut(&cfg)
		if _, err := NewVAD(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewVAD error = %v, want ErrConfig", name, err)
		}
	}
}

func TestVADReset(t *testing.T) {
	s := newSignal(17).noise(500, -60).speech(500, -20, -60)
	pcm := s.pcm()
	v := mustVAD(t, DefaultVADConfig())
	first := runVAD(t, v, pcm)
	v.Reset()
	if v.InSpeech() || len(v.PreRoll(nil)) != 0 {
		t.Fatal("Reset left speech state or pre-roll audio")
	}
	second := runVAD(t, v, pcm)
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("after Reset events %v, want %v", second, first)
	}
}

func TestVADZeroAllocs(t *testing.T) {
	pcm := newSignal(19).noise(400, -60).speech(400, -20, -60).pcm()
	v := mustVAD(t, DefaultVADConfig())
	pre := make([]int16, 0, 16000)
	f := 0
	allocs := testing.AllocsPerRun(200, func() {
		off := (f % 40) * 320
		if v.Process(pcm[off:off+320]) == VADSpeechStart {
			pre = v.PreRoll(pre)
		}
		f++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per frame, want 0", allocs)
	}
}

// BenchmarkVAD measures one 20 ms frame at 16 kHz.
func BenchmarkVAD(b *testing.B) {
	pcm := newSignal(23).noise(1000, -55).speech(1000, -20, -55).pcm()
	v := mustVAD(b, DefaultVADConfig())
	frames := len(pcm) / 320
	b.ReportAllocs()
	i := 0
	cpu0 := processCPU()
	for b.Loop() {
		f := i % frames
		v.Process(pcm[f*320 : f*320+320])
		i++
	}
	cpuPerFrame := float64((processCPU() - cpu0).Nanoseconds()) / float64(b.N)
	b.ReportMetric(cpuPerFrame, "cpu-ns/frame")
	b.ReportMetric(100*cpuPerFrame/20e6, "%core")
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestVADSpeechFromFirstFrame: a stream that starts mid-word (no noise to
// learn from first) still detects it on time.
func TestVADSpeechFromFirstFrame(t *testing.T) {
	cfg := DefaultVADConfig()
	s := newSignal(29).speech(1000, -25, -60)
	off := s.frames()
	s.noise(1500, -60)
	got := runVAD(t, mustVAD(t, cfg), s.pcm())
	want := []vadEvent{{cfg.StartMs/cfg.FrameMs - 1, VADSpeechStart}, {off + cfg.EndSilenceMs/cfg.FrameMs - 1, VADSpeechEnd}}
	if len(got) != 2 || abs(got[0].frame-want[0].frame) > 2 || abs(got[1].frame-want[1].frame) > 2 {
		t.Fatalf("events %v, want %v ±2 frames", got, want)
	}
}

// TestVADIgnoresDCOffset: a microphone's DC offset is not energy.
func TestVADIgnoresDCOffset(t *testing.T) {
	s := newSignal(31).noise(5000, -65)
	for i := range s.x {
		s.x[i] += 6000 // about -15 dBFS of DC
	}
	if got := runVAD(t, mustVAD(t, DefaultVADConfig()), s.pcm()); len(got) != 0 {
		t.Fatalf("events %v on DC plus quiet noise, want none", got)
	}
}

// TestVADRecordedSentences: real sentences, each padded with a second of
// silence, are exactly one utterance each: pocketsphinx's recordings
// (read speech with commas and breaths, 16 kHz WAV) and espeak-ng's voice
// (22050 Hz WAV, through DecodeWAV and the Resampler, the TTS path).
func TestVADRecordedSentences(t *testing.T) {
	check := func(t *testing.T, name string, w *WAV) {
		t.Helper()
		pcm := w.Mono()
		if w.SampleRate != 16000 {
			pcm = mustResampler(t, w.SampleRate, 16000).Process(nil, pcm)
		}
		pad := make([]int16, 16000)
		pcm = append(append(append([]int16{}, pad...), pcm...), pad...)
		got := runVAD(t, mustVAD(t, DefaultVADConfig()), pcm)
		if len(got) != 2 || got[0].ev != VADSpeechStart || got[1].ev != VADSpeechEnd {
			t.Errorf("%s (%.2f s): events %v, want exactly one utterance", name, w.Duration(), got)
		}
	}
	t.Run("pocketsphinx", func(t *testing.T) {
		files, _ := filepath.Glob("/usr/share/pocketsphinx/test/data/*/*.wav")
		if len(files) == 0 {
			t.Skip("requires pocketsphinx-testdata: no WAV files found under /usr/share/pocketsphinx/test/data")
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			w, err := DecodeWAV(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			check(t, filepath.Base(f), w)
		}
	})
	t.Run("espeak-ng", func(t *testing.T) {
		bin, err := exec.LookPath("espeak-ng")
		if err != nil {
			t.Skip("requires the espeak-ng command: not found in PATH")
		}
		for i, s := range []string{
			"Hello, how are you doing today?",
			"The quick brown fox jumps over the lazy dog, and then it runs away.",
			"I would like to book a table for two people, at seven thirty, please.",
			"Turn left at the next intersection, then continue for about two miles.",
			"My phone number is five five five, one two three four.",
		} {
			out, err := exec.Command(bin, "--stdout", s).Output()
			if err != nil {
				t.Fatalf("espeak-ng: %v", err)
			}
			w, err := DecodeWAV(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("espeak-ng output: %v", err)
			}
			check(t, fmt.Sprintf("espeak sentence %d", i), w)
		}
	})
}

// TestVADEndSpeech: SilenceFrames counts the silence after the last speech
// frame, and EndSpeech ends the utterance at once (the turn detector's early
// commit); the next speech starts a new utterance.
func TestVADEndSpeech(t *testing.T) {
	cfg := DefaultVADConfig()
	v := mustVAD(t, cfg)
	pcm := newSignal(5).noise(500, -55).speech(600, -25, -55).noise(200, -55).speech(600, -25, -55).noise(300, -55).pcm()
	fs := cfg.SampleRate * cfg.FrameMs / 1000
	var starts, maxSilence int
	ended := false
	for f := 0; (f+1)*fs <= len(pcm); f++ {
		switch v.Process(pcm[f*fs : (f+1)*fs]) {
		case VADSpeechStart:
			starts++
			ended = false
		case VADSpeechEnd:
			t.Fatalf("frame %d: the VAD ended the utterance itself", f)
		}
		if n := v.SilenceFrames(); n > 0 && !ended {
			maxSilence = max(maxSilence, n)
			if n*cfg.FrameMs >= 160 {
				if !v.EndSpeech() || v.InSpeech() || v.SilenceFrames() != 0 {
					t.Fatalf("frame %d: EndSpeech did not end the utterance", f)
				}
				ended = true
			}
		}
	}
	if starts != 2 {
		t.Errorf("%d utterances, want 2 (ended early after each phrase)", starts)
	}
	if maxSilence < 160/cfg.FrameMs {
		t.Errorf("longest silence run %d frames, want >= %d", maxSilence, 160/cfg.FrameMs)
	}
	if v.EndSpeech() {
		t.Error("EndSpeech outside speech reported an utterance")
	}
}
