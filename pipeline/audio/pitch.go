package audio

import (
	"fmt"
	"math"
)

// Pitch estimates the fundamental frequency of speech frame by frame (YIN:
// de Cheveigné and Kawahara, 2002): the lag whose cumulative-mean-normalised
// difference first dips under a threshold is the period. Each frame is
// analysed with the one before it, so a 20 ms frame sees a 40 ms window,
// two periods of the lowest voice it looks for. From 16 kHz up the frames
// are decimated by two first (speech's fundamentals and the harmonics
// that carry them lie far below 4 kHz), which makes it four times cheaper.
type Pitch struct {
	rate           int // of the analysis, after decimation
	decimate       int
	minLag, maxLag int
	win            []float32 // the previous frame, then the current one
	d              []float32 // the difference function, by lag
}

// Pitch search range: the lowest adult male voices to the highest speaking
// voices of women and children.
const (
	pitchMinHz = 60
	pitchMaxHz = 450
	// yinThreshold is YIN's absolute threshold: the first lag whose
	// normalised difference falls under it is taken (the paper's 0.1-0.15).
	yinThreshold = 0.15
	// yinVoiced bounds the normalised difference of a voiced frame;
	// above it the frame is noise, a fricative or a mix.
	yinVoiced = 0.35
)

// NewPitch returns a tracker for frames of frameSamples samples at rate Hz.
func NewPitch(rate, frameSamples int) (*Pitch, error) {
	dec := 1
	if rate >= 16000 && frameSamples%2 == 0 {
		dec = 2
	}
	r, n := rate/dec, frameSamples/dec
	minLag, maxLag := r/pitchMaxHz, r/pitchMinHz+1
	if rate < 8000 || frameSamples < 1 || n+maxLag+1 > 2*n {
		return nil, fmt.Errorf("audio: pitch: %d-sample frames at %d Hz are shorter than one period of %d Hz", frameSamples, rate, pitchMinHz)
	}
	return &Pitch{
		rate: r, decimate: dec, minLag: minLag, maxLag: maxLag,
		win: make([]float32, 2*n),
		d:   make([]float32, maxLag+2),
	}, nil
}

// Reset forgets the previous frame.
func (p *Pitch) Reset() { clear(p.win) }

// Process analyses one frame (of the length given to NewPitch) and returns
// its fundamental frequency in Hz, or 0 when it is not voiced.
func (p *Pitch) Process(frame []int16) float64 {
	n := len(p.win) / 2
	copy(p.win, p.win[n:])
	cur := p.win[n:]
	for i := range cur {
		var v float32
		for k := i * p.decimate; k < (i+1)*p.decimate && k < len(frame); k++ {
			v += float32(frame[k])
		}
		cur[i] = v
	}
	// The window: w samples from the start, compared with the same length
	// lag samples later.
	x := p.win
	w := len(x) - p.maxLag - 1
	d := p.d
	d[0] = 0
	var sum float32
	best, bestLag := float32(math.MaxFloat32), 0
	for lag := 1; lag <= p.maxLag; lag++ {
		acc := sqDiff(x[:w], x[lag:lag+w])
		sum += acc
		if sum == 0 {
			d[lag] = 1
			continue
		}
		d[lag] = acc * float32(lag) / sum
	}
	for lag := p.minLag; lag <= p.maxLag; lag++ {
		if d[lag] < yinThreshold {
			for lag < p.maxLag && d[lag+1] < d[lag] {
				lag++
			}
			best, bestLag = d[lag], lag
			break
		}
		if d[lag] < best {
			best, bestLag = d[lag], lag
		}
	}
	if bestLag == 0 || best > yinVoiced || bestLag >= p.maxLag {
		return 0
	}
	// Parabolic interpolation between the neighbouring lags.
	period := float64(bestLag)
	if bestLag > 1 {
		a, b, c := float64(d[bestLag-1]), float64(d[bestLag]), float64(d[bestLag+1])
		if den := a - 2*b + c; den > 0 {
			period += 0.5 * (a - c) / den
		}
	}
	return float64(p.rate) / period
}

// sqDiff is the sum of (a[i]-b[i])², four independent sums at a time.
func sqDiff(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		e0, e1, e2, e3 := a[i]-b[i], a[i+1]-b[i+1], a[i+2]-b[i+2], a[i+3]-b[i+3]
		s0 += e0 * e0
		s1 += e1 * e1
		s2 += e2 * e2
		s3 += e3 * e3
	}
	for ; i < len(a); i++ {
		e := a[i] - b[i]
		s0 += e * e
	}
	return s0 + s1 + s2 + s3
}
