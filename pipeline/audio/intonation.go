package audio

import (
	"math"
	"slices"
)

// Intonation follows a speaker's pitch through the speech frames of a
// session and describes how the speech before a pause ended: how low in the
// speaker's range its last voiced syllable was, and where the pitch was
// heading. A statement or a wh-question ends falling to the bottom of the
// range, a yes/no question rising; speech that goes on after a pause
// mostly stops level in mid range (the "continuation" or plateau contour,
// the strongest turn-holding cue found in dialogue corpora).
type Intonation struct {
	pitch *Pitch
	// The last contourSlopeFrames speech frames: semitones over
	// pitchRefHz, NaN where unvoiced.
	ring  []float32
	next  int
	count int
	// hist is the speaker's voiced pitch distribution over the session,
	// decaying, in bins of histBinSt semitones from 0.
	hist    [histBins]float32
	histSum float32
	// Ending's buffers, so that it allocates nothing.
	last, sorted, end []float32
}

const (
	// contourEndFrames: the ending is the median of the last voiced
	// frames within this many (100 ms).
	contourEndFrames = 5
	// contourSlopeFrames: the direction is fitted over this many (300 ms).
	contourSlopeFrames = 15
	pitchRefHz         = 55.0 // semitone 0
	histBinSt          = 0.5
	histBins           = 80 // 0..40 semitones: 55-550 Hz
	// histDecay per voiced frame: the range follows the speaker over about
	// 15 s of voiced speech.
	histDecay = 0.9985
	// octaveJumpSt: a voiced frame this far from the window's median is an
	// octave error of the tracker, not intonation.
	octaveJumpSt = 6
	// The speaker's range is known after rangeMinFrames voiced frames
	// (1 s) that span at least rangeMinSt semitones between their 10th and
	// 90th percentiles. Sooner, the end of a first phrase reads low in the
	// range only because pitch declines through an utterance.
	rangeMinFrames = 50
	rangeMinSt     = 2
)

// NewIntonation returns a tracker for 20 ms frames at rate Hz.
func NewIntonation(rate, frameSamples int) (*Intonation, error) {
	p, err := NewPitch(rate, frameSamples)
	if err != nil {
		return nil, err
	}
	return &Intonation{pitch: p, ring: make([]float32, contourSlopeFrames),
		last: make([]float32, 0, contourSlopeFrames), sorted: make([]float32, 0, contourSlopeFrames),
		end: make([]float32, 0, contourSlopeFrames)}, nil
}

// Speech analyses a frame of speech.
func (t *Intonation) Speech(frame []int16) {
	st := float32(math.NaN())
	if hz := t.pitch.Process(frame); hz > 0 {
		st = float32(12 * math.Log2(hz/pitchRefHz))
		if b := int(st / histBinSt); b >= 0 && b < histBins {
			for i := range t.hist {
				t.hist[i] *= histDecay
			}
			t.histSum = t.histSum*histDecay + 1
			t.hist[b]++
		}
	}
	t.ring[t.next] = st
	t.next = (t.next + 1) % len(t.ring)
	t.count++
}

// Gap tells the tracker that audio went by that was not speech: the next
// frame is not continuous with the last.
func (t *Intonation) Gap() { t.pitch.Reset() }

// Listen follows a frame inside an utterance, given the VAD's count of
// silent frames up to it: speech is analysed, and the first silent frame
// of a pause returns the ending of the speech before it (ended true).
func (t *Intonation) Listen(frame []int16, silentFrames int) (c Contour, ended bool) {
	switch silentFrames {
	case 0:
		t.Speech(frame)
	case 1:
		c = t.Ending()
		t.Gap()
		return c, true
	}
	return c, false
}

// Contour describes the end of the speech so far.
type Contour struct {
	// Voiced frames among the last contourSlopeFrames; the rest is
	// meaningless when it is under 3.
	Voiced int
	// Range is where the ending's pitch lies in the speaker's 10th-90th
	// percentile range (0 = the bottom, 1 = the top); NaN until the
	// tracker has heard enough of the speaker (rangeMinFrames voiced
	// frames spanning rangeMinSt).
	Range float64
	// Slope is the pitch's direction over the last voiced 300 ms, in
	// semitones per second.
	Slope float64
}

// Ending returns the contour of the last speech frames.
func (t *Intonation) Ending() Contour {
	c := Contour{Range: math.NaN()}
	n := min(t.count, len(t.ring))
	// The ring's frames, oldest first.
	last := t.last[:0]
	for i := range n {
		last = append(last, t.ring[(t.next-n+i+len(t.ring))%len(t.ring)])
	}
	voiced := t.sorted[:0]
	for _, v := range last {
		if !math.IsNaN(float64(v)) {
			voiced = append(voiced, v)
		}
	}
	c.Voiced = len(voiced)
	if c.Voiced < 3 {
		return c
	}
	med := median(voiced)
	// Least squares over the voiced frames near the median.
	var sx, sy, sxx, sxy, m float64
	for i, v := range last {
		if math.IsNaN(float64(v)) || math.Abs(float64(v-med)) > octaveJumpSt {
			continue
		}
		x, y := float64(i)*0.02, float64(v)
		sx, sy, sxx, sxy, m = sx+x, sy+y, sxx+x*x, sxy+x*y, m+1
	}
	if den := m*sxx - sx*sx; m >= 3 && den > 0 {
		c.Slope = (m*sxy - sx*sy) / den
	}
	end := t.end[:0]
	for i := max(0, len(last)-contourEndFrames); i < len(last); i++ {
		if v := last[i]; !math.IsNaN(float64(v)) && math.Abs(float64(v-med)) <= octaveJumpSt {
			end = append(end, v)
		}
	}
	if len(end) == 0 {
		// Unvoiced to the end (a final consonant): the last voiced frames.
		for i := len(last) - 1; i >= 0 && len(end) < 3; i-- {
			if v := last[i]; !math.IsNaN(float64(v)) && math.Abs(float64(v-med)) <= octaveJumpSt {
				end = append(end, v)
			}
		}
	}
	if len(end) == 0 {
		return c
	}
	e := float64(median(end))
	p10, p90 := t.percentile(0.1), t.percentile(0.9)
	if t.histSum >= rangeMinFrames && p90-p10 >= rangeMinSt {
		c.Range = (e - p10) / (p90 - p10)
	}
	return c
}

// percentile of the speaker's voiced pitch, in semitones.
func (t *Intonation) percentile(q float32) float64 {
	target := q * t.histSum
	var acc float32
	for i, w := range t.hist {
		if acc+w >= target {
			frac := float64(0)
			if w > 0 {
				frac = float64((target - acc) / w)
			}
			return (float64(i) + frac) * histBinSt
		}
		acc += w
	}
	return histBins * histBinSt
}

func median(v []float32) float32 {
	slices.Sort(v)
	return v[len(v)/2]
}
