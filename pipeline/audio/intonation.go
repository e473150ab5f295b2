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
	// The last contourLookbackFrames speech frames: semitones over
	// pitchRefHz, NaN where unvoiced.
	ring  []float32
	next  int
	count int
	// hist is the speaker's voiced pitch distribution over the session,
	// decaying, in bins of histBinSt semitones from 0.
	hist    [histBins]float32
	histSum float32
	// A recalled profile (Recall) is used once the session's own voiced
	// frames show the same speaker: until then checking is set and own
	// holds those frames alone; lo and hi are the profile's 10th and 90th
	// percentiles.
	checking bool
	recalled bool // a profile was recalled (Recall)
	own      [histBins]float32
	ownSum   float32
	lo, hi   float64
	// Voices another session heard (RecallRegister), offered while
	// checking; borrowed is set once one matched: hist then holds that
	// voice's profile as a prior and own keeps this session's frames alone.
	voices   []PitchProfile
	borrowed bool
	// Ending's buffers, so that it allocates nothing.
	last, sorted, end []float32
}

const (
	// contourEndFrames: the ending is the median of the last voiced
	// frames within this many (100 ms).
	contourEndFrames = 5
	// contourSlopeFrames: the direction is fitted over this many (300 ms).
	contourSlopeFrames = 15
	// contourLookbackFrames: when the last 300 ms hold fewer than 3
	// voiced frames (a final fricative, creak, the VAD's trailing frames
	// of breath or room), the window ends at the last voiced frame within
	// this many (600 ms) instead: the ending is the last voiced syllable's.
	contourLookbackFrames = 30
	pitchRefHz            = 55.0 // semitone 0
	histBinSt             = 0.5
	histBins              = 80 // 0..40 semitones: 55-550 Hz
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
	// A recalled profile is checked against the session's first
	// speakerCheckFrames voiced frames (0.4 s): their median must lie
	// within speakerMarginSt of the profile's 10th-90th percentile range,
	// or the profile is another speaker's and is dropped. Registers of
	// men, women and children lie 5-12 semitones apart; one person's
	// median moves 1-2 semitones between sessions.
	speakerCheckFrames = 20
	speakerMarginSt    = 2.5
	// A voice borrowed for its register (RecallRegister) must also have
	// its median within registerMatchSt of the session's: speakers of one
	// register differ by a few semitones, so a closer voice is a better
	// guess at where this speaker's range lies.
	registerMatchSt = 2
)

// NewIntonation returns a tracker for 20 ms frames at rate Hz.
func NewIntonation(rate, frameSamples int) (*Intonation, error) {
	p, err := NewPitch(rate, frameSamples)
	if err != nil {
		return nil, err
	}
	return &Intonation{pitch: p, ring: make([]float32, contourLookbackFrames),
		last: make([]float32, 0, contourSlopeFrames), sorted: make([]float32, 0, contourSlopeFrames),
		end: make([]float32, 0, contourSlopeFrames)}, nil
}

// Speech analyses a frame of speech.
func (t *Intonation) Speech(frame []int16) {
	st := float32(math.NaN())
	if hz := t.pitch.Process(frame); hz > 0 {
		st = float32(12 * math.Log2(hz/pitchRefHz))
		if b := int(st / histBinSt); b >= 0 && b < histBins {
			addDecayed(&t.hist, &t.histSum, b)
			if t.checking || t.borrowed {
				addDecayed(&t.own, &t.ownSum, b)
				if t.checking && t.ownSum >= speakerCheckFrames {
					t.checkSpeaker()
				}
			}
		}
	}
	t.ring[t.next] = st
	t.next = (t.next + 1) % len(t.ring)
	t.count++
}

// addDecayed counts a voiced frame in bin b of a decaying histogram.
func addDecayed(h *[histBins]float32, sum *float32, b int) {
	for i := range h {
		h[i] *= histDecay
	}
	*sum = *sum*histDecay + 1
	h[b]++
}

// PitchProfile is what a tracker has learnt of its speaker's pitch
// (Intonation.Profile), for a later session of the same device to start
// from (Intonation.Recall). A value: copying it copies the profile.
type PitchProfile struct {
	hist [histBins]float32
	sum  float32
}

// Known reports whether the profile holds enough voiced speech to place a
// pitch in the speaker's range.
func (p PitchProfile) Known() bool { return p.sum >= rangeMinFrames }

// Heard reports whether the profile holds enough voiced speech to be worth
// keeping (0.4 s): a later session adds to it, so a device whose every
// question is shorter than the 1 s a range needs still gets one.
func (p PitchProfile) Heard() bool { return p.sum >= speakerCheckFrames }

// SameRegister reports whether q's median pitch lies within 2 semitones
// of p's (registerMatchSt): the same kind of voice, if not the same
// person. False when either is empty.
func (p PitchProfile) SameRegister(q PitchProfile) bool {
	if p.sum <= 0 || q.sum <= 0 {
		return false
	}
	return math.Abs(p.median()-q.median()) <= registerMatchSt
}

// median is the profile's median pitch in semitones.
func (p *PitchProfile) median() float64 { return percentile(&p.hist, p.sum, 0.5) }

// Add counts q's voiced frames into p: short sessions of one register
// add up to a range, as a device's do.
func (p *PitchProfile) Add(q PitchProfile) {
	for i := range p.hist {
		p.hist[i] += q.hist[i]
	}
	p.sum += q.sum
}

// Profile returns the speaker's pitch as heard so far (a recalled profile
// included once this session's speech matched it; a borrowed voice never).
func (t *Intonation) Profile() PitchProfile {
	if t.checking || t.borrowed {
		return PitchProfile{t.own, t.ownSum}
	}
	return PitchProfile{t.hist, t.histSum}
}

// Recall starts the tracker from a profile an earlier session learnt, so
// that the first pause of this one can be placed in the speaker's range
// (on its own the tracker needs 1 s of voiced speech first). The profile
// is used once the session's first 0.4 s of voiced speech lie in its range,
// and dropped if they do not (another person at the same device); a
// profile not yet Known counts towards the range with the session's own
// speech. Call it before the first frame; a profile not Heard is ignored.
func (t *Intonation) Recall(p PitchProfile) {
	if !p.Heard() || t.count > 0 {
		return
	}
	t.hist, t.histSum = p.hist, p.sum
	t.lo, t.hi = percentile(&p.hist, p.sum, 0.1), percentile(&p.hist, p.sum, 0.9)
	t.checking, t.recalled = true, true
}

// RecallRegister is Recall for a speaker nobody remembers: voices holds
// the profiles of other people the server heard lately. Once the session's
// first 0.4 s of voiced speech show its register, the voice whose median
// lies closest to the session's (within registerMatchSt, and the session's
// within its range as for Recall) stands in for the speaker's own range
// until the session has heard enough of its own: the end of a first phrase
// is then placed in a whole range, where its own frames alone would put it
// at the bottom of the little heard so far. If no voice matches, the
// session learns alone. Profile keeps returning this session's frames
// only. Call it before the first frame; after Recall, the voices are
// offered only if the recalled profile turns out to be another speaker's.
// Voices that are not Known are passed over. The tracker keeps the slice.
func (t *Intonation) RecallRegister(voices []PitchProfile) {
	if t.count > 0 || len(voices) == 0 {
		return
	}
	t.voices, t.checking = voices, true
}

// checkSpeaker keeps the recalled profile if the session's own voiced
// frames lie in its range, and drops it otherwise; or picks the voice
// RecallRegister offered that matches them best.
func (t *Intonation) checkSpeaker() {
	t.checking = false
	med := percentile(&t.own, t.ownSum, 0.5)
	voices := t.voices
	t.voices = nil
	if t.recalled {
		if med >= t.lo-speakerMarginSt && med <= t.hi+speakerMarginSt {
			return // the remembered speaker
		}
		t.hist, t.histSum = t.own, t.ownSum
	}
	if voices != nil {
		best, bestD := -1, float64(registerMatchSt)
		for i := range voices {
			v := &voices[i]
			if !v.Known() {
				continue
			}
			lo, hi := percentile(&v.hist, v.sum, 0.1), percentile(&v.hist, v.sum, 0.9)
			d := math.Abs(v.median() - med)
			if med >= lo-speakerMarginSt && med <= hi+speakerMarginSt && d <= bestD {
				best, bestD = i, d
			}
		}
		if best >= 0 {
			v := &voices[best]
			for i := range t.hist {
				t.hist[i] = v.hist[i] + t.own[i]
			}
			t.histSum, t.borrowed = v.sum+t.ownSum, true
		}
	}
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
	// Voiced frames among the 300 ms the contour was taken over (the last
	// 300 ms of speech, or those up to its last voiced frame when they
	// held under 3); the rest is meaningless when it is under 3.
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
	// The window ends at the newest frame, or at the last voiced one if the
	// newest contourSlopeFrames hold under 3 voiced.
	stop := 0
	if t.voicedIn(min(n, contourSlopeFrames)) < 3 {
		for b := 0; b < n; b++ {
			if !math.IsNaN(float64(t.back(b))) {
				stop = b
				break
			}
		}
	}
	w := min(contourSlopeFrames, n-stop)
	// The window's frames, oldest first.
	last := t.last[:0]
	for i := w - 1; i >= 0; i-- {
		last = append(last, t.back(stop+i))
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
	if t.checking {
		return c // not yet known to be the recalled profile's speaker
	}
	p10, p90 := percentile(&t.hist, t.histSum, 0.1), percentile(&t.hist, t.histSum, 0.9)
	if t.histSum >= rangeMinFrames && p90-p10 >= rangeMinSt {
		c.Range = (e - p10) / (p90 - p10)
	}
	return c
}

// back is the pitch of the speech frame b frames before the newest.
func (t *Intonation) back(b int) float32 {
	return t.ring[(t.next-1-b+2*len(t.ring))%len(t.ring)]
}

// voicedIn counts the voiced frames among the newest n.
func (t *Intonation) voicedIn(n int) int {
	v := 0
	for b := range n {
		if !math.IsNaN(float64(t.back(b))) {
			v++
		}
	}
	return v
}

// percentile q of a pitch histogram with total weight sum, in semitones.
func percentile(h *[histBins]float32, sum, q float32) float64 {
	target := q * sum
	var acc float32
	for i, w := range h {
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
