package audio

import (
	"math"
	"slices"
)

// The end of a person's speech, as a listener would place it: the last
// sound that stands out of the room's noise. Real recordings carry room
// noise at or above the audibility threshold (AudibleDBFS), so "the last
// audible sample" runs on to the end of the recording; a window only counts
// as speech when it is also SpeechOverFloorDB above the noise floor.
const (
	// SpeechOverFloorDB: the weakest word endings (an unvoiced fricative)
	// stand 6-10 dB above the room, while 20 ms windows of room noise
	// wander a few dB around its floor.
	SpeechOverFloorDB = 6.0
	// floorPercentile of the 20 ms windows' levels is the floor: the quiet
	// between words and after them, not the speech.
	floorPercentile = 10
	// floorUnderLoudDB: speech peaks 25-40 dB over a room's noise in the
	// recordings we have (pocketsphinx-testdata).
	floorUnderLoudDB = 25
)

// LevelDBFS returns the RMS level of pcm in dBFS (-120 for nothing or
// digital silence).
func LevelDBFS(pcm []int16) float64 {
	if len(pcm) == 0 {
		return -120
	}
	var sum float64
	for _, s := range pcm {
		v := float64(s)
		sum += v * v
	}
	return 10 * math.Log10(sum/float64(len(pcm))/(32768*32768)+1e-12)
}

// LevelEnd is AudibleEnd with its threshold at dbfs instead of AudibleDBFS.
func LevelEnd(pcm []int16, sampleRate int, dbfs float64) int {
	return windowsEnd(pcm, sampleRate, meanSqOf(dbfs))
}

// NoiseFloorDBFS returns the noise floor of a stretch of audio from the
// levels of its (about 20 ms) frames: their 10th percentile, the quiet
// between and after words, but at least floorUnderLoudDB under their 95th
// percentile, for audio that is sound throughout and has no quiet to
// measure. It sorts levels in place.
func NoiseFloorDBFS(levels []float64) float64 {
	if len(levels) == 0 {
		return -120
	}
	slices.Sort(levels)
	return min(levels[len(levels)*floorPercentile/100], levels[len(levels)*95/100]-floorUnderLoudDB)
}

// SpeechDBFS is the level from which a window counts as speech over a noise
// floor: audible, and SpeechOverFloorDB above the floor.
func SpeechDBFS(floor float64) float64 { return max(AudibleDBFS, floor+SpeechOverFloorDB) }

// RecordingSpeechEnd returns where the speech of a whole recording ends:
// one past its last 5 ms window at SpeechDBFS of the recording's noise
// floor (NoiseFloorDBFS of its 20 ms windows) inside a 20 ms window that
// can hold speech (SpeechFrame), or 0 when it holds none; and the level of
// its quietest window, the room without anything happening in it.
func RecordingSpeechEnd(pcm []int16, sampleRate int) (end int, quietDBFS float64) {
	w := max(1, sampleRate/50)
	n := len(pcm) / w
	if n == 0 {
		return AudibleEnd(pcm, sampleRate), -120
	}
	levels := make([]float64, n)
	for i := range levels {
		levels[i] = LevelDBFS(pcm[i*w : (i+1)*w])
	}
	limit := SpeechDBFS(NoiseFloorDBFS(slices.Clone(levels)))
	quietDBFS = slices.Min(levels)
	for i := n - 1; i >= 0; i-- {
		if !SpeechFrame(levels[i], limit) {
			continue
		}
		if end := LevelEnd(pcm[i*w:(i+1)*w], sampleRate, limit); end > 0 {
			return i*w + end, quietDBFS
		}
	}
	return 0, quietDBFS
}

// SpeechFrame reports whether a (about 20 ms) frame at level can hold
// speech against limit (SpeechDBFS): where the room's noise is audible, a
// 5 ms window of it may reach the limit but a whole frame hardly does, so
// the frame must; in a quiet room (limit at the audibility threshold)
// every audible window is sound the person made.
func SpeechFrame(level, limit float64) bool { return limit <= AudibleDBFS || level >= limit }
