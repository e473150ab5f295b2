package audio

import (
	"math"
	"math/rand/v2"
	"testing"
)

// roomWithWord is 1 s at 16 kHz of room noise 3 dB over the audibility
// threshold (as in pocketsphinx-testdata's LibriVox excerpts), with a
// -20 dBFS "word" from 0.2 to 0.6 s.
func roomWithWord(noiseOverAudibleDB float64) []int16 {
	const rate = 16000
	rng := rand.New(rand.NewPCG(3, 4))
	noiseRMS := 32768 * math.Pow(10, (AudibleDBFS+noiseOverAudibleDB)/20)
	pcm := make([]int16, rate)
	for i := range pcm {
		v := rng.NormFloat64() * noiseRMS
		if i >= rate/5 && i < rate*3/5 {
			v += 3300 * math.Sin(2*math.Pi*200*float64(i)/rate)
		}
		pcm[i] = int16(v)
	}
	return pcm
}

func recordingEnd(pcm []int16, rate int) int {
	end, _ := RecordingSpeechEnd(pcm, rate)
	return end
}

// A recording's speech ends with its last word, not with the room noise
// after it, which the audibility threshold alone counts as sound.
func TestRecordingSpeechEnd(t *testing.T) {
	const rate = 16000
	pcm := roomWithWord(3)
	if end := AudibleEnd(pcm, rate); end < rate*9/10 {
		t.Fatalf("the noise is not audible (audible end %d): the test proves nothing", end)
	}
	end, quiet := RecordingSpeechEnd(pcm, rate)
	if want := rate * 3 / 5; end < want || end > want+AudibleWindow(rate) {
		t.Errorf("speech end %d, want %d (the end of the word, to a window)", end, want)
	}
	if quiet > AudibleDBFS+3 || quiet < AudibleDBFS+3-2 {
		t.Errorf("quietest window %.1f dBFS, the room is at %.1f", quiet, AudibleDBFS+3)
	}
	// Without room noise the speech end is the audible end.
	clean := make([]int16, rate)
	for i := rate / 5; i < rate*3/5; i++ {
		clean[i] = int16(3300 * math.Sin(2*math.Pi*200*float64(i)/rate))
	}
	if got, want := recordingEnd(clean, rate), AudibleEnd(clean, rate); got != want {
		t.Errorf("clean recording: speech end %d, audible end %d", got, want)
	}
	// Sound throughout, with no quiet to measure a floor on: all speech.
	if got := recordingEnd(clean[rate/5:rate*3/5], rate); got != rate*2/5 {
		t.Errorf("speech throughout: speech end %d, want %d", got, rate*2/5)
	}
	if got := recordingEnd(make([]int16, rate), rate); got != 0 {
		t.Errorf("digital silence: speech end %d, want 0", got)
	}
}
