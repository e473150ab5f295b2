package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
)

func rmsDB(x []int16) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return 10 * math.Log10(s/float64(len(x))/(32768*32768)+1e-12)
}

// TestMixRoomSNR: the noise under the speech is SNR below the speech's
// active level, and the room goes on after it at the same level.
func TestMixRoomSNR(t *testing.T) {
	voice := append(make([]int16, 8000), audiotest.Voice(1500, benchRate, 120, 180)...)
	u := roomUtt{name: "voice", pcm: voice, onset: speechOnset(voice), end: len(voice), quietRMS: quietRoomRMS}
	if u.onset < 8000-320 || u.onset > 8000+320 {
		t.Errorf("onset %d, want about 8000", u.onset)
	}
	noise := audiotest.Pink(5*benchRate, rand.New(rand.NewPCG(1, 2)))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, snr := range []float64{0, 10, 20} {
		m := mixRoom(u, roomCond{noisePink, snr}, noise, 1000, rng)
		lead := m.pcm[:benchRate]
		got := audiotest.SpeechLevel(voice) - rmsDB(lead)
		if math.Abs(got-snr) > 0.5 {
			t.Errorf("SNR %g: speech level over the lead's noise %.2f dB", snr, got)
		}
		if d := rmsDB(m.tail) - rmsDB(lead); math.Abs(d) > 0.5 {
			t.Errorf("SNR %g: the tail is %.2f dB off the lead", snr, d)
		}
		if m.onset != benchRate+u.onset || m.end != benchRate+u.end {
			t.Errorf("SNR %g: speech at %d-%d, want %d-%d", snr, m.onset, m.end, benchRate+u.onset, benchRate+u.end)
		}
	}
	clean := mixRoom(u, roomCond{}, nil, 1000, rng)
	if clean.tail != nil || len(clean.pcm) != benchRate+len(voice) {
		t.Errorf("clean: tail %d samples, pcm %d; want none and %d", len(clean.tail), len(clean.pcm), benchRate+len(voice))
	}
}

// TestVADOnNoiseCounts: pink noise starts no Silero utterance (6 s: the
// network is slow under -race; bench rooms plays minutes); bursts of it
// start one energy-VAD utterance each, and those after settleSec are
// counted apart.
func TestVADOnNoiseCounts(t *testing.T) {
	pink := audiotest.Pink(30*benchRate, rand.New(rand.NewPCG(5, 6)))
	vc := audio.DefaultVADConfig()
	vc.Detector = audio.DetectorSilero
	r, err := vadOnNoise(vc, noisePink, pink, -30, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Starts != 0 || r.InSpeech != 0 {
		t.Errorf("silero: %d starts in 6 s of pink noise, in speech %.0f%% of the time; want none", r.Starts, 100*r.InSpeech)
	}
	// 400 ms bursts 30 dB over a quiet room, every 2 s: 15 in 30 s.
	bursts := make([]float64, len(pink))
	for i := range bursts {
		if i%(2*benchRate) < 4*benchRate/10 {
			bursts[i] = pink[i] * 30
		} else {
			bursts[i] = pink[i]
		}
	}
	vc.Detector = audio.DetectorEnergy
	r, err = vadOnNoise(vc, "bursts", bursts, -40, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if r.Starts < 13 || r.Starts > 15 || r.Settled != r.Starts-5 || r.PerMinute != 2*float64(r.Starts) {
		t.Errorf("energy on bursts: %+v, want about 15 starts, 10 of them after %d s", r, settleSec)
	}
}

// TestVADInRoomRealSpeech: goforward.raw in pink noise at 10 dB SNR is
// found by the Silero VAD, with no early start and an end.
func TestVADInRoomRealSpeech(t *testing.T) {
	if _, err := os.Stat(psTestData); err != nil {
		t.Skipf("requires pocketsphinx-testdata: %s not found", psTestData)
	}
	utts, err := roomSpeech()
	if err != nil {
		t.Fatal(err)
	}
	pink := audiotest.Pink(10*benchRate, rand.New(rand.NewPCG(7, 8)))
	vc := audio.DefaultVADConfig()
	vc.Detector = audio.DetectorSilero
	r, err := vadInRoom(vc, roomCond{noisePink, 10}, utts[:1], pink, 2000, rand.New(rand.NewPCG(9, 10)))
	if err != nil {
		t.Fatal(err)
	}
	if r.Found != 1 || r.EarlyOn != 0 || r.NoEnd != 0 || r.Splits != 0 {
		t.Errorf("%+v: want found, not early, ended, not split", r)
	}
	// The last word's end is RecordingSpeechEnd's estimate, which takes in
	// goforward's breath after it: the VAD's silence begins a little before.
	if r.EndWait50 <= 0 || r.EndWait50 > float64(vc.EndSilenceMs+400) {
		t.Errorf("end %v ms after the last word, want after it and at most EndSilenceMs (%d) + 400", r.EndWait50, vc.EndSilenceMs)
	}
}

func TestParseSNRs(t *testing.T) {
	got, err := parseSNRs("0, 5,10")
	if err != nil || len(got) != 3 || got[1] != 5 {
		t.Errorf("parseSNRs: %v, %v", got, err)
	}
	for _, bad := range []string{"", "ten", "99"} {
		if _, err := parseSNRs(bad); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: err %v, want ErrUsage", bad, err)
		}
	}
}
