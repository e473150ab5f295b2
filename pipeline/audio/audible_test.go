package audio

import (
	"math"
	"testing"
)

func tone(n, rate int, dbfs float64) []int16 {
	amp := 32768 * math.Pow(10, dbfs/20) * math.Sqrt2 // sine RMS = amp/sqrt2
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(amp * math.Sin(2*math.Pi*440*float64(i)/float64(rate)))
	}
	return out
}

func TestFirstAudible(t *testing.T) {
	const rate = 16000
	pcm := make([]int16, rate) // 1 s of silence
	copy(pcm[8000:], tone(800, rate, -30))
	if got := FirstAudible(pcm, rate); got != 8000 {
		t.Fatalf("FirstAudible = %d, want 8000", got)
	}
	if got := AudibleEnd(pcm, rate); got != 8800 {
		t.Fatalf("AudibleEnd = %d, want 8800", got)
	}
	quiet := tone(rate, rate, -60)
	if FirstAudible(quiet, rate) != -1 || IsAudible(quiet, rate) || AudibleEnd(quiet, rate) != 0 {
		t.Fatal("a -60 dBFS tone counted as audible")
	}
	if !IsAudible(tone(rate, rate, -45), rate) {
		t.Fatal("a -45 dBFS tone did not count as audible")
	}
	click := make([]int16, rate)
	click[100] = 3000
	// A lone sample of 3000 in an 80-sample window has RMS 335 = -39.8 dBFS:
	// loud clicks count, which is right (a person hears them).
	if FirstAudible(click, rate) != 80 {
		t.Fatalf("click at 100: FirstAudible = %d, want window start 80", FirstAudible(click, rate))
	}
}

func TestFirstAudibleAllocs(t *testing.T) {
	pcm := make([]int16, 960)
	if n := testing.AllocsPerRun(100, func() { FirstAudible(pcm, 48000) }); n != 0 {
		t.Fatalf("FirstAudible allocates %v times", n)
	}
}
