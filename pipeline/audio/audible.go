package audio

import "math"

// Audibility: one definition shared by the TTS trimming, the server's
// first_audible_out mark and every client that measures heard latency.
const (
	// AudibleDBFS is the level at which a window counts as audible: -50 dBFS
	// RMS is about 30 dB above a quiet room played back at a normal volume
	// and 10-20 dB under the softest speech sounds (unvoiced fricatives) of
	// TTS and recorded voices, so dither and codec noise never count while
	// the onset of the first word does.
	AudibleDBFS = -50.0
	// AudibleWindowMs is the window the level is measured over: 5 ms is
	// short enough to place an onset to within a few ms and long enough
	// that a single-sample click does not count.
	AudibleWindowMs = 5
)

// audibleMeanSq is the mean square of a window whose RMS is AudibleDBFS
// (full scale = 32768).
var audibleMeanSq = meanSqOf(AudibleDBFS)

// meanSqOf is the mean square of a window whose RMS is dbfs.
func meanSqOf(dbfs float64) float64 { return math.Pow(32768*math.Pow(10, dbfs/20), 2) }

// AudibleWindow returns the window length in samples at sampleRate.
func AudibleWindow(sampleRate int) int {
	n := sampleRate * AudibleWindowMs / 1000
	if n < 1 {
		n = 1
	}
	return n
}

// FirstAudible returns the index of the first sample of the first audible
// window of pcm (windows of AudibleWindow(sampleRate) samples from the
// start; a shorter last window is judged on its own length), or -1 when no
// window is audible. It does not allocate.
func FirstAudible(pcm []int16, sampleRate int) int {
	w := AudibleWindow(sampleRate)
	for start := 0; start < len(pcm); start += w {
		end := min(start+w, len(pcm))
		if windowAudible(pcm[start:end]) {
			return start
		}
	}
	return -1
}

// AudibleEnd returns the index one past the last sample of the last audible
// window of pcm, or 0 when no window is audible. Windows are aligned to the
// start of pcm, as in FirstAudible.
func AudibleEnd(pcm []int16, sampleRate int) int {
	return windowsEnd(pcm, sampleRate, audibleMeanSq)
}

// windowsEnd returns one past the last window of pcm whose mean square
// reaches minMeanSq, or 0.
func windowsEnd(pcm []int16, sampleRate int, minMeanSq float64) int {
	w := AudibleWindow(sampleRate)
	last := 0
	for start := 0; start < len(pcm); start += w {
		end := min(start+w, len(pcm))
		if windowAbove(pcm[start:end], minMeanSq) {
			last = end
		}
	}
	return last
}

// IsAudible reports whether any window of pcm is audible.
func IsAudible(pcm []int16, sampleRate int) bool {
	return FirstAudible(pcm, sampleRate) >= 0
}

func windowAudible(win []int16) bool { return windowAbove(win, audibleMeanSq) }

func windowAbove(win []int16, minMeanSq float64) bool {
	var sum float64
	for _, s := range win {
		v := float64(s)
		sum += v * v
	}
	return sum >= minMeanSq*float64(len(win))
}
