package audio

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
)

// voice returns n samples (a multiple of 16) at 16 kHz of a voice gliding
// from f0 to f1 Hz.
func voice(n int, f0, f1 float64) []int16 { return audiotest.Voice(n/16, 16000, f0, f1) }

func TestPitchTone(t *testing.T) {
	p, err := NewPitch(16000, 320)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []float64{75, 110, 180, 260, 400} {
		p.Reset()
		pcm := voice(320*6, f, f)
		var got float64
		for i := 0; i < 6; i++ {
			got = p.Process(pcm[i*320 : (i+1)*320])
		}
		if math.Abs(got-f)/f > 0.02 {
			t.Errorf("%v Hz tone: got %.1f Hz", f, got)
		}
	}
}

func TestPitchNoiseUnvoiced(t *testing.T) {
	p, _ := NewPitch(16000, 320)
	rng := rand.New(rand.NewPCG(1, 2))
	frame := make([]int16, 320)
	voiced := 0
	for k := 0; k < 50; k++ {
		for i := range frame {
			frame[i] = int16(rng.NormFloat64() * 2000)
		}
		if p.Process(frame) > 0 {
			voiced++
		}
	}
	if voiced > 2 {
		t.Errorf("white noise: %d of 50 frames voiced", voiced)
	}
	if got := p.Process(make([]int16, 320)); got != 0 {
		t.Errorf("digital silence: %v Hz", got)
	}
}

func TestPitchRejectsShortFrames(t *testing.T) {
	if _, err := NewPitch(16000, 160); err == nil {
		t.Error("10 ms frames at 16 kHz: want an error (a 60 Hz period does not fit twice)")
	}
}

// contourOf feeds a speaker's session to a tracker: speech in a middle
// range first (so the tracker knows the voice), then the ending under test.
func contourOf(t *testing.T, ending []int16) Contour {
	t.Helper()
	in, err := NewIntonation(16000, 320)
	if err != nil {
		t.Fatal(err)
	}
	var session []int16
	for _, seg := range [][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}} {
		session = append(session, voice(320*25, seg[0], seg[1])...)
	}
	for i := 0; i+320 <= len(session); i += 320 {
		in.Speech(session[i : i+320])
	}
	in.Gap()
	for i := 0; i+320 <= len(ending); i += 320 {
		in.Speech(ending[i : i+320])
	}
	return in.Ending()
}

func TestIntonationEndings(t *testing.T) {
	fall := contourOf(t, voice(320*20, 130, 95))
	if fall.Range > 0.2 || fall.Slope > -10 {
		t.Errorf("a fall to the bottom of the range: %+v", fall)
	}
	rise := contourOf(t, voice(320*20, 125, 165))
	if rise.Range < 0.8 || rise.Slope < 10 {
		t.Errorf("a rise to the top of the range: %+v", rise)
	}
	level := contourOf(t, voice(320*20, 128, 128))
	if level.Range < 0.3 || level.Range > 0.8 || math.Abs(level.Slope) > 3 {
		t.Errorf("a level ending in mid range: %+v", level)
	}
	// A fall, then 360 ms that the VAD still calls speech but have no
	// pitch (a final "s", breath): the ending is the fall's.
	rng := rand.New(rand.NewPCG(3, 4))
	hiss := make([]int16, 320*18)
	for i := range hiss {
		hiss[i] = int16(rng.NormFloat64() * 300)
	}
	tail := contourOf(t, append(voice(320*20, 130, 95), hiss...))
	if tail.Voiced < 3 || tail.Range > 0.2 || tail.Slope > -10 {
		t.Errorf("a fall, then 360 ms unvoiced: %+v, want the fall's ending", tail)
	}
	long := contourOf(t, append(voice(320*20, 130, 95), append(hiss, hiss...)...))
	if long.Voiced >= 3 {
		t.Errorf("a fall, then 720 ms unvoiced: %+v, want nothing voiced in reach", long)
	}
	fresh, _ := NewIntonation(16000, 320)
	if c := fresh.Ending(); c.Voiced != 0 || !math.IsNaN(c.Range) {
		t.Errorf("no speech yet: %+v", c)
	}
	// 200 ms of speech do not show the speaker's range.
	pcm := voice(320*10, 150, 100)
	for i := 0; i+320 <= len(pcm); i += 320 {
		fresh.Speech(pcm[i : i+320])
	}
	if c := fresh.Ending(); c.Voiced < 3 || !math.IsNaN(c.Range) || c.Slope > -10 {
		t.Errorf("a 200 ms first word: %+v, want its fall but no place in the range", c)
	}
}

func BenchmarkPitch(b *testing.B) {
	p, _ := NewPitch(16000, 320)
	pcm := voice(320*50, 100, 200)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % 50
		p.Process(pcm[k*320 : (k+1)*320])
	}
}

// Audio-in takes the ending at every pause: it must not allocate.
func TestIntonationEndingAllocs(t *testing.T) {
	in, _ := NewIntonation(16000, 320)
	pcm := voice(320*60, 150, 100)
	for i := 0; i+320 <= len(pcm); i += 320 {
		in.Speech(pcm[i : i+320])
	}
	if n := testing.AllocsPerRun(20, func() { in.Speech(pcm[:320]); _ = in.Ending() }); n != 0 {
		t.Errorf("Speech and Ending allocate %v times", n)
	}
}

// speak feeds pcm to a tracker as one phrase of speech.
func speak(in *Intonation, pcm []int16) {
	for i := 0; i+320 <= len(pcm); i += 320 {
		in.Speech(pcm[i : i+320])
	}
}

// A device's next session starts from the profile its last one learnt: its
// first phrase, too short to show the range on its own, is placed in it;
// another speaker's voice (a child after a man) drops the profile.
func TestIntonationRecall(t *testing.T) {
	learnt, _ := NewIntonation(16000, 320)
	for _, seg := range [][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}} {
		speak(learnt, voice(320*25, seg[0], seg[1]))
		learnt.Gap()
	}
	p := learnt.Profile()
	if !p.Known() {
		t.Fatal("2 s of voiced speech: the profile should be known")
	}
	// 0.6 s: the first phrase of a session, ending in a fall to the bottom.
	phrase := append(voice(320*15, 140, 130), voice(320*15, 130, 95)...)

	alone, _ := NewIntonation(16000, 320)
	speak(alone, phrase)
	if c := alone.Ending(); !math.IsNaN(c.Range) {
		t.Errorf("first phrase without a profile: %+v, want no place in the range", c)
	}

	same, _ := NewIntonation(16000, 320)
	same.Recall(p)
	speak(same, phrase)
	if c := same.Ending(); !(c.Range <= 0.2) {
		t.Errorf("first phrase with the speaker's profile: %+v, want the bottom of the range", c)
	}

	// Until 0.4 s of voice have matched the profile it is not used.
	early, _ := NewIntonation(16000, 320)
	early.Recall(p)
	speak(early, voice(320*8, 130, 95))
	if c := early.Ending(); !math.IsNaN(c.Range) {
		t.Errorf("a 160 ms first word with a profile: %+v, want no place in the range yet", c)
	}

	other, _ := NewIntonation(16000, 320)
	other.Recall(p)
	speak(other, append(voice(320*15, 300, 280), voice(320*15, 280, 240)...))
	if c := other.Ending(); !math.IsNaN(c.Range) {
		t.Errorf("another speaker's first phrase: %+v, want the profile dropped", c)
	}
	if got := other.Profile(); got.Known() {
		t.Errorf("another speaker's 0.6 s: profile %v frames, want the recalled one dropped", got.sum)
	}

	// Sessions of short questions: each one alone never learns the range,
	// together they do.
	first, _ := NewIntonation(16000, 320)
	speak(first, phrase)
	short := first.Profile()
	if !short.Heard() || short.Known() {
		t.Fatalf("a 0.6 s session: heard %v, known %v; want heard, not known", short.Heard(), short.Known())
	}
	second, _ := NewIntonation(16000, 320)
	second.Recall(short)
	speak(second, phrase)
	if c := second.Ending(); !(c.Range <= 0.2) {
		t.Errorf("a second 0.6 s session starting from the first's profile: %+v, want the bottom of the range", c)
	}

	var unknown PitchProfile
	fresh, _ := NewIntonation(16000, 320)
	fresh.Recall(unknown)
	speak(fresh, phrase)
	if c := fresh.Ending(); !math.IsNaN(c.Range) {
		t.Errorf("an unknown profile recalled: %+v, want it ignored", c)
	}
}

// listened is a new tracker that recalled the device's profile (if
// device has any frames) and was offered voices, after it heard pcm.
func listened(device PitchProfile, voices []PitchProfile, pcm []int16) *Intonation {
	in, _ := NewIntonation(16000, 320)
	in.Recall(device)
	in.RecallRegister(voices)
	speak(in, pcm)
	return in
}

func TestIntonationRecallRegister(t *testing.T) {
	// Voices heard earlier: a low one (a man's, around 100-160 Hz) and a
	// high one (around 220-320 Hz), each over 2 s.
	heard := func(segs [][2]float64) PitchProfile {
		tr, _ := NewIntonation(16000, 320)
		for _, seg := range segs {
			speak(tr, voice(320*25, seg[0], seg[1]))
			tr.Gap()
		}
		return tr.Profile()
	}
	low := heard([][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}})
	high := heard([][2]float64{{260, 320}, {320, 240}, {220, 280}, {300, 220}})
	short := heard([][2]float64{{130, 120}}) // 0.5 s: heard, but no range
	voices := []PitchProfile{high, short, low}
	if !low.SameRegister(short) || low.SameRegister(high) || low.SameRegister(PitchProfile{}) {
		t.Error("SameRegister: want the low voice and the 125 Hz one alike, the high voice and nothing not")
	}
	thrice := short
	thrice.Add(short)
	thrice.Add(short)
	if !thrice.Known() || thrice.sum != 3*short.sum {
		t.Errorf("three 0.5 s profiles added: %v frames, want %v and a known range", thrice.sum, 3*short.sum)
	}

	// Another man's first phrase, falling to the bottom: placed in the low
	// voice's range, where alone it would have no place yet.
	phrase := append(voice(320*15, 140, 130), voice(320*15, 130, 95)...)
	man := listened(PitchProfile{}, voices, phrase)
	if c := man.Ending(); !(c.Range <= 0.2) {
		t.Errorf("a low voice's first phrase with voices to borrow: %+v, want the bottom of the range", c)
	}
	// What the session leaves behind is its own 0.6 s, not the borrowed voice.
	if p := man.Profile(); !p.Heard() || p.Known() {
		t.Errorf("profile after a borrowed register: %v frames, want the session's own (about 30)", p.sum)
	}

	// A child's voice (around 350-400 Hz) is no one's register here.
	child := listened(PitchProfile{}, voices, append(voice(320*15, 420, 400), voice(320*15, 400, 350)...))
	if c := child.Ending(); !math.IsNaN(c.Range) {
		t.Errorf("a voice unlike any heard: %+v, want no place in the range", c)
	}

	// Until 0.4 s of voice has shown the register nothing is borrowed.
	if c := listened(PitchProfile{}, voices, voice(320*8, 130, 95)).Ending(); !math.IsNaN(c.Range) {
		t.Errorf("a 160 ms first word: %+v, want no place in the range yet", c)
	}

	// At a device remembered for the man, a woman's voice drops his
	// profile and borrows the high voice; the man keeps his own.
	highPhrase := append(voice(320*15, 300, 280), voice(320*15, 270, 215)...)
	if c := listened(low, voices, highPhrase).Ending(); !(c.Range <= 0.2) {
		t.Errorf("another register at a remembered device: %+v, want the bottom of the borrowed range", c)
	}
	again := listened(low, []PitchProfile{high}, phrase)
	if c := again.Ending(); !(c.Range <= 0.2) {
		t.Errorf("the remembered speaker, voices offered too: %+v, want the bottom of his range", c)
	}
	if p := again.Profile(); !p.Known() {
		t.Errorf("the remembered speaker's profile: %v frames, want his remembered ones kept", p.sum)
	}

	// A mid phrase ending level, high in the man's range, reads high in
	// the borrowed range.
	if c := listened(PitchProfile{}, voices, append(voice(320*15, 120, 135), voice(320*15, 140, 145)...)).Ending(); !(c.Range >= 0.5) {
		t.Errorf("a phrase ending level and high: %+v, want the upper half of the range", c)
	}
}
