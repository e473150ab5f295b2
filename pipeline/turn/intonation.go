package turn

import (
	"math"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// The intonation of the speech before a pause is a second, independent cue
// to whether the person has finished (audio.Intonation measures it). In
// dialogue corpora a turn that ends mostly ends low, at the bottom of the
// speaker's range, or with a question's rise; a person who stops level or
// rising in mid or upper range (the "continuation" or plateau contour)
// mostly goes on. It is strongest where the text is weakest: a question
// the recogniser got wrong still falls at its end, and a phrase cut off
// after a complete-looking word still hangs. Questions that rise end
// complete in their words, which the text score reads.

// Contour positions (audio.Contour.Range) and slopes that the cue turns on.
const (
	// At or below lowEnd the ending lies near the bottom of the speaker's
	// range; at or above highEnd in its upper half. In between the cue
	// moves linearly from yield to hold.
	intonationLowEnd  = 0.2
	intonationHighEnd = 0.5
	// An ending that still rises faster than this (semitones per second)
	// is not a final fall, however low it is; one that falls faster is
	// not a plateau, however high.
	intonationRiseStPerS = 15
	intonationFallStPerS = 15
	// Fewer voiced frames than this in the last 300 ms tell nothing.
	intonationMinVoiced = 3
)

// IntonationCue is the log-odds that the contour of the speech before a
// pause adds to the text's end-of-utterance score: up to IntonationYield
// for a low, falling ending, down to -IntonationHold for one that stays up.
func (c Config) IntonationCue(k audio.Contour) float64 {
	if k.Voiced < intonationMinVoiced || math.IsNaN(k.Range) || (c.IntonationYield == 0 && c.IntonationHold == 0) {
		return 0
	}
	t := min(1, max(0, (k.Range-intonationLowEnd)/(intonationHighEnd-intonationLowEnd)))
	cue := c.IntonationYield*(1-t) - c.IntonationHold*t
	switch {
	case k.Slope > intonationRiseStPerS:
		cue = min(cue, 0)
	case k.Slope < -intonationFallStPerS:
		cue = max(cue, 0)
	}
	return cue
}

// WithCue returns score moved by cue units of log-odds.
func WithCue(score, cue float64) float64 {
	if cue == 0 || math.IsNaN(score) {
		return score
	}
	return 1 / (1 + math.Exp(-(logit(score) + cue)))
}
